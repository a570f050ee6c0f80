//! `kubectl kronjob trigger NAME`: a manual run now, or at a later time (`--at TIME`,
//! `--in DURATION`), or the cancellation of one still pending (`--cancel`). The command asks;
//! the manager creates the Job, so a manual run gets the same TTL policy (`--default-job-ttl`)
//! as scheduled runs.
//!
//! The request is the CronJob's `batch.kronjob.dev/trigger` annotation, holding the times asked
//! for (at most [`MAX_PENDING`]); each Job is named after its time
//! (`<cronjob>-m<unix seconds, base 36>`), so a time runs once however often the manager sees
//! it. The command waits for a Job due now (`--wait`); a later one is left pending.

use std::io::Write;
use std::time::Duration;

use jiff::civil::DateTime;
use jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use super::CliError;
use super::cluster::KubeArgs;
use super::workloads::{Served, type_of};
use crate::api::trigger::{self, HORIZON, MAX_PENDING};
use crate::api::{ANNOTATION_TRIGGER, CronJob};
use crate::workload::manual_name;

/// How often the Job is looked for while waiting.
const POLL: Duration = Duration::from_millis(500);

/// How often a write that raced another change of the CronJob is tried again.
const ATTEMPTS: usize = 5;

/// A time given with `--at`: an instant, or a wall-clock time in the CronJob's `timeZone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// RFC 3339: `2026-11-28T21:00:00Z`, `2026-11-28T22:00:00+01:00`.
    Instant(Timestamp),
    /// No offset: `2026-11-28T21:00` or `2026-11-28 21:00:00`, in the CronJob's zone (UTC
    /// without one).
    Local(DateTime),
}

/// Parse `--at`.
pub fn parse_at(text: &str) -> Result<At, String> {
    let text = text.trim();
    if let Ok(at) = text.parse::<Timestamp>() {
        return Ok(At::Instant(at));
    }
    text.parse::<DateTime>().map(At::Local).map_err(|_| {
        format!(
            "{text:?} is not a time: give RFC 3339 (2026-11-28T21:00:00Z) or a local time \
             in the CronJob's time zone (2026-11-28T21:00)"
        )
    })
}

/// Flags of `trigger`.
#[derive(clap::Args, Debug)]
pub struct TriggerArgs {
    /// Name of the CronJob.
    name: String,
    /// Run at this time instead of now: RFC 3339, or a local time (2026-11-28T21:00) in the
    /// CronJob's timeZone. At most a year ahead; a time past runs now.
    #[arg(long, value_name = "TIME", value_parser = parse_at, conflicts_with = "in_")]
    at: Option<At>,
    /// Run after this long instead of now, e.g. 90m, 2h.
    #[arg(
        long = "in",
        id = "in_",
        value_name = "DURATION",
        value_parser = crate::duration::parse_flag_duration
    )]
    in_: Option<Duration>,
    /// Cancel the pending run at --at (every pending run without --at).
    #[arg(long, conflicts_with_all = ["in_", "wait"])]
    cancel: bool,
    /// How long to wait for the manager to create a Job due now (`0`: ask and return).
    #[arg(long, default_value = "30s", value_parser = crate::duration::parse_flag_duration)]
    wait: Duration,
    #[command(flatten)]
    kube: KubeArgs,
}

impl TriggerArgs {
    /// The connection flags.
    pub fn kube(&self) -> &KubeArgs {
        &self.kube
    }
}

/// The time asked for, whole seconds; a usage error when it cannot be one or is too far ahead.
fn asked_time(args: &TriggerArgs, cj: &CronJob, now: Timestamp) -> Result<Timestamp, CliError> {
    let at = match (args.at, args.in_) {
        (Some(At::Instant(at)), _) => at,
        (Some(At::Local(local)), _) => {
            let zone = cj.spec.time_zone.as_deref();
            let tz = crate::schedule::time_zone(zone)
                .map_err(|e| CliError::Usage(format!("--at {local}: {e}")))?;
            local
                .to_zoned(tz)
                .map_err(|e| CliError::Usage(format!("--at {local}: {e}")))?
                .timestamp()
        }
        (None, Some(after)) => SignedDuration::try_from(after)
            .ok()
            .and_then(|d| now.checked_add(d).ok())
            .ok_or_else(|| CliError::Usage("--in is too long".into()))?,
        (None, None) => now,
    };
    if at.duration_since(now) > HORIZON {
        return Err(CliError::Usage(format!(
            "{at} is more than a year ahead: a run may be asked for at most 366 days ahead"
        )));
    }
    Ok(trigger::floor(at))
}

