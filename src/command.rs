//! What both binaries share at the command line: exit codes, error output, the runtime.
//!
//! The exit code of a usage error, how an error is printed, the async runtime and the time
//! commands start from.

use std::io::Write;
use std::process::ExitCode;

use crate::clock::{Clock, SystemClock};

/// Exit code for a bad argument or value (as clap uses for usage errors).
pub const EXIT_USAGE: u8 = 2;

/// The multi-threaded runtime a command runs on: `workers` worker threads, or one per CPU
/// (the manager's: see `--worker-threads`).
pub fn runtime(workers: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = workers {
        builder.worker_threads(workers);
    }
    builder.enable_all().build()
}

/// Now, from the one clock of production code.
pub fn now() -> jiff::Timestamp {
    SystemClock.now()
}

/// Install the TLS crypto provider of the process (kube's client, the webhook server). An
/// error means one is installed already, which is what is wanted.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Write `text` on stdout.
pub fn print(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e, ExitCode::FAILURE),
    }
}

/// Print `error` and its causes on stderr, one line, and return `code`.
pub fn fail(error: &dyn std::error::Error, code: ExitCode) -> ExitCode {
    eprintln!("error: {}", message(error));
    code
}

/// `error` and its causes, `: `-separated, leaving out a cause whose text is already said
/// (several errors repeat their source in their own message).
pub fn message(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_has_the_worker_threads_asked_for() {
        for workers in [1, 3] {
            let rt = runtime(Some(workers)).expect("runtime");
            assert_eq!(rt.metrics().num_workers(), workers);
            assert_eq!(rt.block_on(async { 2 + 2 }), 4);
        }
    }
}
