//! Schedule maths: Kubernetes-compatible cron, time zones, DST and missed runs.
//!
//! Pure: no API calls, and the current time is always passed in.
//!
//! # Language
//! Exactly what Kubernetes accepts (robfig/cron v3 `ParseStandard`): five fields, ranges,
//! lists, steps (`N/step` = `N-max/step`), `?` as `*` in any field, `JAN`-`DEC` and `SUN`-`SAT`
//! in any case, day of week 0-6 (`7` is rejected), the descriptors `@yearly @annually @monthly
//! @weekly @daily @midnight @hourly` and `@every <Go duration>`. Day of month and day of week
//! are ANDed when either field carries robfig's *star bit* (a bare `*` or `?`, or `*/1`; `*/2`
//! does not), and ORed otherwise: `0 0 1 * MON` runs on the 1st and on Mondays.
//! Error messages are robfig's (`end of range (61) above maximum (59): 61`).
//!
//! Beyond upstream: `H` (Jenkins-style jitter, see [`Schedule::parse`]), any IANA zone of the
//! tz database compiled into the binary, the DST rule described in `README-dst.md` (included
//! below), and several expressions in one schedule ([`Schedule::parse_each`]): their slots
//! are merged, an instant several of them match is one slot.
//!
//! # Why croner, behind an adapter
//! The calendar arithmetic is done by [`croner`], which reads five-field expressions with
//! Sunday = 0. Interval schedules use its zoned search, which follows real elapsed time.
//! Fixed-time schedules use it on the wall clock only (evaluated in UTC) and map each matching
//! wall-clock time to an instant here (`wall.rs`): croner's own fixed-time rule covers a single
//! minute and hour only, and treats lists and ranges as interval jobs.
//! The `cron` crate was not used: it requires a seconds field and numbers weekdays 1-7 with
//! Sunday = 1 (Quartz), so a naive `"0 " + expr` silently shifts every numeric day of week,
//! and it ANDs day of month with day of week. Croner in turn accepts more than Kubernetes
//! (`L`, `W`, `#`, `+`, `7`, wrap-around ranges, seconds, years), so our own parser
//! (`parse.rs`) validates with robfig's rules and hands croner only explicit value lists.
//!
#![doc = include_str!("README-dst.md")]

pub mod exclusions;
mod expr;
mod parse;
mod slots;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upstream_tests;
mod wall;
mod zone;

use std::fmt;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use expr::Expr;
pub(crate) use parse::parse_go_duration;
pub use parse::{Field, ParseError};
pub use slots::{SlotError, SlotQuery, Slots, slots};
pub use zone::{ZoneError, scheduled_at, time_zone};

/// Schedules [`Schedule::parse_each_memo`] remembers.
pub const MEMO_CAPACITY: usize = 1024;

/// What a remembered schedule is found by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MemoKey {
    exprs: Vec<String>,
    /// The hash key, for expressions with `H` only.
    hash_key: Option<String>,
}

/// Most expressions in one schedule (`spec.schedules`).
pub const MAX_EXPRESSIONS: usize = 16;

/// A parsed schedule: one expression (`spec.schedule`) or several (`spec.schedules`), each a
/// cron expression (with any `H` already resolved) or `@every`.
///
/// With several expressions the slots are the union of theirs: the next slot is the earliest
/// of their next slots, the last slot the latest of their last ones, and an instant several of
/// them match is one slot (one Job). Each expression keeps its own DST rule (fixed-time or
/// interval). `@every` runs relative to the last run, which another expression would move, so
/// it stands alone ([`ListError::EveryCombined`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The expression as written (one), or the list as `["a", "b"]` (several).
    source: String,
    /// Never empty.
    exprs: Vec<Expr>,
}

