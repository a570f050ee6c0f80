//! Time zones (`spec.timeZone`) and the scheduled-time annotation.

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Why a `timeZone` value was refused.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum ZoneError {
    /// `""`: upstream would silently mean UTC; we ask for an explicit name.
    #[error("time zone must not be empty; omit it for UTC or name an IANA zone")]
    Empty,
    /// `Local` (any case): the operator's own zone is not a property of the CronJob.
    #[error(
        "time zone {0:?} is not allowed; name an IANA zone such as \"UTC\" or \"Europe/Paris\""
    )]
    Local(String),
    /// Not a zone of the bundled IANA database (names are case-sensitive, as in Go).
    #[error("unknown time zone {0}")]
    Unknown(String),
}

/// Load a `timeZone` value: `None` -> UTC; `""` and `Local` (any case) are errors; unknown
/// IANA names are errors (`unknown time zone Europe/Pariss`). The database is the one
/// compiled into the binary (jiff `tzdb-bundle-always`), so results do not depend on the
/// host or the container image.
pub fn time_zone(name: Option<&str>) -> Result<TimeZone, ZoneError> {
    let Some(name) = name else {
        return Ok(TimeZone::UTC);
    };
    if name.is_empty() {
        return Err(ZoneError::Empty);
    }
    if name.eq_ignore_ascii_case("local") {
        return Err(ZoneError::Local(name.to_string()));
    }
    let tz = TimeZone::get(name).map_err(|_| ZoneError::Unknown(name.to_string()))?;
    // jiff looks names up case-insensitively; Go's LoadLocation (and so the apiserver) does
    // not, so insist on the database's spelling.
    match tz.iana_name() {
        Some(canonical) if canonical == name => Ok(tz),
        _ => Err(ZoneError::Unknown(name.to_string())),
    }
}

/// RFC 3339 of the scheduled time in the CronJob's zone, as Go's `time.RFC3339` writes it:
/// whole seconds, and `Z` whenever the offset is zero (e.g. `2024-03-10T03:00:00-04:00`,
/// `2024-01-15T10:10:00Z`).
pub fn scheduled_at(scheduled: Timestamp, tz: &TimeZone) -> String {
    let zoned = scheduled.to_zoned(tz.clone());
    let dt = zoned.datetime();
    let offset = zoned.offset().seconds();
    let suffix = if offset == 0 {
        "Z".to_string()
    } else {
        let sign = if offset < 0 { '-' } else { '+' };
        let abs = offset.unsigned_abs();
        format!("{sign}{:02}:{:02}", abs / 3600, (abs % 3600) / 60)
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{suffix}",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    )
}
