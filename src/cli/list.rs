//! `kubectl kronjob list` (alias `get`): the CronJobs with their last and next runs, in a table
//! like kubectl's, or as a `List` with `-o json|yaml`.
//!
//! Two requests whatever the number of CronJobs: the CronJobs, then the Jobs carrying the label
//! `batch.kronjob.dev/cronjob` in the same namespace (or all namespaces); and a look-up and a
//! list for each other kind the CronJobs run. Runs are matched to their CronJob by the
//! controller owner reference's UID.

use std::collections::HashMap;
use std::io::Write;

use jiff::Timestamp;
use kube::Client;
use kube::api::ListParams;

use super::CliError;
use super::cluster::{KubeArgs, Scope};
use super::next::{cronjob_times, hash_key};
use super::table::{self, Format, NONE, Table};
use crate::api::{CronJob, trigger};
use crate::schedule::{Schedule, time_zone};
use crate::workload::{Outcome, Workload, controller_uid};

/// Flags of `list`.
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// List the CronJobs of every namespace (adds a NAMESPACE column).
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    /// Only CronJobs whose labels match this selector, e.g. `team=a,tier!=web`.
    #[arg(long, short = 'l', value_parser = crate::selector::parse_selector)]
    selector: Option<String>,
    /// Output format: `wide` adds containers, images and the last success; `json` and `yaml`
    /// print a List of the CronJobs.
    #[arg(long, short = 'o', value_enum)]
    output: Option<Format>,
}

impl ListArgs {
    /// The connection flags.
    pub fn kube(&self) -> &KubeArgs {
        &self.kube
    }
}

/// Run `list` with `client`; `now` is the time ages are measured from.
pub async fn run(
    client: Client,
    args: &ListArgs,
    now: Timestamp,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let scope = args.kube.scope(&client, args.all_namespaces);
    let mut params = ListParams::default();
    if let Some(selector) = &args.selector {
        params = params.labels(selector);
    }
    let cronjobs = scope
        .api::<CronJob>(&client)
        .list(&params)
        .await
        .map_err(super::cluster::listing_error)?
        .items;
    if let Some(format) = args.output.and_then(Format::data) {
        table::write_data(&table::list_of(&cronjobs), format, out)?;
        return Ok(());
    }
    if cronjobs.is_empty() {
        writeln!(err, "{}", scope.nothing_found())?;
        return Ok(());
    }
    let runs: Vec<Workload> = super::workloads::runs_in(&client, &scope, &cronjobs)
        .await?
        .into_iter()
        .map(|r| r.workload)
        .collect();
    let columns = Columns {
        wide: args.output == Some(Format::Wide),
        namespace: scope == Scope::All,
    };
    out.write_all(
        cronjob_table(&cronjobs, &runs, now, columns)
            .render()
            .as_bytes(),
    )?;
    Ok(())
}

/// Which optional columns the table has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Columns {
    /// `-o wide`: CONTAINERS, IMAGES, LAST SUCCESS.
    pub wide: bool,
    /// `-A`: NAMESPACE first.
    pub namespace: bool,
}

/// The table of `cronjobs`, with the last run of each found among `runs` (of any kind).
pub fn cronjob_table(
    cronjobs: &[CronJob],
    runs: &[Workload],
    now: Timestamp,
    columns: Columns,
) -> Table {
    let mut header = vec![
        "name", "schedule", "timezone", "suspend", "active", "queued", "pending", "last run",
        "next run", "age",
    ];
    if columns.namespace {
        header.insert(0, "namespace");
    }
    if columns.wide {
        header.extend(["containers", "images", "last success"]);
    }
    let mut by_owner: HashMap<&str, Vec<&Workload>> = HashMap::new();
    for run in runs {
        if let Some(uid) = controller_uid(&run.metadata) {
            by_owner.entry(uid).or_default().push(run);
        }
    }
    let mut table = Table::new(&header);
    for cj in cronjobs {
        let owned = cj
            .metadata
            .uid
            .as_deref()
            .and_then(|uid| by_owner.get(uid))
            .map_or(&[][..], Vec::as_slice);
        table.push(row(cj, owned, now, columns));
    }
    table
}

