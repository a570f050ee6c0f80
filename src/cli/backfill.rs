//! `kubectl kronjob backfill NAME --from T1 --to T2 [--parallel N] [--dry-run]`: run the past
//! slots of a range that never ran. The command asks; the manager runs them.
//!
//! The request is the CronJob's `batch.kronjob.dev/backfill` annotation
//! (`{"from":..,"to":..,"parallel":N}`); the manager creates each slot's run (a Job, or an
//! object of the CronJob's kind) as the schedule
//! would have (same name, same scheduled-time annotation, marked `batch.kronjob.dev/backfilled`),
//! oldest first, at most N unfinished at a time, and removes the request once every slot of
//! the range ran. Only slots the CronJob's status records as missed (or from before its
//! creation) run, so a slot never runs twice and the same range again creates nothing. The
//! command prints the slots it will run (`--dry-run` stops there), writes the request, then
//! prints each run as it is created, until the manager removes the request (`--wait`).

use std::collections::BTreeSet;
use std::io::Write;
use std::time::Duration;

use jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use super::CliError;
use super::cluster::KubeArgs;
use super::table::Table;
use super::workloads::{Served, runs_of, type_of};
use crate::api::{ANNOTATION_BACKFILL, CronJob};
use crate::schedule;
use crate::workload::backfill::{self, MAX_PARALLEL, Request, SlotState};
use crate::workload::scheduled_name;

/// How often the Jobs and the request are looked at while waiting.
const POLL: Duration = Duration::from_secs(1);

/// Flags of `backfill`.
#[derive(clap::Args, Debug)]
pub struct BackfillArgs {
    /// Name of the CronJob.
    name: String,
    /// The first instant of the range (RFC 3339, e.g. 2026-11-20T00:00:00Z).
    #[arg(long)]
    from: String,
    /// The last instant of the range (RFC 3339); not in the future.
    #[arg(long)]
    to: String,
    /// Most Jobs of the backfill unfinished at once (1 to 10).
    #[arg(long, default_value_t = 1)]
    parallel: u32,
    /// Print the slots of the range and what the backfill does with each, and ask for nothing.
    #[arg(long)]
    dry_run: bool,
    /// How long to wait for the manager to run every slot (`0`: ask and return).
    #[arg(long, default_value = "10m", value_parser = crate::duration::parse_flag_duration)]
    wait: Duration,
    #[command(flatten)]
    kube: KubeArgs,
}

impl BackfillArgs {
    /// The connection flags.
    pub fn kube(&self) -> &KubeArgs {
        &self.kube
    }
}

/// The request the flags make at `now`: a usage error for times that are not RFC 3339, a
/// range that ends before it starts or in the future, and `--parallel` out of 1 to 10.
pub fn request_of(args: &BackfillArgs, now: Timestamp) -> Result<Request, CliError> {
    let time = |flag: &str, text: &str| {
        text.parse::<Timestamp>()
            .map_err(|e| CliError::Usage(format!("--{flag} {text:?} is not an RFC 3339 time: {e}")))
    };
    let from = time("from", &args.from)?;
    let to = time("to", &args.to)?;
    if to > now {
        return Err(CliError::Usage(format!(
            "--to {to} is in the future (now {}): a backfill runs past slots only",
            schedule::floor_second(now)
        )));
    }
    if !(1..=MAX_PARALLEL).contains(&args.parallel) {
        return Err(CliError::Usage(format!(
            "--parallel must be 1 to {MAX_PARALLEL}, not {}",
            args.parallel
        )));
    }
    Request::new(from, to, args.parallel).map_err(|e| CliError::Usage(format!("--from/--to: {e}")))
}

