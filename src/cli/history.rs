//! `kubectl kronjob history NAME`: the runs of one CronJob, newest first.
//!
//! Two requests: the CronJob (for its UID and its kind), then the objects of its kind labelled
//! with its name (a Job, a JobSet, ...; another kind is looked up first); one counts when that
//! CronJob is its controller (a label alone can be copied). Manual runs asked for at a later time
//! (`trigger --at`) come first, result `Pending`, with the run they will make; then slots
//! waiting in the queue (`concurrencyPolicy: Enqueue`), result `Queued`, without a run yet.

use std::io::Write;

use jiff::Timestamp;
use kube::{Api, Client};

use super::CliError;
use super::cluster::KubeArgs;
use super::table::{self, DataFormat, NONE, Table};
use super::workloads::runs_of;
use crate::api::{CronJob, trigger};
use crate::workload::{Outcome, Ran, Workload, manual_name, ran_for};

/// Flags of `history`.
#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// Name of the CronJob.
    name: String,
    #[command(flatten)]
    kube: KubeArgs,
    /// Print a List of the runs (Jobs, or the objects of the CronJob's kind) as JSON or YAML
    /// instead of the table.
    #[arg(long, short = 'o', value_enum)]
    output: Option<DataFormat>,
}

impl HistoryArgs {
    /// The connection flags.
    pub fn kube(&self) -> &KubeArgs {
        &self.kube
    }
}

/// Run `history` with `client`; `now` is the time ages are measured from.
pub async fn run(
    client: Client,
    args: &HistoryArgs,
    now: Timestamp,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let namespace = args.kube.namespace(&client);
    let cronjob = Api::<CronJob>::namespaced(client.clone(), &namespace)
        .get(&args.name)
        .await?;
    let asked = trigger::requests_of(&cronjob, now).times;
    let (served, mut runs) = runs_of(&client, &namespace, &cronjob).await?;
    let queued: Vec<Timestamp> = cronjob
        .status
        .map(|s| s.queued.iter().map(|t| t.0).collect())
        .unwrap_or_default();
    runs.sort_by(|a, b| sort_key(&b.workload).cmp(&sort_key(&a.workload)));
    // A time asked for whose run exists ran (its request is being removed).
    let pending: Vec<(String, Timestamp)> = asked
        .into_iter()
        .map(|at| (manual_name(&args.name, at), at))
        .filter(|(name, _)| !runs.iter().any(|r| r.workload.name() == name))
        .collect();
    if let Some(format) = args.output {
        let objects: Vec<&serde_json::Value> = runs.iter().map(|r| &r.object).collect();
        table::write_data(&table::list_of(&objects), format, out)?;
    } else if runs.is_empty() && queued.is_empty() && pending.is_empty() {
        writeln!(
            err,
            "No runs of cronjob.batch.kronjob.dev/{} in {namespace} namespace.",
            args.name
        )?;
    } else {
        let workloads: Vec<Workload> = runs.into_iter().map(|r| r.workload).collect();
        let table = runs_table(&workloads, &served.type_.kind, &pending, &queued, now);
        out.write_all(table.render().as_bytes())?;
    }
    Ok(())
}

/// Order runs newest first: by creation time, then start time, then name (all descending).
pub fn newest_first(runs: &mut [Workload]) {
    runs.sort_by(|a, b| sort_key(b).cmp(&sort_key(a)));
}

fn sort_key(run: &Workload) -> (Option<Timestamp>, Option<Timestamp>, &str) {
    (
        run.metadata.creation_timestamp.as_ref().map(|t| t.0),
        run.started,
        run.name(),
    )
}

/// The table of runs: the `queued` slots (newest first, no run yet), then the runs in the
/// order given.
pub fn history_table(runs: &[Workload], kind: &str, queued: &[Timestamp], now: Timestamp) -> Table {
    runs_table(runs, kind, &[], queued, now)
}

/// [`history_table`] after the `pending` manual runs (the run each makes, its time; latest
/// first): START says when it runs. `kind` is the CronJob's, for the rows without a run yet.
pub fn runs_table(
    runs: &[Workload],
    kind: &str,
    pending: &[(String, Timestamp)],
    queued: &[Timestamp],
    now: Timestamp,
) -> Table {
    let mut table = Table::new(&["name", "kind", "scheduled", "result", "start", "duration"]);
    for (name, at) in pending.iter().rev() {
        let start = if *at > now {
            table::from_now(*at, now)
        } else {
            "due".into()
        };
        table.push(vec![
            name.clone(),
            kind.into(),
            at.to_string(),
            "Pending".into(),
            start,
            NONE.into(),
        ]);
    }
    for slot in queued.iter().rev() {
        table.push(vec![
            NONE.into(),
            kind.into(),
            slot.to_string(),
            "Queued".into(),
            NONE.into(),
            NONE.into(),
        ]);
    }
    for run in runs {
        table.push(row(run, now));
    }
    table
}

fn row(run: &Workload, now: Timestamp) -> Vec<String> {
    let start = run.started;
    let result = match run.outcome() {
        None => "Running",
        Some(Outcome::Complete) => "Complete",
        Some(Outcome::Failed) => "Failed",
    };
    let end = match run.finish {
        None => Some(now),
        Some(f) => f.at,
    };
    let duration = match (start, end) {
        (Some(start), Some(end)) => table::human_duration(end.as_second() - start.as_second()),
        _ => NONE.into(),
    };
    vec![
        run.name().to_string(),
        run.type_.kind.clone(),
        scheduled(run),
        result.into(),
        start.map_or_else(|| NONE.into(), |s| table::ago(s, now)),
        duration,
    ]
}