fn row(cj: &CronJob, runs: &[&Workload], now: Timestamp, columns: Columns) -> Vec<String> {
    let status = cj.status.clone().unwrap_or_default();
    let mut row = vec![
        cj.metadata.name.clone().unwrap_or_default(),
        cj.spec.schedule_summary(),
        cj.spec.time_zone.clone().unwrap_or_else(|| NONE.into()),
        cj.spec.is_suspended().to_string(),
        status.active.len().to_string(),
        status.queued.len().to_string(),
        pending_runs(cj, now),
        last_run(runs.iter().copied()).map_or_else(|| NONE.into(), |r| r.show(now)),
        next_run(cj, now),
        cj.metadata
            .creation_timestamp
            .as_ref()
            .map_or_else(|| NONE.into(), |t| table::age(t.0, now)),
    ];
    if columns.namespace {
        row.insert(0, cj.metadata.namespace.clone().unwrap_or_default());
    }
    if columns.wide {
        let pod = cj
            .spec
            .job_template
            .as_ref()
            .and_then(|t| t.spec.as_ref())
            .and_then(|s| s.template.spec.as_ref());
        let containers = pod.map(|p| p.containers.as_slice()).unwrap_or_default();
        row.push(joined(containers.iter().map(|c| c.name.as_str())));
        row.push(joined(containers.iter().filter_map(|c| c.image.as_deref())));
        row.push(
            status
                .last_successful_time
                .map_or_else(|| NONE.into(), |t| table::ago(t.0, now)),
        );
    }
    row
}

fn joined<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let text = items.collect::<Vec<_>>().join(",");
    if text.is_empty() { NONE.into() } else { text }
}

/// The newest finished run of a CronJob: when it finished and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastRun {
    /// When it finished (its start or creation when the finish time is not recorded).
    pub at: Timestamp,
    /// Complete or Failed.
    pub outcome: Outcome,
}

impl LastRun {
    /// `3m ago (Complete)`.
    pub fn show(&self, now: Timestamp) -> String {
        let outcome = match self.outcome {
            Outcome::Complete => "Complete",
            Outcome::Failed => "Failed",
        };
        format!("{} ({outcome})", table::ago(self.at, now))
    }
}

