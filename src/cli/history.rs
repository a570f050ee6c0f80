//! `kubectl kronjob history NAME`: the runs of one CronJob, newest first.
//!
//! Two requests: the CronJob (for its UID), then the Jobs labelled with its name; a Job counts
//! when that CronJob is its controller (a label alone can be copied). Manual runs asked for at a
//! later time (`trigger --at`) come first, result `Pending`, with the Job they will make; then
//! slots waiting in the queue (`concurrencyPolicy: Enqueue`), result `Queued`, without a Job yet.

use std::io::Write;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::ListParams;
use kube::{Api, Client};

use super::CliError;
use super::cluster::KubeArgs;
use super::table::{self, DataFormat, NONE, Table};
use crate::api::{CronJob, LABEL_CRONJOB, trigger};
use crate::workload::{Outcome, Ran, controlled_by, job_finish as finish, manual_name, ran_for};

/// Flags of `history`.
#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// Name of the CronJob.
    name: String,
    #[command(flatten)]
    kube: KubeArgs,
    /// Print a List of the Jobs as JSON or YAML instead of the table.
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
    let uid = cronjob.metadata.uid.unwrap_or_default();
    let queued: Vec<Timestamp> = cronjob
        .status
        .map(|s| s.queued.iter().map(|t| t.0).collect())
        .unwrap_or_default();
    let selector = format!("{LABEL_CRONJOB}={}", args.name);
    let listed = Api::<Job>::namespaced(client, &namespace)
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    let mut jobs: Vec<Job> = listed
        .into_iter()
        .filter(|job| controlled_by(&job.metadata, &uid))
        .collect();
    newest_first(&mut jobs);
    // A time asked for whose Job exists ran (its request is being removed).
    let pending: Vec<(String, Timestamp)> = asked
        .into_iter()
        .map(|at| (manual_name(&args.name, at), at))
        .filter(|(name, _)| {
            !jobs
                .iter()
                .any(|j| j.metadata.name.as_deref() == Some(name))
        })
        .collect();
    if let Some(format) = args.output {
        table::write_data(&table::list_of(&jobs), format, out)?;
    } else if jobs.is_empty() && queued.is_empty() && pending.is_empty() {
        writeln!(
            err,
            "No runs of cronjob.batch.kronjob.dev/{} in {namespace} namespace.",
            args.name
        )?;
    } else {
        let table = runs_table(&jobs, &pending, &queued, now);
        out.write_all(table.render().as_bytes())?;
    }
    Ok(())
}

/// Order Jobs newest first: by creation time, then start time, then name (all descending).
pub fn newest_first(jobs: &mut [Job]) {
    jobs.sort_by(|a, b| sort_key(b).cmp(&sort_key(a)));
}

fn sort_key(job: &Job) -> (Option<Timestamp>, Option<Timestamp>, Option<&str>) {
    (
        job.metadata.creation_timestamp.as_ref().map(|t| t.0),
        job.status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0),
        job.metadata.name.as_deref(),
    )
}

/// The table of runs: the `queued` slots (newest first, no Job yet), then the Jobs in the
/// order given.
pub fn history_table(jobs: &[Job], queued: &[Timestamp], now: Timestamp) -> Table {
    runs_table(jobs, &[], queued, now)
}

/// [`history_table`] after the `pending` manual runs (the Job each makes, its time; latest
/// first): START says when it runs.
pub fn runs_table(
    jobs: &[Job],
    pending: &[(String, Timestamp)],
    queued: &[Timestamp],
    now: Timestamp,
) -> Table {
    let mut table = Table::new(&["name", "scheduled", "result", "start", "duration"]);
    for (name, at) in pending.iter().rev() {
        let start = if *at > now {
            table::from_now(*at, now)
        } else {
            "due".into()
        };
        table.push(vec![
            name.clone(),
            at.to_string(),
            "Pending".into(),
            start,
            NONE.into(),
        ]);
    }
    for slot in queued.iter().rev() {
        table.push(vec![
            NONE.into(),
            slot.to_string(),
            "Queued".into(),
            NONE.into(),
            NONE.into(),
        ]);
    }
    for job in jobs {
        table.push(row(job, now));
    }
    table
}

