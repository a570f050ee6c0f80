//! The `kronjob` command: what runs in the cluster. `run` is the manager; `crd` prints the
//! CRD it serves. The commands a user runs against the cluster are the kubectl plugin's
//! ([`crate::cli`]), a binary of their own without the manager.

use std::process::ExitCode;

use clap::Parser;

use crate::command::{EXIT_USAGE, fail, install_crypto, print, runtime};

/// kronjob: a Kubernetes operator for CronJobs (batch.kronjob.dev/v1).
#[derive(Parser, Debug)]
#[command(name = "kronjob", version, about, long_about = None)]
pub struct Kronjob {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Run the manager: controllers (on the leader), webhook, metrics and probes.
    Run(Box<super::RunArgs>),
    /// Print the CustomResourceDefinition YAML of CronJobs (what `crd/` holds), or with
    /// `--calendar` the one of Calendars.
    Crd {
        /// Print the Calendar CRD instead.
        #[arg(long)]
        calendar: bool,
    },
}

/// Parse the arguments and run the command.
pub fn main() -> ExitCode {
    install_crypto();
    match Kronjob::parse().command {
        Command::Crd { calendar } => match if calendar {
            crate::api::crdgen::calendar_crd_yaml()
        } else {
            crate::api::crdgen::crd_yaml()
        } {
            Ok(yaml) => print(&yaml),
            Err(e) => fail(&e, ExitCode::FAILURE),
        },
        Command::Run(args) => {
            if let Err(message) = args.validate() {
                eprintln!("error: {message}");
                return ExitCode::from(EXIT_USAGE);
            }
            match runtime(Some(usize::from(args.worker_threads)))
                .map(|rt| rt.block_on(super::run(*args)))
            {
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(e)) => fail(&e, ExitCode::FAILURE),
                Err(e) => fail(&e, ExitCode::FAILURE),
            }
        }
    }
}