/// The scheduled time a run was created for (`(backfill)` after it for a backfill's run),
/// `manual` for a manual run.
fn scheduled(run: &Workload) -> String {
    match ran_for(&run.metadata) {
        Ran::Scheduled(at) if crate::workload::backfilled(&run.metadata) => {
            format!("{at} (backfill)")
        }
        Ran::Scheduled(at) => at.into(),
        Ran::Manual => "manual".into(),
        Ran::Unknown => NONE.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::*;
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn created(job: Job, at: &str) -> Job {
        let mut job = job;
        job.metadata.creation_timestamp = Some(Time(t(at)));
        job
    }

    fn names(runs: &[Workload]) -> Vec<&str> {
        runs.iter().map(Workload::name).collect()
    }

    fn runs(jobs: Vec<Job>) -> Vec<Workload> {
        jobs.iter().map(Workload::of_job).collect()
    }

    #[test]
    fn newest_first_table() {
        let cases: Vec<(&str, Vec<Job>, Vec<&str>)> = vec![
            (
                "by creation time",
                vec![
                    created(job("a"), "2016-05-19T09:00:00Z"),
                    created(job("c"), "2016-05-19T11:00:00Z"),
                    created(job("b"), "2016-05-19T10:00:00Z"),
                ],
                vec!["c", "b", "a"],
            ),
            (
                "same second: by start time",
                vec![
                    created(job("x"), "2016-05-19T10:00:00Z").started_at("2016-05-19T10:00:01Z"),
                    created(job("y"), "2016-05-19T10:00:00Z").started_at("2016-05-19T10:00:03Z"),
                ],
                vec!["y", "x"],
            ),
            (
                "nothing recorded: by name",
                vec![job("cj-1"), job("cj-3"), job("cj-2")],
                vec!["cj-3", "cj-2", "cj-1"],
            ),
        ];
        for (name, jobs, want) in cases {
            let mut runs = runs(jobs);
            newest_first(&mut runs);
            assert_eq!(names(&runs), want, "{name}");
        }
    }

    #[test]
    fn rows_show_scheduled_time_result_start_and_duration() {
        let now = t("2016-05-19T10:05:00Z");
        let jobs = runs(vec![
            job("cj-mo7f5ao")
                .manual()
                .started_at("2016-05-19T10:04:00Z"),
            job("cj-24394140")
                .scheduled()
                .started_at("2016-05-19T10:00:01Z")
                .complete_at("2016-05-19T10:00:13Z"),
            job("cj-24394080")
                .started_at("2016-05-19T09:00:00Z")
                .failed_at("2016-05-19T09:02:30Z"),
            job("cj-pending"),
        ]);
        assert_eq!(
            history_table(
                &jobs,
                "Job",
                &[t("2016-05-19T10:03:00Z"), t("2016-05-19T10:04:00Z")],
                now
            )
            .render(),
            "\
NAME          KIND   SCHEDULED              RESULT     START       DURATION
<none>        Job    2016-05-19T10:04:00Z   Queued     <none>      <none>
<none>        Job    2016-05-19T10:03:00Z   Queued     <none>      <none>
cj-mo7f5ao    Job    manual                 Running    60s ago     60s
cj-24394140   Job    2016-05-19T09:00:00Z   Complete   4m59s ago   12s
cj-24394080   Job    <none>                 Failed     65m ago     2m30s
cj-pending    Job    <none>                 Running    <none>      <none>
"
        );
    }

    #[test]
    fn pending_manual_runs_come_first_with_when_they_run() {
        let now = t("2016-05-19T10:05:00Z");
        let at = |s| (manual_name("cj", t(s)), t(s));
        let pending = [at("2016-05-19T10:05:00Z"), at("2016-05-19T12:35:00Z")];
        let jobs = runs(vec![job("cj-24394140").scheduled()]);
        assert_eq!(
            runs_table(&jobs, "Job", &pending, &[t("2016-05-19T10:04:00Z")], now).render(),
            "\
NAME          KIND   SCHEDULED              RESULT    START     DURATION
cj-mo7fcac    Job    2016-05-19T12:35:00Z   Pending   in 150m   <none>
cj-mo7f5cc    Job    2016-05-19T10:05:00Z   Pending   due       <none>
<none>        Job    2016-05-19T10:04:00Z   Queued    <none>    <none>
cj-24394140   Job    2016-05-19T09:00:00Z   Running   <none>    <none>
"
        );
    }

    #[test]
    fn a_backfills_job_says_so_beside_its_slot() {
        let mut old = job("cj-24393000").scheduled_for("2016-05-18T15:00:00Z");
        assert_eq!(scheduled(&Workload::of_job(&old)), "2016-05-18T15:00:00Z");
        old.metadata
            .annotations
            .get_or_insert_default()
            .insert(crate::api::ANNOTATION_BACKFILLED.into(), "true".into());
        assert_eq!(
            scheduled(&Workload::of_job(&old)),
            "2016-05-18T15:00:00Z (backfill)"
        );
    }
}
