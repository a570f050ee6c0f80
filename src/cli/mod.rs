//! The `kronjob` command line: the manager (`run`) and its tools. The same entry point serves
//! the `kubectl-kronjob` plugin binary, so `kubectl kronjob trigger NAME` works.

pub mod bench;
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

fn print(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e, ExitCode::FAILURE),
    }
}

/// Print `error` and its causes on stderr, one line, and return `code`.
pub fn fail(error: &dyn std::error::Error, code: ExitCode) -> ExitCode {
    let mut message = format!("error: {error}");
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    eprintln!("{message}");
    code
}