/// Run `backfill` with `client` at `now`.
pub async fn run(
    client: Client,
    args: &BackfillArgs,
    now: Timestamp,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let request = request_of(args, now)?;
    let namespace = args.kube.namespace(&client);
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), &namespace);
    let cj = cronjobs.get(&args.name).await?;
    let what = format!("cronjob.batch.kronjob.dev/{}", args.name);
    let (_, tz) =
        backfill::schedule_of(&cj).map_err(|e| CliError::Failed(format!("{what}: {e}")))?;
    let (excluded, missing) = super::next::exclusions_of(client.clone(), &cj).await?;
    if !missing.is_empty() {
        return Err(CliError::Failed(format!(
            "{what} names Calendar {} that does not exist: no slot of it runs, backfilled or \
             scheduled, until it does",
            missing.join(", ")
        )));
    }
    let existing = run_names(&client, &namespace, &cj).await?;
    let exists = |slot| existing.contains(&scheduled_name(&args.name, slot));
    let slots = backfill::plan_slots(
        &cj,
        &request,
        &backfill::missed(&cj),
        &excluded,
        now,
        exists,
    )
    .map_err(|e| CliError::Failed(format!("{what}: {e}")))?;
    let value = request.value();
    let pending = backfill::requested(&cj).map(str::to_string);
    if let Some(pending) = pending.as_deref()
        && pending != value
    {
        return Err(CliError::Failed(format!(
            "{what} has a backfill in progress ({ANNOTATION_BACKFILL}: {pending}): one at a time; \
             wait for it to finish, or remove the annotation to cancel it"
        )));
    }
    let mut table = Table::new(&["SLOT", "JOB", "ACTION"]);
    for (slot, state) in &slots {
        table.push(vec![
            schedule::scheduled_at(*slot, &tz),
            scheduled_name(&args.name, *slot),
            state.describe().to_string(),
        ]);
    }
    let to_run: Vec<String> = slots
        .iter()
        .filter(|(_, s)| *s == SlotState::Run)
        .map(|(slot, _)| scheduled_name(&args.name, *slot))
        .collect();
    if args.dry_run || pending.is_none() {
        if !table.is_empty() {
            write!(out, "{}", table.render())?;
        }
        writeln!(
            out,
            "{} of {} slots to run, at most {} at a time{}",
            to_run.len(),
            slots.len(),
            request.parallel,
            if args.dry_run { " (dry run)" } else { "" }
        )?;
    }
    if args.dry_run {
        return Ok(());
    }
    if pending.is_none() {
        // Only on the version read: a request written meanwhile by someone else is not replaced.
        let patch = json!({"metadata": {
            "resourceVersion": cj.metadata.resource_version,
            "annotations": {ANNOTATION_BACKFILL: value},
        }});
        cronjobs
            .patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| match &e {
                kube::Error::Api(s) if s.code == 409 => CliError::Failed(format!(
                    "{what} changed while the backfill was being asked for: run the command again"
                )),
                _ => CliError::Api(e),
            })?;
    } else {
        writeln!(out, "{what}: joining the backfill in progress")?;
    }
    if args.wait.is_zero() {
        writeln!(
            out,
            "{what} backfill requested: the manager creates the Jobs"
        )?;
        return Ok(());
    }
    wait(
        &client, &namespace, &cronjobs, &cj, args, &value, &to_run, out,
    )
    .await
}

/// The names of the runs (Jobs, or objects of its kind) `cj` controls.
async fn run_names(
    client: &Client,
    namespace: &str,
    cj: &CronJob,
) -> Result<BTreeSet<String>, CliError> {
    let (_, runs) = runs_of(client, namespace, cj).await?;
    Ok(runs
        .into_iter()
        .map(|r| r.workload.name().to_string())
        .collect())
}

/// Print each run of `to_run` as it appears, until the manager removes the request `value`
/// or `--wait` has passed.
#[allow(clippy::too_many_arguments)]
async fn wait(
    client: &Client,
    namespace: &str,
    cronjobs: &Api<CronJob>,
    cj: &CronJob,
    args: &BackfillArgs,
    value: &str,
    to_run: &[String],
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let served = Served::find(client, &type_of(cj)).await?;
    let deadline = tokio::time::Instant::now() + args.wait;
    let mut seen = BTreeSet::new();
    loop {
        let current = cronjobs.get(&args.name).await?;
        let names = run_names(client, namespace, cj).await?;
        for name in to_run {
            if names.contains(name) && seen.insert(name.clone()) {
                writeln!(out, "{} created", served.name_of(name))?;
            }
        }
        let same = current.metadata.uid == cj.metadata.uid;
        if !same || backfill::requested(&current) != Some(value) {
            writeln!(
                out,
                "cronjob.batch.kronjob.dev/{} backfill done: {} of {} runs created",
                args.name,
                seen.len(),
                to_run.len()
            )?;
            return Ok(());
        }
        if tokio::time::Instant::now() + POLL > deadline {
            return Err(CliError::Failed(format!(
                "the backfill did not finish within {}s ({} of {} runs created): is the kronjob \
                 manager running? The request stays on cronjob.batch.kronjob.dev/{} (annotation \
                 {ANNOTATION_BACKFILL}) and goes on when the manager sees it",
                args.wait.as_secs(),
                seen.len(),
                to_run.len(),
                args.name
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::testing::fixtures::t;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        args: BackfillArgs,
    }

    fn request(flags: &[&str]) -> Result<Request, String> {
        let argv = ["backfill", "cj"].iter().chain(flags);
        let flags = Flags::try_parse_from(argv).map_err(|e| e.to_string())?;
        request_of(&flags.args, t("2026-01-02T00:00:30Z")).map_err(|e| {
            assert_eq!(e.exit_code(), 2, "a usage error: {e}");
            e.to_string()
        })
    }

    #[test]
    fn the_flags_make_a_request_or_a_usage_error() {
        let ok = request(&[
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "2026-01-02T00:00:00Z",
        ])
        .expect("valid");
        assert_eq!(ok.parallel, 1, "one at a time by default");
        let cases = [
            (vec!["--to", "2026-01-03T00:00:00Z"], "is in the future"),
            (vec!["--to", "tomorrow"], "not an RFC 3339 time"),
            (vec!["--to", "2025-12-31T00:00:00Z"], "is before"),
            (
                vec!["--to", "2026-01-02T00:00:00Z", "--parallel", "11"],
                "--parallel must be 1 to 10",
            ),
            (
                vec!["--to", "2026-01-02T00:00:00Z", "--parallel", "0"],
                "--parallel must be 1 to 10",
            ),
        ];
        for (rest, says) in cases {
            let mut flags = vec!["--from", "2026-01-01T00:00:00Z"];
            flags.extend(rest);
            let e = request(&flags).expect_err(says);
            assert!(e.contains(says), "{flags:?}: {e}");
        }
    }
}
