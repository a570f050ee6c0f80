//! Logging: `tracing` with a human format on a terminal and JSON otherwise (or as asked);
//! the level comes from `RUST_LOG` (default `info`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

/// How log lines are written.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human text on a terminal, JSON otherwise.
    #[default]
    Auto,
    /// Human-readable text.
    Text,
    /// One JSON object per line.
    Json,
}

impl LogFormat {
    /// The format to use given whether stderr is a terminal.
    pub fn resolve(self, terminal: bool) -> LogFormat {
        match self {
            LogFormat::Auto if terminal => LogFormat::Text,
            LogFormat::Auto => LogFormat::Json,
            other => other,
        }
    }
}

/// Install the global subscriber. Calling it twice keeps the first one.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_span_events(FmtSpan::NONE);
    let _ = match format.resolve(std::io::stderr().is_terminal()) {
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        _ => builder.try_init(),
    };
}

/// An error with its sources, `a: b: c`, for one log line or one stderr line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_text_on_a_terminal_and_json_elsewhere() {
        assert_eq!(LogFormat::Auto.resolve(true), LogFormat::Text);
        assert_eq!(LogFormat::Auto.resolve(false), LogFormat::Json);
        assert_eq!(LogFormat::Json.resolve(true), LogFormat::Json);
        assert_eq!(LogFormat::Text.resolve(false), LogFormat::Text);
    }
}