/// The newest finished run among `runs` (running ones do not count), by finish time.
pub fn last_run<'a>(runs: impl IntoIterator<Item = &'a Workload>) -> Option<LastRun> {
    runs.into_iter()
        .filter_map(|run| {
            let finish = run.finish?;
            let at = finish
                .at
                .or(run.started)
                .or_else(|| run.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
            Some(LastRun {
                at,
                outcome: finish.outcome,
            })
        })
        .max_by_key(|run| run.at)
}

/// The manual runs asked for (`trigger`, `trigger --at`): when the first runs, `in 25m` (`due`
/// once its time has come), and how many more wait, `in 25m (+2)`; `<none>` without.
pub fn pending_runs(cj: &CronJob, now: Timestamp) -> String {
    let times = trigger::requests_of(cj, now).times;
    let Some(first) = times.first() else {
        return NONE.into();
    };
    let when = if *first > now {
        table::from_now(*first, now)
    } else {
        "due".into()
    };
    match times.len() {
        1 => when,
        n => format!("{when} (+{})", n - 1),
    }
}

/// When the CronJob runs next, `in 47s`: `<none>` when suspended or never again, `<invalid>`
/// when its schedule or zone is refused.
pub fn next_run(cj: &CronJob, now: Timestamp) -> String {
    if cj.spec.is_suspended() {
        return NONE.into();
    }
    // What the controller reports when no slot is to run: the window ended, or a Calendar it
    // names does not exist.
    let status = cj.status.as_ref();
    let ready = status.and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
    if let Some(c) = ready.filter(|c| c.reason == "Finished" || c.reason == "CalendarNotFound") {
        return c.reason.clone();
    }
    // With calendars or a window, the controller's next slot is the one that runs.
    let bounded = cj.spec.exclusions.is_some()
        || cj.spec.calendars.as_ref().is_some_and(|c| !c.is_empty())
        || cj.spec.not_before.is_some()
        || cj.spec.not_after.is_some();
    if bounded {
        return status
            .and_then(|s| s.next_schedule_time.as_ref())
            .map_or_else(|| NONE.into(), |t| table::from_now(t.0, now));
    }
    let schedule = cj
        .spec
        .schedule_exprs()
        .ok()
        .and_then(|exprs| Schedule::parse_each(exprs, &hash_key(cj)).ok());
    let (Some(schedule), Ok(tz)) = (schedule, time_zone(cj.spec.time_zone.as_deref())) else {
        return "<invalid>".into();
    };
    match cronjob_times(cj, &schedule, &tz, now, 1).as_deref() {
        Ok([next]) => table::from_now(*next, now),
        _ => NONE.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ANNOTATION_TRIGGER;
    use crate::testing::fixtures::*;

    const NOW: &str = "2016-05-19T10:05:00Z";

    #[test]
    fn last_run_is_the_newest_finished_job() {
        let early = Workload::of_job(&job("cj-1").complete_at("2016-05-19T09:00:30Z"));
        let late = Workload::of_job(&job("cj-2").failed_at("2016-05-19T10:02:00Z"));
        let running = Workload::of_job(&job("cj-3").started_at("2016-05-19T10:04:00Z"));
        type Case<'a> = (&'a str, Vec<&'a Workload>, Option<(&'a str, Outcome)>);
        let cases: Vec<Case> = vec![
            ("no jobs", vec![], None),
            ("only running", vec![&running], None),
            (
                "one complete",
                vec![&early, &running],
                Some(("2016-05-19T09:00:30Z", Outcome::Complete)),
            ),
            (
                "the newest wins whatever the order",
                vec![&late, &early],
                Some(("2016-05-19T10:02:00Z", Outcome::Failed)),
            ),
        ];
        for (name, jobs, want) in cases {
            let got = last_run(jobs);
            let want = want.map(|(at, outcome)| LastRun { at: t(at), outcome });
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn a_finish_without_time_falls_back_to_the_start() {
        let mut failed = job("cj-1").started_at("2016-05-19T09:00:00Z");
        failed
            .status
            .as_mut()
            .expect("status")
            .conditions
            .get_or_insert_with(Vec::new)
            .push(k8s_openapi::api::batch::v1::JobCondition {
                type_: "Failed".into(),
                status: "True".into(),
                ..Default::default()
            });
        let run = last_run([&Workload::of_job(&failed)]).expect("finished");
        assert_eq!(run.at, t("2016-05-19T09:00:00Z"));
        assert_eq!(run.show(t(NOW)), "65m ago (Failed)");
    }

    #[test]
    fn next_run_table() {
        let now = t(NOW);
        let cases = [
            ("every five minutes", cronjob("*/5 * * * *"), "in 5m"),
            ("suspended", cronjob("*/5 * * * *").suspended(), NONE),
            ("never fires", cronjob("0 0 30 2 *"), NONE),
            ("bad schedule", cronjob("61 * * * *"), "<invalid>"),
            (
                "bad zone",
                cronjob("0 * * * *").zone("Mars/Base"),
                "<invalid>",
            ),
            // @every counts from the creation time (09:59), then from the last run.
            ("@every from creation", cronjob("@every 90m"), "in 84m"),
            (
                "@every from the last run",
                cronjob("@every 90m").last_scheduled("2016-05-19T10:01:00Z"),
                "in 86m",
            ),
            // 12:00 in Berlin is 10:00 UTC, tomorrow.
            (
                "in its zone",
                cronjob("0 12 * * *").zone("Europe/Berlin"),
                "in 23h",
            ),
        ];
        for (name, cj, want) in cases {
            assert_eq!(next_run(&cj, now), want, "{name}");
        }
    }

    #[test]
    fn pending_runs_table() {
        let now = t(NOW);
        let asking = |value: &str| {
            let mut cj = cronjob("0 * * * *");
            cj.metadata
                .annotations
                .get_or_insert_default()
                .insert(ANNOTATION_TRIGGER.into(), value.into());
            cj
        };
        let cases = [
            ("none", cronjob("0 * * * *"), NONE),
            ("one later", asking("2016-05-19T10:30:00Z"), "in 25m"),
            ("due, not run yet", asking("2016-05-19T10:04:00Z"), "due"),
            (
                "three",
                asking("2016-05-20T10:05:00Z,2016-05-19T11:05:00Z,2016-05-19T10:35:00Z"),
                "in 30m (+2)",
            ),
            ("not a time", asking("soon"), NONE),
        ];
        for (name, cj, want) in cases {
            assert_eq!(pending_runs(&cj, now), want, "{name}");
        }
    }

    #[test]
    fn h_is_hashed_with_namespace_and_name() {
        let now = t(NOW);
        let cj = cronjob("H * * * *");
        let schedule = Schedule::parse("H * * * *", "ns/cj").expect("parses");
        let next = schedule
            .next_after(now, &jiff::tz::TimeZone::UTC)
            .expect("next");
        assert_eq!(next_run(&cj, now), table::from_now(next, now));
    }

    fn sample() -> (Vec<CronJob>, Vec<Workload>) {
        let hourly = cronjob("0 * * * *")
            .named("hourly")
            .created_at("2016-05-15T10:05:00Z");
        let running = job("nightly-report-1")
            .owned_by("nightly-report-uid")
            .started_at("2016-05-19T00:30:00Z");
        let mut nightly = cronjob("30 2 * * *")
            .named("nightly-report")
            .zone("Europe/Berlin")
            .suspended()
            .last_scheduled("2016-05-19T00:30:00Z")
            .running(&[&running]);
        nightly
            .status
            .get_or_insert_with(Default::default)
            .last_successful_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t(
            "2016-05-19T00:31:10Z",
        )));
        if let Some(status) = nightly.status.as_mut() {
            let at = |s| k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t(s));
            status.set_queued(vec![at("2016-05-18T00:30:00Z"), at("2016-05-19T00:30:00Z")]);
        }
        // Two manual runs asked for later (suspended, it runs them all the same).
        nightly.metadata.annotations.get_or_insert_default().insert(
            ANNOTATION_TRIGGER.into(),
            "2016-05-19T12:00:00Z,2016-05-19T10:30:00Z".into(),
        );
        let jobs = [
            job("hourly-1")
                .owned_by("hourly-uid")
                .complete_at("2016-05-19T10:02:00Z"),
            job("hourly-0")
                .owned_by("hourly-uid")
                .failed_at("2016-05-19T09:01:00Z"),
            running,
            job("stranger").owned_by("other-uid").failed_at(NOW),
        ];
        let runs = jobs.iter().map(Workload::of_job).collect();
        (vec![hourly, nightly], runs)
    }

    #[test]
    fn the_table_matches_jobs_by_owner_uid() {
        let (cronjobs, jobs) = sample();
        let text = cronjob_table(&cronjobs, &jobs, t(NOW), Columns::default()).render();
        assert_eq!(
            text,
            "\
NAME             SCHEDULE     TIMEZONE        SUSPEND   ACTIVE   QUEUED   PENDING       LAST RUN            NEXT RUN   AGE
hourly           0 * * * *    <none>          false     0        0        <none>        3m ago (Complete)   in 55m     4d
nightly-report   30 2 * * *   Europe/Berlin   true      1        2        in 25m (+1)   <none>              <none>     6m
"
        );
    }

    #[test]
    fn wide_and_all_namespaces_add_columns() {
        let (cronjobs, jobs) = sample();
        let columns = Columns {
            wide: true,
            namespace: true,
        };
        let text = cronjob_table(&cronjobs, &jobs, t(NOW), columns).render();
        assert_eq!(
            text,
            "\
NAMESPACE   NAME             SCHEDULE     TIMEZONE        SUSPEND   ACTIVE   QUEUED   PENDING       LAST RUN            NEXT RUN   AGE   CONTAINERS   IMAGES    LAST SUCCESS
ns          hourly           0 * * * *    <none>          false     0        0        <none>        3m ago (Complete)   in 55m     4d    c            busybox   <none>
ns          nightly-report   30 2 * * *   Europe/Berlin   true      1        2        in 25m (+1)   <none>              <none>     6m    c            busybox   9h ago
"
        );
    }
}
