//! `kronjob migrate` (also `kubectl kronjob migrate`): batch/v1 CronJobs become kronjob
//! CronJobs, in an order that never runs a slot twice and never loses one. A dry run by
//! default; `--apply` does it, `--revert` undoes it.
//!
//! - [`plan`]: what happens to each CronJob, from what was read (pure);
//! - [`diff`]: where the two CronJobs' specs differ, field by field (pure);
//! - [`apply`]: the requests that carry a plan out;
//! - here: the flags, reading both kinds of CronJob, and the report.

pub mod apply;
pub mod diff;
pub mod plan;

use std::collections::BTreeMap;
use std::io::Write;

use kube::api::ListParams;
use kube::core::DynamicObject;
use kube::{Api, Client};
use serde::Serialize;
use serde_json::Value;

use self::plan::{Action, Found, Options, Plan, record_of};
use super::CliError;
use super::cluster::{KubeArgs, Scope};
use super::table::{self, DataFormat};
use crate::api::CronJob;

/// Flags of `migrate`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["name", "all", "all_namespaces"])))]
pub struct MigrateArgs {
    /// Name of the batch/v1 CronJob (with --revert: of the migrated kronjob CronJob).
    name: Option<String>,
    /// Every batch/v1 CronJob of the namespace (with --revert: every migrated one).
    #[arg(long)]
    all: bool,
    /// Every batch/v1 CronJob of every namespace (with --revert: every migrated one).
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    /// Do it. Without it, print what would happen and change nothing.
    #[arg(long)]
    apply: bool,
    /// Delete the batch/v1 CronJob once suspended and read, instead of leaving it suspended
    /// (propagationPolicy Orphan: its Jobs keep running).
    #[arg(long, conflicts_with = "revert")]
    delete_original: bool,
    /// Undo migrations: suspend the kronjob CronJob, carry its status back to the batch/v1
    /// CronJob (recreated if it was deleted), restore its suspend, delete the kronjob CronJob.
    #[arg(long)]
    revert: bool,
    /// Print the plan or the results as JSON or YAML: one entry per CronJob.
    #[arg(long, short = 'o', value_enum)]
    output: Option<DataFormat>,
    #[command(flatten)]
    kube: KubeArgs,
}

impl MigrateArgs {
    /// The connection flags.
    pub fn kube(&self) -> &KubeArgs {
        &self.kube
    }
}

/// The result for one CronJob, as `-o json|yaml` prints it.
#[derive(Serialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// What was planned.
    pub action: Action,
    /// What changes (or changed), in order.
    pub changes: Vec<String>,
    /// What the user should know.
    pub warnings: Vec<String>,
    /// Why the CronJob was skipped or its migration stopped.
    pub error: Option<String>,
    /// The kronjob CronJob it becomes (for a migration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cronjob: Option<CronJob>,
}

impl Entry {
    fn new(plan: &Plan, error: Option<String>) -> Self {
        Entry {
            namespace: plan.namespace.clone(),
            name: plan.name.clone(),
            action: plan.action,
            changes: plan.changes.clone(),
            warnings: plan.warnings.clone(),
            error,
            cronjob: plan.target.clone(),
        }
    }
}

/// Everything `-o json|yaml` prints.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Whether nothing was changed (no `--apply`).
    pub dry_run: bool,
    /// One entry per CronJob.
    pub items: Vec<Entry>,
}

/// Run `migrate`: plan every CronJob selected, carry the plans out with `--apply`, report.
/// Fails with [`CliError::Reported`] when any CronJob failed (the others are still done).
pub async fn run(
    client: Client,
    args: &MigrateArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let selection = Selection::of(args, &client);
    let found = gather(&client, &selection).await?;
    let plans = plans(args, &selection, &found);
    if plans.is_empty() {
        writeln!(err, "{}", selection.nothing_found(args.revert))?;
        return Ok(());
    }
    let mut entries = Vec::with_capacity(plans.len());
    for plan in &plans {
        let error = match &plan.error {
            Some(error) => Some(error.clone()),
            None if args.apply => apply::apply(&client, plan).await.err(),
            None => None,
        };
        let entry = Entry::new(plan, error);
        if args.output.is_none() {
            out.write_all(text(&entry, args.apply).as_bytes())?;
            out.flush()?;
        }
        if let Some(error) = &entry.error {
            writeln!(err, "error: {}: {error}", header(&entry))?;
        }
        entries.push(entry);
    }
    let report = Report {
        dry_run: !args.apply,
        items: entries,
    };
    if let Some(format) = args.output {
        table::write_data(&report, format, out)?;
    } else if !args.apply && plans.iter().any(|p| !p.steps.is_empty()) {
        writeln!(
            err,
            "Dry run: nothing was changed; run again with --apply to do it."
        )?;
    }
    let failed = report.items.iter().filter(|e| e.error.is_some()).count();
    if failed > 0 {
        let total = report.items.len();
        return Err(CliError::Reported(format!("{failed} of {total} failed")));
    }
    Ok(())
}

/// `cronjob.batch/NAME -n NS`, the name of an entry in messages.
fn header(entry: &Entry) -> String {
    format!("cronjob.batch/{} -n {}", entry.name, entry.namespace)
}