/// Ask for a manual run of the CronJob (now, `--at`, `--in`), or cancel one (`--cancel`).
/// Now: join a request still due or ask, wait for its Job and say `job.batch/NAME created`.
/// Later: say it is pending and which Job it makes.
pub async fn run(
    client: Client,
    args: &TriggerArgs,
    now: Timestamp,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let namespace = args.kube.namespace(&client);
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), &namespace);
    let runs = Runs {
        client: &client,
        namespace: &namespace,
    };
    if args.cancel {
        return cancel(&cronjobs, &runs, args, now, out).await;
    }
    let timed = args.at.is_some() || args.in_.is_some();
    let mut attempt = 0;
    let (requested, others, served) = loop {
        attempt += 1;
        let cj = cronjobs.get(&args.name).await?;
        let served = Served::find(&client, &type_of(&cj)).await?;
        let at = asked_time(args, &cj, now)?;
        let requests = trigger::requests_of(&cj, now);
        let requested = match requests.due(now).next() {
            // Join a run still due rather than ask for another.
            Some(due) if !timed => due,
            _ => at,
        };
        let others: Vec<Timestamp> = requests
            .times
            .iter()
            .copied()
            .filter(|t| *t > now && *t != requested)
            .collect();
        if requests.times.contains(&requested) {
            break (requested, others, served);
        }
        let name = job_name(args, requested);
        if timed && requested <= now && runs.exists(&served, &name).await? {
            return Err(CliError::Failed(format!(
                "the run at {requested} already ran: {}",
                served.name_of(&name)
            )));
        }
        if requests.times.len() >= MAX_PENDING {
            return Err(CliError::Failed(format!(
                "cronjob.batch.kronjob.dev/{} has {MAX_PENDING} runs pending, the most it may \
                 have: cancel one first (kubectl kronjob trigger {} --cancel --at TIME)",
                args.name, args.name
            )));
        }
        let mut times = requests.times.clone();
        times.push(requested);
        match write(&cronjobs, &cj, &args.name, trigger::format(&times)).await {
            Ok(()) => break (requested, others, served),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < ATTEMPTS => continue,
            Err(e) => return Err(e.into()),
        }
    };
    let job = job_name(args, requested);
    let shown = served.name_of(&job);
    if requested > now {
        writeln!(
            out,
            "cronjob.batch.kronjob.dev/{} runs at {requested}: pending, the manager creates {shown} then",
            args.name
        )?;
        if !others.is_empty() {
            let list: Vec<String> = others.iter().map(ToString::to_string).collect();
            writeln!(out, "also pending: {}", list.join(", "))?;
        }
        return Ok(());
    }
    if args.wait.is_zero() {
        writeln!(
            out,
            "cronjob.batch.kronjob.dev/{} triggered: the manager creates {shown}",
            args.name
        )?;
        return Ok(());
    }
    wait_for(&runs, &served, &job, args).await?;
    writeln!(out, "{shown} created")?;
    Ok(())
}

/// Where the runs of the CronJob are looked for.
struct Runs<'a> {
    client: &'a Client,
    namespace: &'a str,
}

impl Runs<'_> {
    /// Whether the run `name` of kind `served` exists.
    async fn exists(&self, served: &Served, name: &str) -> Result<bool, CliError> {
        served.exists(self.client, self.namespace, name).await
    }
}

fn job_name(args: &TriggerArgs, at: Timestamp) -> String {
    manual_name(&args.name, at)
}

