//! The `kronjob` command: the manager and its tools.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// kronjob: a Kubernetes operator for CronJobs (batch.kronjob.dev/v1).
#[derive(Parser, Debug)]
#[command(name = "kronjob", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the CustomResourceDefinition YAML (what `crd/` holds).
    Crd,
}

fn main() -> ExitCode {
    // One TLS crypto provider for the whole process (kube's client and the webhook server).
    // An error means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => match kronjob::api::crdgen::crd_yaml() {
            Ok(yaml) => print_or_fail(&yaml),
            Err(e) => fail(&e),
        },
    }
}

fn print_or_fail(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

fn fail(error: &dyn std::error::Error) -> ExitCode {
    let mut message = format!("error: {error}");
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    eprintln!("{message}");
    ExitCode::FAILURE
}
