//! Exclusion calendars and the active window: which slots of a schedule may run.
//!
//! A slot is excluded when its local date in the CronJob's zone (`slot.to_zoned(tz).date()`)
//! is one of the days of `spec.exclusions` or of a Calendar the CronJob names; it is outside
//! the window when it is before `spec.notBefore` or after `spec.notAfter` (both inclusive).
//! [`verdict`] decides one slot; [`next_allowed`] finds the first slot that may run, with a
//! bounded search. Pure: no I/O, no clock.

use std::fmt;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan};

use super::Schedule;

/// Excluded stretches [`next_allowed`] steps over before it gives up.
pub const MAX_EXCLUDED_SEARCH: usize = 1000;
/// How far ahead [`next_allowed`] looks for an allowed slot (about five years).
pub const SEARCH_HORIZON: SignedDuration = SignedDuration::from_hours(5 * 366 * 24);

/// A `YYYY-MM-DD` date, strictly: four-digit year, two-digit month and day, a real day.
pub fn parse_date(s: &str) -> Result<Date, String> {
    let b = s.as_bytes();
    let shaped = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    if !shaped {
        return Err("must be a date YYYY-MM-DD".into());
    }
    let num = |r: std::ops::Range<usize>| s[r].parse::<i16>().unwrap_or(0);
    let (y, m, d) = (num(0..4), num(5..7), num(8..10));
    Date::new(
        y,
        i8::try_from(m).unwrap_or(0),
        i8::try_from(d).unwrap_or(0),
    )
    .map_err(|_| "must be a real date YYYY-MM-DD".into())
}

/// A yearly `MM-DD` day: a day some year has (`02-29` is accepted: it matches in leap years).
pub fn parse_yearly(s: &str) -> Result<(i8, i8), String> {
    let b = s.as_bytes();
    let shaped = b.len() == 5
        && b[2] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 2 || c.is_ascii_digit());
    if !shaped {
        return Err("must be a day MM-DD".into());
    }
    let m = s[0..2].parse::<i8>().unwrap_or(0);
    let d = s[3..5].parse::<i8>().unwrap_or(0);
    // 2024 is a leap year: every day of any year exists in it.
    Date::new(2024, m, d)
        .map(|_| (m, d))
        .map_err(|_| "must be a real day MM-DD".into())
}

/// What names the excluded day: the CronJob's own `spec.exclusions`, or a Calendar.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// `spec.exclusions`.
    Inline,
    /// The Calendar of this name.
    Calendar(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Inline => f.write_str("spec.exclusions"),
            Source::Calendar(name) => write!(f, "Calendar {name}"),
        }
    }
}

/// The days of one calendar, parsed (entries that do not parse are left out: the API server
/// refuses them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Days {
    dates: Vec<Date>,
    ranges: Vec<(Date, Date)>,
    yearly: Vec<(i8, i8)>,
}

impl Days {
    /// The days named by `dates` (`YYYY-MM-DD`), inclusive `ranges` (from, to) and `yearly`
    /// days (`MM-DD`): a Calendar's spec, or a CronJob's `spec.exclusions`.
    pub fn of<'a>(
        dates: &[String],
        ranges: impl IntoIterator<Item = (&'a str, &'a str)>,
        yearly: &[String],
    ) -> Self {
        Days {
            dates: dates.iter().filter_map(|d| parse_date(d).ok()).collect(),
            ranges: ranges
                .into_iter()
                .filter_map(|(from, to)| Some((parse_date(from).ok()?, parse_date(to).ok()?)))
                .filter(|(from, to)| from <= to)
                .collect(),
            yearly: yearly.iter().filter_map(|d| parse_yearly(d).ok()).collect(),
        }
    }

    /// If `date` is one of the days: the last day of the excluded stretch it starts (the end
    /// of the longest range holding it, else the day itself).
    pub fn through(&self, date: Date) -> Option<Date> {
        let ranged = self
            .ranges
            .iter()
            .filter(|(from, to)| *from <= date && date <= *to)
            .map(|(_, to)| *to)
            .max();
        let single = self.dates.contains(&date)
            || self
                .yearly
                .iter()
                .any(|(m, d)| date.month() == *m && date.day() == *d);
        ranged.or(single.then_some(date))
    }
}

/// Every calendar a CronJob's slots are checked against, resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exclusions {
    sources: Vec<(Source, Days)>,
}

impl Exclusions {
    /// No excluded day.
    pub fn none() -> Self {
        Self::default()
    }

    /// Add the days of `source`.
    pub fn with(mut self, source: Source, days: Days) -> Self {
        self.sources.push((source, days));
        self
    }

    /// Whether no day is excluded.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// The first source excluding `date`, and the last day of the excluded stretch.
    fn find(&self, date: Date) -> Option<(&Source, Date)> {
        self.sources
            .iter()
            .find_map(|(source, days)| days.through(date).map(|end| (source, end)))
    }
}

/// Why a slot does not run: a calendar names its day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// The calendar that names the day (the first that does, inline first).
    pub source: Source,
    /// The slot's local date.
    pub date: Date,
}

/// The calendar that excludes `slot` (its local date in `tz`), if any.
pub fn excluded(slot: Timestamp, exclusions: &Exclusions, tz: &TimeZone) -> Option<Skip> {
    let date = slot.to_zoned(tz.clone()).date();
    exclusions.find(date).map(|(source, _)| Skip {
        source: source.clone(),
        date,
    })
}

