//! `kubectl kronjob trigger NAME`: a manual run now. The command asks; the manager creates the
//! Job, so a manual run gets the same TTL policy (`--default-job-ttl`) as scheduled runs.
//!
//! The request is the CronJob's `batch.kronjob.dev/trigger` annotation, holding the time of the
//! request; the Job is named after it (`<cronjob>-m<unix seconds, base 36>`), so a request runs
//! once however often the manager sees it. The command waits for the Job (`--wait`).

use std::io::Write;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use super::CliError;
use super::cluster::KubeArgs;
use crate::api::{ANNOTATION_TRIGGER, CronJob};
use crate::job::manual_name;

/// How often the Job is looked for while waiting.
const POLL: Duration = Duration::from_millis(500);

/// Flags of `trigger`.
#[derive(clap::Args, Debug)]
pub struct TriggerArgs {
    /// Name of the CronJob.
    name: String,
    /// How long to wait for the manager to create the Job (`0`: ask and return).
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

/// Ask for a manual run of the CronJob at `now` (or join a request still pending), wait for
/// its Job and say `job.batch/NAME created`.
pub async fn run(
    client: Client,
    args: &TriggerArgs,
    now: Timestamp,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let namespace = args.kube.namespace(&client);
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), &namespace);
    let cj = cronjobs.get(&args.name).await?;
    let pending = cj
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_TRIGGER))
        .and_then(|v| v.parse::<Timestamp>().ok());
    let requested = match pending {
        Some(at) => at,
        None => {
            let at = crate::schedule::floor_second(now);
            let patch = json!({"metadata": {"annotations": {ANNOTATION_TRIGGER: at.to_string()}}});
            cronjobs
                .patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            at
        }
    };
    let job = manual_name(&args.name, requested);
    if args.wait.is_zero() {
        writeln!(
            out,
            "cronjob.batch.kronjob.dev/{} triggered: the manager creates job.batch/{job}",
            args.name
        )?;
        return Ok(());
    }
    wait_for(Api::namespaced(client, &namespace), &job, args).await?;
    writeln!(out, "job.batch/{job} created")?;
    Ok(())
}

/// Look for the Job every [`POLL`] until it exists or `--wait` has passed.
async fn wait_for(jobs: Api<Job>, job: &str, args: &TriggerArgs) -> Result<(), CliError> {
    let deadline = tokio::time::Instant::now() + args.wait;
    loop {
        if jobs.get_opt(job).await?.is_some() {
            return Ok(());
        }
        if tokio::time::Instant::now() + POLL > deadline {
            return Err(CliError::Failed(format!(
                "job.batch/{job} was not created within {}s: is the kronjob manager running? \
                 The request stays on cronjob.batch.kronjob.dev/{} (annotation {ANNOTATION_TRIGGER}) \
                 and runs when the manager sees it",
                args.wait.as_secs(),
                args.name
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}