/// Write the annotation (`None` removes it), only onto the version read: a change made since
/// (the manager running a request, another user) makes the API server answer 409.
async fn write(
    cronjobs: &Api<CronJob>,
    cj: &CronJob,
    name: &str,
    value: Option<String>,
) -> Result<(), kube::Error> {
    let patch = json!({"metadata": {
        "resourceVersion": cj.metadata.resource_version,
        "annotations": {ANNOTATION_TRIGGER: value},
    }});
    cronjobs
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// Remove the pending run at `--at` (every pending run without), and say so; one that ran
/// already (or was never asked for) is an error.
async fn cancel(
    cronjobs: &Api<CronJob>,
    runs: &Runs<'_>,
    args: &TriggerArgs,
    now: Timestamp,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut attempt = 0;
    let (cancelled, served) = loop {
        attempt += 1;
        let cj = cronjobs.get(&args.name).await?;
        let served = Served::find(runs.client, &type_of(&cj)).await?;
        let requests = trigger::requests_of(&cj, now);
        let cancelled: Vec<Timestamp> = match args.at {
            Some(_) => {
                let at = asked_time(args, &cj, now)?;
                if !requests.times.contains(&at) {
                    let job = job_name(args, at);
                    return Err(CliError::Failed(if runs.exists(&served, &job).await? {
                        format!("the run at {at} already ran: {}", served.name_of(&job))
                    } else {
                        format!(
                            "no run of cronjob.batch.kronjob.dev/{} is pending at {at}",
                            args.name
                        )
                    }));
                }
                vec![at]
            }
            None if requests.times.is_empty() => {
                return Err(CliError::Failed(format!(
                    "no run of cronjob.batch.kronjob.dev/{} is pending",
                    args.name
                )));
            }
            None => requests.times.clone(),
        };
        let rest: Vec<Timestamp> = requests
            .times
            .iter()
            .copied()
            .filter(|t| !cancelled.contains(t))
            .collect();
        match write(cronjobs, &cj, &args.name, trigger::format(&rest)).await {
            Ok(()) => break (cancelled, served),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < ATTEMPTS => continue,
            Err(e) => return Err(e.into()),
        }
    };
    // The manager may have created a run due now just before the cancellation.
    let mut ran = Vec::new();
    for at in cancelled {
        let job = served.name_of(&job_name(args, at));
        if runs.exists(&served, &job_name(args, at)).await? {
            ran.push(format!("the run at {at} already ran: {job}"));
        } else {
            writeln!(
                out,
                "cronjob.batch.kronjob.dev/{}: the run at {at} is cancelled ({job} is not created)",
                args.name
            )?;
        }
    }
    if ran.is_empty() {
        Ok(())
    } else {
        Err(CliError::Failed(ran.join("; ")))
    }
}

/// Look for the run every [`POLL`] until it exists or `--wait` has passed.
async fn wait_for(
    runs: &Runs<'_>,
    served: &Served,
    job: &str,
    args: &TriggerArgs,
) -> Result<(), CliError> {
    let deadline = tokio::time::Instant::now() + args.wait;
    loop {
        if runs.exists(served, job).await? {
            return Ok(());
        }
        if tokio::time::Instant::now() + POLL > deadline {
            return Err(CliError::Failed(format!(
                "{} was not created within {}s: is the kronjob manager running? \
                 The request stays on cronjob.batch.kronjob.dev/{} (annotation {ANNOTATION_TRIGGER}) \
                 and runs when the manager sees it",
                served.name_of(job),
                args.wait.as_secs(),
                args.name
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_parses_instants_and_local_times() {
        let instant = |s: &str| At::Instant(s.parse().expect("instant"));
        let local = |s: &str| At::Local(s.parse().expect("local"));
        let cases = [
            ("2026-11-28T21:00:00Z", Ok(instant("2026-11-28T21:00:00Z"))),
            (
                "2026-11-28T22:00:00+01:00",
                Ok(instant("2026-11-28T21:00:00Z")),
            ),
            ("2026-11-28T21:00", Ok(local("2026-11-28T21:00"))),
            ("2026-11-28 21:00:30", Ok(local("2026-11-28T21:00:30"))),
        ];
        for (text, want) in cases {
            assert_eq!(parse_at(text), want, "{text}");
        }
        for bad in [
            "tomorrow",
            "21:00",
            "2026-13-01T00:00",
            "",
            "2026-11-28T25:00Z",
        ] {
            assert!(parse_at(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