fn row(job: &Job, now: Timestamp) -> Vec<String> {
    let start = job
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0);
    let finished = finish(job);
    let result = match finished.map(|f| f.outcome) {
        None => "Running",
        Some(Outcome::Complete) => "Complete",
        Some(Outcome::Failed) => "Failed",
    };
    let end = match finished {
        None => Some(now),
        Some(f) => f.at,
    };
    let duration = match (start, end) {
        (Some(start), Some(end)) => table::human_duration(end.as_second() - start.as_second()),
        _ => NONE.into(),
    };
    vec![
        job.metadata.name.clone().unwrap_or_default(),
        scheduled(job),
        result.into(),
        start.map_or_else(|| NONE.into(), |s| table::ago(s, now)),
        duration,
    ]
}

/// The scheduled time a Job was created for (`(backfill)` after it for a backfill's Job),
/// `manual` for a manual run.
fn scheduled(job: &Job) -> String {
    match ran_for(&job.metadata) {
        Ran::Scheduled(at) if crate::workload::backfilled(&job.metadata) => {
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
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn created(job: Job, at: &str) -> Job {
        let mut job = job;
        job.metadata.creation_timestamp = Some(Time(t(at)));
        job
    }

    fn names(jobs: &[Job]) -> Vec<&str> {
        jobs.iter()
            .map(|j| j.metadata.name.as_deref().unwrap_or_default())
            .collect()
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
        for (name, mut jobs, want) in cases {
            newest_first(&mut jobs);
            assert_eq!(names(&jobs), want, "{name}");
        }
    }

    #[test]
    fn rows_show_scheduled_time_result_start_and_duration() {
        let now = t("2016-05-19T10:05:00Z");
        let jobs = vec![
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
        ];
        assert_eq!(
            history_table(
                &jobs,
                &[t("2016-05-19T10:03:00Z"), t("2016-05-19T10:04:00Z")],
                now
            )
            .render(),
            "\
NAME          SCHEDULED              RESULT     START       DURATION
<none>        2016-05-19T10:04:00Z   Queued     <none>      <none>
<none>        2016-05-19T10:03:00Z   Queued     <none>      <none>
cj-mo7f5ao    manual                 Running    60s ago     60s
cj-24394140   2016-05-19T09:00:00Z   Complete   4m59s ago   12s
cj-24394080   <none>                 Failed     65m ago     2m30s
cj-pending    <none>                 Running    <none>      <none>
"
        );
    }

    #[test]
    fn pending_manual_runs_come_first_with_when_they_run() {
        let now = t("2016-05-19T10:05:00Z");
        let at = |s| (manual_name("cj", t(s)), t(s));
        let pending = [at("2016-05-19T10:05:00Z"), at("2016-05-19T12:35:00Z")];
        let jobs = vec![job("cj-24394140").scheduled()];
        assert_eq!(
            runs_table(&jobs, &pending, &[t("2016-05-19T10:04:00Z")], now).render(),
            "\
NAME          SCHEDULED              RESULT    START     DURATION
cj-mo7fcac    2016-05-19T12:35:00Z   Pending   in 150m   <none>
cj-mo7f5cc    2016-05-19T10:05:00Z   Pending   due       <none>
<none>        2016-05-19T10:04:00Z   Queued    <none>    <none>
cj-24394140   2016-05-19T09:00:00Z   Running   <none>    <none>
"
        );
    }

    #[test]
    fn a_backfills_job_says_so_beside_its_slot() {
        let mut old = job("cj-24393000").scheduled_for("2016-05-18T15:00:00Z");
        assert_eq!(scheduled(&old), "2016-05-18T15:00:00Z");
        old.metadata
            .annotations
            .get_or_insert_default()
            .insert(crate::api::ANNOTATION_BACKFILLED.into(), "true".into());
        assert_eq!(scheduled(&old), "2016-05-18T15:00:00Z (backfill)");
    }
}
