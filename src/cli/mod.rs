//! The kubectl plugin (`kubectl-kronjob`): the commands a user runs against the cluster.
//!
//! `kubectl kronjob list`, `history`, `next`, `trigger`, `suspend`, `resume`, `migrate`,
//! `backfill`. The binary holds none of the manager: no controllers, no webhook.
//!
//! One file per command (`list`, `history`, `next`, `suspend`, `trigger`, `backfill`, and
//! `migrate/`);
//! `kube` holds kubectl's connection flags and the client, `table` kubectl-style output. Each
//! command's `run` takes the client, the current time and the output streams, so tests drive it
//! against a scripted API.

pub mod backfill;
pub mod cluster;
pub mod history;
pub mod list;
pub mod migrate;
pub mod next;
pub mod suspend;
pub mod table;
pub mod trigger;
pub mod workloads;

use std::future::Future;
use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::command::{EXIT_USAGE, fail, install_crypto, now, runtime};

/// kubectl kronjob: CronJobs of batch.kronjob.dev/v1, their runs and schedules.
#[derive(Parser, Debug)]
#[command(name = "kubectl-kronjob", bin_name = "kubectl kronjob", version, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List CronJobs with their last and next runs.
    #[command(visible_alias = "get")]
    List(list::ListArgs),
    /// Show the runs (Jobs) of a CronJob, newest first.
    History(history::HistoryArgs),
    /// Print the next run times of a CronJob (`next NAME`) or of a schedule (`next --schedule EXPR`).
    Next(next::NextArgs),
    /// Run a CronJob now or at a chosen time (--at, --in), or cancel a pending run (--cancel):
    /// the manager creates the Job, with the TTL policy of scheduled runs.
    Trigger(trigger::TriggerArgs),
    /// Suspend a CronJob: no new runs until it is resumed.
    Suspend(suspend::SuspendArgs),
    /// Resume a suspended CronJob.
    Resume(suspend::SuspendArgs),
    /// Migrate batch/v1 CronJobs to kronjob CronJobs (a dry run unless --apply).
    Migrate(migrate::MigrateArgs),
    /// Run the past slots of a range that never ran, oldest first, N at a time.
    Backfill(backfill::BackfillArgs),
}

/// Parse the arguments and run the command.
pub fn main() -> ExitCode {
    install_crypto();
    match Cli::parse().command {
        Command::Trigger(ref args) => with_cluster(args.kube(), |client, mut io| async move {
            trigger::run(client, args, now(), &mut io.out).await
        }),
        Command::Next(ref args) if args.cronjob().is_some() => {
            with_cluster(args.kube(), |client, mut io| async move {
                next::run_cronjob(client, args, now(), &mut io.out, &mut io.err).await
            })
        }
        Command::Next(args) => {
            let mut out = std::io::stdout().lock();
            match next::run(&args, now(), &mut out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(next::NextError::Io(e)) => fail(&e, ExitCode::FAILURE),
                Err(e) => fail(&e, ExitCode::from(EXIT_USAGE)),
            }
        }
        Command::List(ref args) => with_cluster(args.kube(), |client, mut io| async move {
            list::run(client, args, now(), &mut io.out, &mut io.err).await
        }),
        Command::History(ref args) => with_cluster(args.kube(), |client, mut io| async move {
            history::run(client, args, now(), &mut io.out, &mut io.err).await
        }),
        Command::Suspend(ref args) => with_cluster(args.kube(), |client, mut io| async move {
            suspend::run(client, args, true, &mut io.out).await
        }),
        Command::Resume(ref args) => with_cluster(args.kube(), |client, mut io| async move {
            suspend::run(client, args, false, &mut io.out).await
        }),
        Command::Migrate(ref args) => with_cluster(args.kube(), |client, mut io| async move {
            migrate::run(client, args, &mut io.out, &mut io.err).await
        }),
        Command::Backfill(ref args) => with_cluster(args.kube(), |client, mut io| async move {
            backfill::run(client, args, now(), &mut io.out).await
        }),
    }
}

/// Why a command failed; `Display` is the message printed after `error: `.
#[derive(thiserror::Error, Debug)]
pub enum CliError {
    /// A bad combination of arguments (exit code 2).
    #[error("{0}")]
    Usage(String),
    /// No client could be built from the kubeconfig.
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    /// The API server refused a request or could not be reached.
    #[error("{}", cluster::api_message(.0))]
    Api(kube::Error),
    /// The command could not do what was asked; the message says why.
    #[error("{0}")]
    Failed(String),
    /// Some items failed; each was reported already.
    #[error("{0}")]
    Reported(String),
    /// Writing the output failed.
    #[error("writing output: {0}")]
    Io(#[from] std::io::Error),
}

impl From<kube::Error> for CliError {
    fn from(error: kube::Error) -> Self {
        CliError::Api(error)
    }
}

impl CliError {
    /// The process exit code: 2 for usage errors, 1 otherwise (as kubectl).
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => EXIT_USAGE,
            _ => 1,
        }
    }
}

/// The process's output streams, handed to a command.
#[derive(Debug)]
struct Stdio {
    out: std::io::Stdout,
    err: std::io::Stderr,
}

/// Run a command that talks to the cluster: build the client from the kubeconfig flags, run
/// `command` with it, and turn the outcome into an exit code (errors on stderr as
/// `error: ...`).
fn with_cluster<F, Fut>(kube: &cluster::KubeArgs, command: F) -> ExitCode
where
    F: FnOnce(kube::Client, Stdio) -> Fut,
    Fut: Future<Output = Result<(), CliError>>,
{
    let rt = match runtime(None) {
        Ok(rt) => rt,
        Err(e) => return fail(&e, ExitCode::FAILURE),
    };
    let io = Stdio {
        out: std::io::stdout(),
        err: std::io::stderr(),
    };
    let result = rt.block_on(async {
        let client = kube.client().await?;
        command(client, io).await
    });
    let _ = std::io::stdout().flush();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Reported(_)) => ExitCode::FAILURE,
        Err(e) => fail(&e, ExitCode::from(e.exit_code())),
    }
}