/// Why a list of expressions is not a schedule.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum ListError {
    /// No expression at all.
    #[error("at least one schedule is required")]
    Empty,
    /// `@every` beside other expressions.
    #[error(
        "{expr:?} cannot be combined with other schedules: @every runs relative to the last run, which the others move"
    )]
    EveryCombined {
        /// Position of the `@every` expression.
        index: usize,
        /// The expression.
        expr: String,
    },
    /// One expression does not parse.
    #[error("{expr:?}: {error}")]
    Expr {
        /// Its position.
        index: usize,
        /// The expression.
        expr: String,
        /// Why.
        error: ParseError,
    },
}

impl ListError {
    /// The position of the expression the error is about, if it is about one.
    pub fn index(&self) -> Option<usize> {
        match self {
            ListError::Empty => None,
            ListError::EveryCombined { index, .. } | ListError::Expr { index, .. } => Some(*index),
        }
    }
}

impl Schedule {
    /// Parse one Kubernetes schedule expression. `hash_key` is `"namespace/name"` and feeds `H`.
    ///
    /// `H` may replace any list element: `H` is one value picked by a stable hash of
    /// `hash_key` (FNV-1a 64 over the key, the field name and the element's position, so
    /// minute and hour get different values); `H(a-b)` picks within `a-b`; `H/n` runs every
    /// `n` starting at a hashed offset in `[0, n)`; `H(a-b)/n` combines both. In day of month
    /// a bare `H` picks from 1-28 so it exists in every month. `H` does not carry the star bit.
    pub fn parse(expr: &str, hash_key: &str) -> Result<Schedule, ParseError> {
        Ok(Schedule {
            source: expr.to_string(),
            exprs: vec![Expr::parse(expr, hash_key)?],
        })
    }

