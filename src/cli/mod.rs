//! The `kronjob` command line: the manager (`run`) and its tools. The same entry point serves
//! the `kubectl-kronjob` plugin binary, so `kubectl kronjob trigger NAME` works.

pub mod next;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// kronjob: a Kubernetes operator for CronJobs (batch.kronjob.dev/v1).
#[derive(Parser, Debug)]
#[command(name = "kronjob", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the CustomResourceDefinition YAML (what `crd/` holds).
    Crd,
    /// Print the next run times of a schedule.
    Next(next::NextArgs),
    /// Run the manager: controllers (on the leader), webhook, metrics and probes.
    Run(Box<crate::manager::RunArgs>),
    /// Create a Job from a CronJob's template now (also `kubectl kronjob trigger NAME`).
    Trigger(TriggerArgs),
}

/// Flags of `kronjob trigger`.
#[derive(clap::Args, Debug)]
struct TriggerArgs {
    /// Name of the CronJob.
    name: String,
    /// Namespace of the CronJob (default: the kubeconfig's current namespace).
    #[arg(long, short = 'n')]
    namespace: Option<String>,
}

/// Exit code for a bad argument or value (as clap uses for usage errors).
pub const EXIT_USAGE: u8 = 2;

/// Parse the arguments and run the command.
pub fn main() -> ExitCode {
    // One TLS crypto provider for the whole process (kube's client and the webhook server).
    // An error means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => match crate::api::crdgen::crd_yaml() {
            Ok(yaml) => print(&yaml),
            Err(e) => fail(&e, ExitCode::FAILURE),
        },
        Command::Run(args) => {
            if let Err(message) = args.validate() {
                eprintln!("error: {message}");
                return ExitCode::from(EXIT_USAGE);
            }
            match runtime().map(|rt| rt.block_on(crate::manager::run(*args))) {
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(e)) => fail(&e, ExitCode::FAILURE),
                Err(e) => fail(&e, ExitCode::FAILURE),
            }
        }
        Command::Trigger(args) => match runtime().map(|rt| rt.block_on(trigger(args))) {
            Ok(Ok(name)) => {
                println!("job.batch/{name} created");
                ExitCode::SUCCESS
            }
            Ok(Err(e)) => fail(e.as_ref(), ExitCode::FAILURE),
            Err(e) => fail(&e, ExitCode::FAILURE),
        },
        Command::Next(args) => {
            let mut out = std::io::stdout().lock();
            match next::run(&args, jiff::Timestamp::now(), &mut out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(next::NextError::Io(e)) => fail(&e, ExitCode::FAILURE),
                Err(e) => fail(&e, ExitCode::from(EXIT_USAGE)),
            }
        }
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn trigger(args: TriggerArgs) -> Result<String, BoxError> {
    let client = crate::manager::client().await?;
    let namespace = args
        .namespace
        .unwrap_or_else(|| client.default_namespace().to_string());
    let job = crate::controller::cronjob::manual::trigger(
        client,
        &namespace,
        &args.name,
        jiff::Timestamp::now(),
    )
    .await?;
    Ok(job.metadata.name.unwrap_or_default())
}

fn print(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e, ExitCode::FAILURE),
    }
}

/// Print `error` and its causes on stderr, one line, and return `code`.
pub fn fail(error: &dyn std::error::Error, code: ExitCode) -> ExitCode {
    eprintln!("error: {}", crate::telemetry::error_chain(error));
    code
}
