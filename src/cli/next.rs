//! `kronjob next`: print the next run times of a schedule.

use std::io::Write;

use jiff::Timestamp;

use crate::schedule::{ParseError, Schedule, ZoneError, time_zone};

/// Print the next times a schedule fires, one RFC 3339 UTC timestamp per line.
#[derive(clap::Args, Debug)]
pub struct NextArgs {
    /// The schedule, e.g. "*/15 * * * *", "@daily", "@every 90m", "H H * * *".
    schedule: String,
    /// IANA time zone the schedule is evaluated in (default UTC).
    #[arg(long)]
    time_zone: Option<String>,
    /// Start from this instant (RFC 3339) instead of now; printed times are strictly after it.
    #[arg(long)]
    from: Option<String>,
    /// How many times to print.
    #[arg(long, default_value_t = 5)]
    count: usize,
    /// NAMESPACE/NAME of the CronJob, the key `H` hashes (required when the schedule uses `H`).
    #[arg(long)]
    name: Option<String>,
}

/// Why `kronjob next` failed. `Display` is the message for stderr.
#[derive(thiserror::Error, Debug)]
pub enum NextError {
    /// The schedule does not parse.
    #[error(transparent)]
    Schedule(#[from] ParseError),
    /// The time zone is unknown or not allowed.
    #[error(transparent)]
    Zone(#[from] ZoneError),
    /// `--from` is not an RFC 3339 instant.
    #[error("invalid --from {value:?}: {reason}")]
    From {
        /// The value given.
        value: String,
        /// The parser's reason.
        reason: String,
    },
    /// The schedule uses `H` but no `--name` was given.
    #[error("schedule {0:?} uses H: pass --name NAMESPACE/NAME to pick its times")]
    MissingName(String),
    /// The schedule parses but can never fire (e.g. "0 0 30 2 *").
    #[error("schedule {0:?} never fires")]
    NeverFires(String),
    /// Writing the output failed.
    #[error("writing output: {0}")]
    Io(#[from] std::io::Error),
}

/// Run `kronjob next`, writing to `out`; `now` is used when `--from` is absent.
pub fn run(args: &NextArgs, now: Timestamp, out: &mut dyn Write) -> Result<(), NextError> {
    let key = args.name.as_deref().unwrap_or("");
    let schedule = Schedule::parse(&args.schedule, key)?;
    if schedule.uses_hash() && args.name.is_none() {
        return Err(NextError::MissingName(args.schedule.clone()));
    }
    let tz = time_zone(args.time_zone.as_deref())?;
    let mut t = match &args.from {
        Some(s) => s.parse::<Timestamp>().map_err(|e| NextError::From {
            value: s.clone(),
            reason: e.to_string(),
        })?,
        None => now,
    };
    if args.count > 0 && !schedule.ever_fires() {
        return Err(NextError::NeverFires(args.schedule.clone()));
    }
    for _ in 0..args.count {
        let Some(n) = schedule.next_after(t, &tz) else {
            break;
        };
        writeln!(
            out,
            "{}",
            crate::schedule::scheduled_at(n, &jiff::tz::TimeZone::UTC)
        )?;
        t = n;
    }
    Ok(())
}