/// `spec.notBefore` and `spec.notAfter`, both inclusive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// No slot before it runs.
    pub not_before: Option<Timestamp>,
    /// No slot after it runs.
    pub not_after: Option<Timestamp>,
}

impl Window {
    /// Whether `slot` is inside the window.
    pub fn contains(&self, slot: Timestamp) -> bool {
        self.not_before.is_none_or(|b| slot >= b) && self.not_after.is_none_or(|a| slot <= a)
    }

    /// Whether the window has ended at `slot`: the slot is after `notAfter`.
    pub fn ended_by(&self, slot: Timestamp) -> bool {
        self.not_after.is_some_and(|a| slot > a)
    }
}

/// May a slot run?
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Yes.
    Allowed,
    /// No: it is outside the window.
    OutsideWindow,
    /// No: a calendar names its day.
    Excluded(Skip),
}

/// Whether `slot` may run: inside the window, and its day excluded by no calendar.
pub fn verdict(
    slot: Timestamp,
    exclusions: &Exclusions,
    window: &Window,
    tz: &TimeZone,
) -> Verdict {
    if !window.contains(slot) {
        return Verdict::OutsideWindow;
    }
    match excluded(slot, exclusions, tz) {
        Some(skip) => Verdict::Excluded(skip),
        None => Verdict::Allowed,
    }
}

/// The slots of a schedule, to search forwards.
#[derive(Debug, Clone, Copy)]
pub enum Grid<'a> {
    /// A cron schedule.
    Cron(&'a Schedule),
    /// `@every d` (seconds) from `base` (a slot that ran, or the creation).
    Every {
        /// The anchor, rounded down to the second.
        base: Timestamp,
        /// The period in seconds.
        seconds: i64,
    },
}

impl<'a> Grid<'a> {
    /// The slots of `schedule`; `@every` slots hang off `anchor` (the last slot that ran or
    /// was skipped, else the creation), as in [`super::slots`].
    pub fn of(schedule: &'a Schedule, anchor: Timestamp) -> Self {
        match schedule.every_seconds() {
            Some(seconds) => Grid::Every {
                base: super::floor_second(anchor),
                seconds,
            },
            None => Grid::Cron(schedule),
        }
    }

    /// The first slot at or after `t`.
    pub fn at_or_after(&self, t: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        match *self {
            Grid::Cron(schedule) => {
                schedule.next_after(t.checked_sub(SignedDuration::from_nanos(1)).ok()?, tz)
            }
            Grid::Every { base, seconds } => {
                // Whole seconds at or after `t`; the smallest k >= 1 with base + k*d there.
                let at = t.as_second() + i64::from(t.subsec_nanosecond() > 0);
                let gap = at.saturating_sub(base.as_second());
                let k = (gap.saturating_add(seconds - 1).div_euclid(seconds)).max(1);
                Timestamp::from_second(base.as_second().checked_add(k.checked_mul(seconds)?)?).ok()
            }
        }
    }

    /// The first slot strictly after `t`.
    pub fn after(&self, t: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        match self {
            Grid::Cron(schedule) => schedule.next_after(t, tz),
            Grid::Every { .. } => {
                let next = Timestamp::from_second(t.as_second().checked_add(1)?).ok()?;
                self.at_or_after(next, tz)
            }
        }
    }
}

/// The next slot that may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// This one.
    At(Timestamp),
    /// None: the schedule has no slot left in the window (`notAfter` passed), or never fires.
    WindowEnded,
    /// None found within [`MAX_EXCLUDED_SEARCH`] excluded stretches or [`SEARCH_HORIZON`].
    GaveUp,
}

/// The first slot at or after `first` (a slot of `grid`) that may run: inside the window and
/// on no excluded day. An excluded day is stepped over whole (a range at once), so a schedule
/// every minute costs one step per excluded stretch, not one per slot.
pub fn next_allowed(
    grid: Grid<'_>,
    first: Timestamp,
    exclusions: &Exclusions,
    window: &Window,
    tz: &TimeZone,
) -> Next {
    let horizon = first.checked_add(SEARCH_HORIZON).unwrap_or(Timestamp::MAX);
    let mut candidate = match window.not_before {
        Some(b) if first < b => grid.at_or_after(b, tz),
        _ => Some(first),
    };
    for _ in 0..MAX_EXCLUDED_SEARCH {
        let Some(slot) = candidate else {
            return Next::WindowEnded;
        };
        if window.ended_by(slot) {
            return Next::WindowEnded;
        }
        if slot > horizon {
            return Next::GaveUp;
        }
        let date = slot.to_zoned(tz.clone()).date();
        let Some((_, through)) = exclusions.find(date) else {
            return Next::At(slot);
        };
        // The first slot of the day after the stretch, in the zone (its first instant, also
        // on a day that starts at 01:00 because of DST).
        let Some(resume) = through
            .checked_add(1.day())
            .ok()
            .and_then(|d| d.to_zoned(tz.clone()).ok())
        else {
            return Next::GaveUp;
        };
        candidate = grid.at_or_after(resume.timestamp(), tz);
    }
    Next::GaveUp
}

#[cfg(test)]
mod tests;
