//! What the fuzz targets share: reading the small text headers some of them take before their
//! payload. Each target's input is text a person can read and write (a seed is a file of the
//! same shape), so the seeds come straight from the tests' tables.

use jiff::Timestamp;

/// An instant written as Unix seconds (`1700000000`) or RFC 3339; `None` for anything else.
pub fn instant(text: &str) -> Option<Timestamp> {
    match text.parse::<i64>() {
        Ok(seconds) => Timestamp::from_second(seconds).ok(),
        Err(_) => text.parse().ok(),
    }
}

/// The instant the targets take as now when the input names none: 2026-11-28T19:00:00Z.
pub fn default_now() -> Timestamp {
    Timestamp::from_second(1_795_892_400).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A header line's whitespace-separated words, `-` standing for "not given".
pub fn words(line: &str) -> impl Iterator<Item = Option<&str>> {
    line.split_whitespace().map(|w| (w != "-").then_some(w))
}

/// `text` as UTF-8 split into its first line and the rest.
pub fn header_and_rest(data: &[u8]) -> Option<(&str, &str)> {
    let text = std::str::from_utf8(data).ok()?;
    Some(text.split_once('\n').unwrap_or((text, "")))
}
