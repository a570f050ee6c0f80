//! One schedule expression: a cron expression (with any `H` already resolved) or `@every`,
//! parsed with robfig's rules and evaluated with croner.

use std::fmt;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::parse::{Field, FieldSet, ParseError, get_field, parse_go_duration};
use super::{floor_second, wall};

/// One parsed expression: a cron expression (with any `H` already resolved) or `@every`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Expr {
    source: String,
    uses_hash: bool,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Cron(Box<CronSpec>),
    /// `@every`: whole seconds, at least 1.
    Every(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct CronSpec {
    fields: [FieldSet; 5],
    /// False when no calendar day can ever match (e.g. `0 0 30 2 *`).
    fires: bool,
    /// Minute and hour written with single values, ranges and lists only (no `*`, `?`, step
    /// or `H`): the schedule names wall-clock times and follows the fixed-time DST rule.
    fixed_time: bool,
    engine: Cron,
}

impl Expr {
    /// Parse a Kubernetes schedule. `hash_key` is `"namespace/name"` and feeds `H`.
    ///
    /// `H` may replace any list element: `H` is one value picked by a stable hash of
    /// `hash_key` (FNV-1a 64 over the key, the field name and the element's position, so
    /// minute and hour get different values); `H(a-b)` picks within `a-b`; `H/n` runs every
    /// `n` starting at a hashed offset in `[0, n)`; `H(a-b)/n` combines both. In day of month
    /// a bare `H` picks from 1-28 so it exists in every month. `H` does not carry the star bit.
    pub fn parse(expr: &str, hash_key: &str) -> Result<Expr, ParseError> {
        if expr.is_empty() {
            return Err(ParseError::Empty);
        }
        if expr.starts_with("TZ=") || expr.starts_with("CRON_TZ=") {
            return Err(ParseError::TimeZonePrefix(expr.to_string()));
        }
        if expr.starts_with('@') {
            let standard = match expr {
                "@yearly" | "@annually" => "0 0 1 1 *",
                "@monthly" => "0 0 1 * *",
                "@weekly" => "0 0 * * 0",
                "@daily" | "@midnight" => "0 0 * * *",
                "@hourly" => "0 * * * *",
                _ => {
                    if let Some(d) = expr.strip_prefix("@every ") {
                        let nanos =
                            parse_go_duration(d).map_err(|reason| ParseError::Duration {
                                spec: expr.to_string(),
                                reason,
                            })?;
                        // robfig `Every`: below one second becomes one second, then the
                        // sub-second part is dropped.
                        let secs = (nanos / 1_000_000_000).max(1);
                        let secs = i64::try_from(secs).unwrap_or(i64::MAX);
                        return Ok(Expr {
                            source: expr.to_string(),
                            uses_hash: false,
                            kind: Kind::Every(secs),
                        });
                    }
                    return Err(ParseError::UnrecognizedDescriptor(expr.to_string()));
                }
            };
            let mut s = Self::parse_fields(standard, "")?;
            s.source = expr.to_string();
            return Ok(s);
        }
        Self::parse_fields(expr, hash_key)
    }

    fn parse_fields(expr: &str, hash_key: &str) -> Result<Expr, ParseError> {
        let texts: Vec<&str> = expr.split_whitespace().collect();
        if texts.len() != 5 {
            return Err(ParseError::FieldCount {
                found: texts.len(),
                fields: texts.iter().map(|s| s.to_string()).collect(),
            });
        }
        let mut fields = [FieldSet {
            bits: 0,
            star: false,
            plain: false,
        }; 5];
        let mut uses_hash = false;
        for (i, field) in Field::ALL.iter().enumerate() {
            let (set, h) = get_field(*field, texts[i], hash_key)?;
            fields[i] = set;
            uses_hash |= h;
        }
        let [_, _, dom, month, dow] = fields;
        let and_mode = dom.star || dow.star;
        let fires = if and_mode && !dom.star && dow.star {
            // Only the day of month decides: it must exist in one of the months.
            month
                .values()
                .any(|m| dom.values().any(|d| d <= max_days_in_month(m)))
        } else {
            true
        };
        let fixed_time = fields[0].plain && fields[1].plain;
        let engine = build_engine(&fields, fixed_time)?;
        Ok(Expr {
            source: expr.to_string(),
            uses_hash,
            kind: Kind::Cron(Box::new(CronSpec {
                fields,
                fires,
                fixed_time,
                engine,
            })),
        })
    }

    /// First slot strictly after `after`, in zone `tz`; `None` if it never fires.
    ///
    /// For `@every d` this is `after` rounded down to the whole second plus `d` (robfig's
    /// `ConstantDelaySchedule`).
    pub fn next_after(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        match &self.kind {
            Kind::Every(d) => floor_second(after)
                .checked_add(jiff::SignedDuration::from_secs(*d))
                .ok(),
            Kind::Cron(spec) => {
                if !spec.fires {
                    return None;
                }
                if spec.fixed_time {
                    return wall::next_after(&spec.engine, after, tz);
                }
                let origin = after.to_zoned(tz.clone());
                spec.engine
                    .find_next_occurrence(&origin, false)
                    .ok()
                    .map(|z| z.timestamp())
                    .filter(|t| *t > after)
            }
        }
    }

    /// Most recent slot at or before `at` (cron schedules only; `None` for `@every`, whose
    /// slots depend on an anchor, and for schedules that never fire).
    pub fn prev_at_or_before(&self, at: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let Kind::Cron(spec) = &self.kind else {
            return None;
        };
        if !spec.fires {
            return None;
        }
        let found = if spec.fixed_time {
            wall::prev_at_or_before(&spec.engine, at, tz)?
        } else {
            let origin = floor_second(at).to_zoned(tz.clone());
            spec.engine
                .find_previous_occurrence(&origin, true)
                .ok()?
                .timestamp()
        };
        // Cross-check against the forward search, which defines the slots: the slot found
        // must be what `next_after` yields just before it.
        let before = found.checked_sub(jiff::SignedDuration::from_secs(1)).ok()?;
        if self.next_after(before, tz) == Some(found) {
            return Some(found);
        }
        // Disagreement (only conceivable around DST transitions): walk forward from a
        // day before, which is at most a few hundred steps for any real schedule.
        let mut t = self.next_after(
            found
                .checked_sub(jiff::SignedDuration::from_hours(26))
                .ok()?,
            tz,
        )?;
        let mut best = None;
        while t <= at {
            best = Some(t);
            t = self.next_after(t, tz)?;
        }
        best
    }

    /// Whether the expression uses `H` (its times then depend on the hash key).
    pub fn uses_hash(&self) -> bool {
        self.uses_hash
    }

    /// The `@every` interval in whole seconds, or `None` for a cron expression.
    pub fn every_seconds(&self) -> Option<i64> {
        match self.kind {
            Kind::Every(d) => Some(d),
            Kind::Cron(_) => None,
        }
    }

    /// Whether the schedule can ever fire (`0 0 30 2 *` cannot).
    pub fn ever_fires(&self) -> bool {
        match &self.kind {
            Kind::Every(_) => true,
            Kind::Cron(spec) => spec.fires,
        }
    }

    /// Whether a civil date and time (in the schedule's zone) matches the cron fields,
    /// using robfig's day rule. Always `false` for `@every`.
    pub fn matches_civil(&self, dt: jiff::civil::DateTime) -> bool {
        let Kind::Cron(spec) = &self.kind else {
            return false;
        };
        let [min, hour, dom, month, dow] = &spec.fields;
        // jiff keeps these in range, so the casts are lossless.
        let day_ok = {
            let d = dom.contains(dt.day() as u32);
            let w = dow.contains(u32::from(dt.weekday().to_sunday_zero_offset() as u8));
            if dom.star || dow.star { d && w } else { d || w }
        };
        dt.second() == 0
            && min.contains(dt.minute() as u32)
            && hour.contains(dt.hour() as u32)
            && month.contains(dt.month() as u32)
            && day_ok
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

fn max_days_in_month(m: u32) -> u32 {
    match m {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn list(set: &FieldSet) -> String {
    set.values()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Build croner's pattern from explicit lists. Day of month / day of week: croner ignores a
/// field written `*` and ORs two restricted ones, so writing `*` exactly where robfig's star
/// bit is set reproduces robfig's rule (a star-bit field selects every value anyway).
///
/// Croner runs a pattern with one minute and one hour as a fixed-time job in its zoned
/// search. An interval schedule can select one minute and one hour too (`H H * * *`,
/// `30 2/24 * * *`); its minute is then written `m-m/2`, the same single value with a step,
/// which croner runs as an interval job.
fn build_engine(fields: &[FieldSet; 5], fixed_time: bool) -> Result<Cron, ParseError> {
    let [min, hour, dom, month, dow] = fields;
    let dom_text = if dom.star { "*".to_string() } else { list(dom) };
    let dow_text = if dow.star { "*".to_string() } else { list(dow) };
    let single = |f: &FieldSet| f.bits.count_ones() == 1;
    let min_text = if !fixed_time && single(min) && single(hour) {
        format!("{0}-{0}/2", list(min))
    } else {
        list(min)
    };
    let pattern = format!(
        "{} {} {} {} {}",
        min_text,
        list(hour),
        dom_text,
        list(month),
        dow_text
    );
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .dom_and_dow(false)
        .build()
        .parse(&pattern)
        .map_err(|e| ParseError::Engine(format!("{pattern}: {e}")))
}