/// An entry as text: a header line with the action (planned, done or failed), then each change
/// and warning indented.
pub fn text(entry: &Entry, applied: bool) -> String {
    let state = match (&entry.error, applied) {
        (Some(_), _) if entry.action == Action::Skip => "skipped",
        (Some(_), _) => "failed",
        (None, true) => entry.action.done(),
        (None, false) => entry.action.planned(),
    };
    let mut text = format!("{}: {state}\n", header(entry));
    for change in &entry.changes {
        text.push_str(&format!("  {change}\n"));
    }
    for warning in &entry.warnings {
        text.push_str(&format!("  warning: {warning}\n"));
    }
    text
}

/// Which CronJobs the command is about.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Selection {
    /// One name.
    One { namespace: String, name: String },
    /// Every one in the scope.
    Every(Scope),
}

impl Selection {
    fn of(args: &MigrateArgs, client: &Client) -> Self {
        match &args.name {
            Some(name) if !args.all && !args.all_namespaces => Selection::One {
                namespace: args.kube.namespace(client),
                name: name.clone(),
            },
            _ => Selection::Every(args.kube.scope(client, args.all_namespaces)),
        }
    }

    fn nothing_found(&self, revert: bool) -> String {
        let what = if revert {
            "migrated CronJobs"
        } else {
            "batch/v1 CronJobs"
        };
        match self {
            Selection::Every(Scope::Namespace(ns)) | Selection::One { namespace: ns, .. } => {
                format!("No {what} found in {ns} namespace.")
            }
            Selection::Every(Scope::All) => format!("No {what} found."),
        }
    }
}

/// Both CronJobs of one name, as read.
#[derive(Debug, Default)]
struct Pair {
    original: Option<Value>,
    migrated: Option<CronJob>,
}

type Pairs = BTreeMap<(String, String), Pair>;

/// Read the batch/v1 CronJobs, then the kronjob CronJobs, of the selection, by name.
async fn gather(client: &Client, selection: &Selection) -> Result<Pairs, CliError> {
    let mut pairs = Pairs::new();
    let resource = apply::batch_v1_cronjobs();
    match selection {
        Selection::One { namespace, name } => {
            let originals =
                Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource);
            let migrated = Api::<CronJob>::namespaced(client.clone(), namespace);
            let pair = Pair {
                original: originals.get_opt(name).await?.map(|o| json_of(&o)),
                migrated: migrated.get_opt(name).await?,
            };
            pairs.insert((namespace.clone(), name.clone()), pair);
        }
        Selection::Every(scope) => {
            let params = ListParams::default();
            for original in scope.dynamic(client, &resource).list(&params).await?.items {
                let key = key_of(&original.metadata);
                pairs.entry(key).or_default().original = Some(json_of(&original));
            }
            let migrated = scope.api::<CronJob>(client).list(&params).await;
            for migrated in migrated.map_err(super::cluster::listing_error)?.items {
                let key = key_of(&migrated.metadata);
                pairs.entry(key).or_default().migrated = Some(migrated);
            }
        }
    }
    Ok(pairs)
}

fn key_of(
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (String, String) {
    (
        metadata.namespace.clone().unwrap_or_default(),
        metadata.name.clone().unwrap_or_default(),
    )
}

fn json_of(object: &DynamicObject) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// The plan of every pair the command is about: with `--all`, batch/v1 CronJobs and migrated
/// kronjob CronJobs (kronjob CronJobs created as such are not its business).
fn plans(args: &MigrateArgs, selection: &Selection, pairs: &Pairs) -> Vec<Plan> {
    let options = Options {
        delete_original: args.delete_original,
    };
    pairs
        .iter()
        .filter(|(_, pair)| {
            let migrated = pair.migrated.as_ref().and_then(record_of).is_some();
            matches!(selection, Selection::One { .. })
                || migrated
                || (!args.revert && pair.original.is_some())
        })
        .map(|((namespace, name), pair)| {
            let found = Found {
                original: pair.original.as_ref(),
                migrated: pair.migrated.as_ref(),
            };
            if args.revert {
                plan::plan_revert(namespace, name, found)
            } else {
                plan::plan_migration(namespace, name, found, options)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(action: Action, error: Option<&str>) -> Entry {
        Entry {
            namespace: "ns".into(),
            name: "cj".into(),
            action,
            changes: vec!["suspend cronjob.batch/cj".into()],
            warnings: vec!["careful".into()],
            error: error.map(String::from),
            cronjob: None,
        }
    }

    #[test]
    fn text_table() {
        let cases = [
            (
                entry(Action::Migrate, None),
                false,
                "cronjob.batch/cj -n ns: migrate",
            ),
            (
                entry(Action::Migrate, None),
                true,
                "cronjob.batch/cj -n ns: migrated",
            ),
            (
                entry(Action::Migrate, Some("x")),
                true,
                "cronjob.batch/cj -n ns: failed",
            ),
            (
                entry(Action::Skip, Some("x")),
                false,
                "cronjob.batch/cj -n ns: skipped",
            ),
            (
                entry(Action::Revert, None),
                true,
                "cronjob.batch/cj -n ns: reverted",
            ),
            (
                entry(Action::None, None),
                false,
                "cronjob.batch/cj -n ns: nothing to do",
            ),
        ];
        for (entry, applied, first) in cases {
            assert_eq!(
                text(&entry, applied),
                format!("{first}\n  suspend cronjob.batch/cj\n  warning: careful\n"),
            );
        }
    }
}
