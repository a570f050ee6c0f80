//! Durations in command-line flags: whole seconds, or Go duration syntax.
//!
//! Durations in command-line flags (`--default-job-ttl`, `--shutdown-delay`, `bench
//! --duration`): a bare whole number is seconds, anything else is Go duration syntax as in
//! `@every` and kubectl (`90s`, `5m`, `1h30m`, `1.5h`, `500ms`). One parser for all of them.

use std::time::Duration;

/// Parse a non-negative duration flag value.
pub fn parse_flag_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| format!("duration {text:?} is too large"));
    }
    let nanos = crate::schedule::parse_go_duration(text)?;
    let nanos = u64::try_from(nanos)
        .map_err(|_| format!("duration {text:?} must not be negative (or is too large)"))?;
    Ok(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_seconds_and_go_syntax() {
        for (text, want) in [
            ("0", Duration::ZERO),
            ("3600", Duration::from_secs(3600)),
            ("90s", Duration::from_secs(90)),
            ("5m", Duration::from_secs(300)),
            ("1h30m", Duration::from_secs(5400)),
            ("1.5m", Duration::from_secs(90)),
            ("500ms", Duration::from_millis(500)),
            (" 24h ", Duration::from_secs(86400)),
        ] {
            assert_eq!(parse_flag_duration(text), Ok(want), "{text:?}");
        }
        for bad in [
            "",
            "m",
            "5x",
            "-5m",
            "1d",
            "99999999999999999999",
            "99999999999h",
        ] {
            assert!(parse_flag_duration(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