    /// [`Schedule::parse_each`], remembered: the controller plans every CronJob at every slot,
    /// parsing dominated that, and CronJobs mostly share a few schedules. Expressions without
    /// `H` are remembered by their text alone (the key changes nothing), others with the key;
    /// the most recently used [`MEMO_CAPACITY`] are kept. Errors are not remembered.
    pub fn parse_each_memo(exprs: &[String], hash_key: &str) -> Result<Schedule, ListError> {
        static MEMO: std::sync::LazyLock<std::sync::Mutex<lru::LruCache<MemoKey, Schedule>>> =
            std::sync::LazyLock::new(|| {
                std::sync::Mutex::new(lru::LruCache::new(
                    std::num::NonZeroUsize::new(MEMO_CAPACITY)
                        .unwrap_or(std::num::NonZeroUsize::MIN),
                ))
            });
        let hashed = exprs.iter().any(|e| e.contains('H'));
        let key = MemoKey {
            exprs: exprs.to_vec(),
            hash_key: hashed.then(|| hash_key.to_string()),
        };
        let lock = || {
            MEMO.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(found) = lock().get(&key) {
            return Ok(found.clone());
        }
        let parsed = Schedule::parse_each(exprs, hash_key)?;
        lock().put(key, parsed.clone());
        Ok(parsed)
    }

    /// Parse several expressions as one schedule (one expression is [`Schedule::parse`]).
    /// Every expression hashes `H` with the same key, so `H` in the same field and position
    /// picks the same value in each: `["H 9 * * *", "H 17 * * *"]` runs at one minute past 9
    /// and past 17. `@every` must stand alone.
    pub fn parse_each<S: AsRef<str>>(exprs: &[S], hash_key: &str) -> Result<Schedule, ListError> {
        if let [one] = exprs {
            let one = one.as_ref();
            return Schedule::parse(one, hash_key).map_err(|error| ListError::Expr {
                index: 0,
                expr: one.to_string(),
                error,
            });
        }
        if exprs.is_empty() {
            return Err(ListError::Empty);
        }
        let mut parsed = Vec::with_capacity(exprs.len());
        for (index, text) in exprs.iter().enumerate() {
            let text = text.as_ref();
            let expr = Expr::parse(text, hash_key).map_err(|error| ListError::Expr {
                index,
                expr: text.to_string(),
                error,
            })?;
            if expr.every_seconds().is_some() {
                return Err(ListError::EveryCombined {
                    index,
                    expr: text.to_string(),
                });
            }
            parsed.push(expr);
        }
        let texts: Vec<&str> = exprs.iter().map(AsRef::as_ref).collect();
        Ok(Schedule {
            source: format!("{texts:?}"),
            exprs: parsed,
        })
    }

    /// First slot strictly after `after`, in zone `tz`; `None` if it never fires.
    ///
    /// For `@every d` this is `after` rounded down to the whole second plus `d` (robfig's
    /// `ConstantDelaySchedule`).
    pub fn next_after(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        self.exprs
            .iter()
            .filter_map(|e| e.next_after(after, tz))
            .min()
    }

    /// Most recent slot at or before `at` (cron schedules only; `None` for `@every`, whose
    /// slots depend on an anchor, and for schedules that never fire). Each expression is
    /// searched backwards on its own, then the latest wins.
    pub fn prev_at_or_before(&self, at: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        self.exprs
            .iter()
            .filter_map(|e| e.prev_at_or_before(at, tz))
            .max()
    }

    /// The period at the slot `next`: the gap from it to the slot after it. With several
    /// expressions, the shortest of their own gaps at their first slot at or after `next`, so
    /// an expression running every minute makes the period a minute whatever the others do.
    pub fn period_at(&self, next: Timestamp, tz: &TimeZone) -> Option<SignedDuration> {
        if let [one] = self.exprs.as_slice() {
            return Some(one.next_after(next, tz)?.duration_since(next));
        }
        let before = next.checked_sub(SignedDuration::from_secs(1)).ok()?;
        self.exprs
            .iter()
            .filter_map(|e| {
                let first = e.next_after(before, tz)?;
                Some(e.next_after(first, tz)?.duration_since(first))
            })
            .min()
    }

    /// The expression as written (one), or the list as `["a", "b"]` (several).
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The schedule for messages: the expression quoted (`"0 0 30 2 *"`), or the list
    /// (`["0 0 30 2 *", "0 0 31 4 *"]`).
    pub fn describe(&self) -> String {
        match self.exprs.as_slice() {
            [_] => format!("{:?}", self.source),
            _ => self.source.clone(),
        }
    }

    /// How many expressions the schedule has.
    pub fn len(&self) -> usize {
        self.exprs.len()
    }

    /// Never: a schedule has at least one expression.
    pub fn is_empty(&self) -> bool {
        self.exprs.is_empty()
    }

    /// Whether any expression uses `H` (its times then depend on the hash key).
    pub fn uses_hash(&self) -> bool {
        self.exprs.iter().any(Expr::uses_hash)
    }

    /// The `@every` interval in whole seconds when the schedule is one `@every`, else `None`.
    pub fn every_seconds(&self) -> Option<i64> {
        match self.exprs.as_slice() {
            [one] => one.every_seconds(),
            _ => None,
        }
    }

    /// Whether the schedule can ever fire (`0 0 30 2 *` cannot).
    pub fn ever_fires(&self) -> bool {
        self.exprs.iter().any(Expr::ever_fires)
    }

    /// Whether a civil date and time (in the schedule's zone) matches any cron expression,
    /// using robfig's day rule. Always `false` for `@every`.
    pub fn matches_civil(&self, dt: jiff::civil::DateTime) -> bool {
        self.exprs.iter().any(|e| e.matches_civil(dt))
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl std::str::FromStr for Schedule {
    type Err = ParseError;
    /// Parses with an empty `H` hash key.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Schedule::parse(s, "")
    }
}

/// Round down to the whole second (towards the past, also before 1970).
pub(crate) fn floor_second(t: Timestamp) -> Timestamp {
    let mut secs = t.as_second();
    if t.subsec_nanosecond() < 0 {
        secs -= 1;
    }
    Timestamp::from_second(secs).unwrap_or(t)
}
