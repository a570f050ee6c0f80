//! `kubectl kronjob suspend NAME` and `resume NAME`: one merge patch of `spec.suspend`, so
//! running either twice changes nothing more.

use std::io::Write;

use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use super::CliError;
use super::cluster::KubeArgs;
use crate::api::CronJob;

/// Flags of `suspend` and `resume`.
#[derive(clap::Args, Debug)]
pub struct SuspendArgs {
    /// Name of the CronJob.
    name: String,
    #[command(flatten)]
    kube: KubeArgs,
}

impl SuspendArgs {
    /// The connection flags.
    pub fn kube(&self) -> &KubeArgs {
        &self.kube
    }
}

/// Set `spec.suspend` to `suspend` and say so: `cronjob.batch.kronjob.dev/NAME suspended`.
pub async fn run(
    client: Client,
    args: &SuspendArgs,
    suspend: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let namespace = args.kube.namespace(&client);
    let patch = json!({"spec": {"suspend": suspend}});
    Api::<CronJob>::namespaced(client, &namespace)
        .patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let done = if suspend { "suspended" } else { "resumed" };
    writeln!(out, "cronjob.batch.kronjob.dev/{} {done}", args.name)?;
    Ok(())
}
