//! The validating front end: a robfig/cron v3 `ParseStandard`-compatible parser, plus `H`.
//!
//! Every field is turned into a bit set here, with robfig's error messages, before croner
//! ever sees the expression. Croner then only receives explicit value lists, so none of its
//! own extensions (`L`, `W`, `#`, `+`, `7` for Sunday, wrap-around ranges, seconds, years)
//! can leak through.

use std::fmt;

/// One of the five fields of a cron expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// Minute, 0-59.
    Minute,
    /// Hour, 0-23.
    Hour,
    /// Day of month, 1-31.
    DayOfMonth,
    /// Month, 1-12 or `JAN`-`DEC`.
    Month,
    /// Day of week, 0-6 (0 = Sunday) or `SUN`-`SAT`.
    DayOfWeek,
}

impl Field {
    /// All fields, in expression order.
    pub const ALL: [Field; 5] = [
        Field::Minute,
        Field::Hour,
        Field::DayOfMonth,
        Field::Month,
        Field::DayOfWeek,
    ];

    /// Smallest value the field accepts.
    pub const fn min(self) -> u32 {
        match self {
            Field::DayOfMonth | Field::Month => 1,
            _ => 0,
        }
    }

    /// Largest value the field accepts.
    pub const fn max(self) -> u32 {
        match self {
            Field::Minute => 59,
            Field::Hour => 23,
            Field::DayOfMonth => 31,
            Field::Month => 12,
            Field::DayOfWeek => 6,
        }
    }

    /// Lower-case field name, used in messages and as the `H` hash salt.
    pub const fn name(self) -> &'static str {
        match self {
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
        }
    }

    fn names(self) -> &'static [&'static str] {
        const MONTHS: [&str; 12] = [
            "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        ];
        const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
        match self {
            Field::Month => &MONTHS,
            Field::DayOfWeek => &DAYS,
            _ => &[],
        }
    }

    /// First value of a name, e.g. `jan` = 1, `sun` = 0.
    fn name_offset(self) -> u32 {
        match self {
            Field::Month => 1,
            _ => 0,
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a schedule expression was rejected. `Display` gives robfig/cron v3's message where
/// robfig rejects the expression too, so users see what `kubectl` would show them.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum ParseError {
    /// The expression is empty.
    #[error("empty spec string")]
    Empty,
    /// Not exactly five whitespace-separated fields.
    #[error("expected exactly 5 fields, found {found}: [{}]", fields.join(" "))]
    FieldCount {
        /// How many fields were found.
        found: usize,
        /// The fields, as split.
        fields: Vec<String>,
    },
    /// An `@` word that is not a known descriptor (e.g. `@reboot`).
    #[error("unrecognized descriptor: {0}")]
    UnrecognizedDescriptor(String),
    /// `@every` with a duration Go's `time.ParseDuration` would reject.
    #[error("failed to parse duration {spec}: {reason}")]
    Duration {
        /// The whole descriptor, e.g. `@every 1x`.
        spec: String,
        /// Go-style reason, e.g. `time: unknown unit "x" in duration "1x"`.
        reason: String,
    },
    /// A `TZ=` or `CRON_TZ=` prefix; Kubernetes rejects these on create, use `timeZone`.
    #[error("CRON_TZ or TZ prefixes are not supported, set spec.timeZone instead: {0}")]
    TimeZonePrefix(String),
    /// A bad token in one field; the message names the token, robfig style.
    #[error("{message}")]
    Field {
        /// The field holding the bad token.
        field: Field,
        /// Robfig-style message ending in `: <token>`.
        message: String,
    },
    /// The engine refused a normalised pattern. Not expected; reported rather than panicking.
    #[error("internal schedule error: {0}")]
    Engine(String),
}

impl ParseError {
    /// The field the error is about, when it is about one field.
    pub fn field(&self) -> Option<Field> {
        match self {
            ParseError::Field { field, .. } => Some(*field),
            _ => None,
        }
    }

    fn field_err(field: Field, message: String) -> Self {
        ParseError::Field { field, message }
    }
}

/// The values one field selects: bit `v` set = value `v` selected; `star` is robfig's star bit
/// (the field was `*` or `?`, with no step or a step of 1); `plain` says the text named its
/// values only by single values, ranges and lists: no `*`, `?`, step `/` or `H`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldSet {
    pub bits: u64,
    pub star: bool,
    pub plain: bool,
}

impl FieldSet {
    pub fn contains(&self, v: u32) -> bool {
        v < 64 && self.bits & (1u64 << v) != 0
    }

    pub fn values(&self) -> impl Iterator<Item = u32> + '_ {
        (0..64u32).filter(move |v| self.contains(*v))
    }
}

/// Go's `strconv.Atoi` with its error text, except that a leading `+` is refused
/// (Kubernetes documents no such syntax and croner would read it as its AND modifier).
fn atoi(expr: &str) -> Result<i64, String> {
    let syntax = || format!("strconv.Atoi: parsing {expr:?}: invalid syntax");
    let digits = expr.strip_prefix('-').unwrap_or(expr);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    expr.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {expr:?}: value out of range"))
}

/// robfig `mustParseInt`: an integer that must not be negative.
fn must_parse_int(field: Field, expr: &str) -> Result<u32, ParseError> {
    let num = atoi(expr).map_err(|e| {
        ParseError::field_err(field, format!("failed to parse int from {expr}: {e}"))
    })?;
    if num < 0 {
        return Err(ParseError::field_err(
            field,
            format!("negative number ({num}) not allowed: {expr}"),
        ));
    }
    // Values above u32::MAX are caught by the range checks anyway; saturate.
    Ok(u32::try_from(num).unwrap_or(u32::MAX))
}

/// robfig `parseIntOrName`.
fn parse_int_or_name(field: Field, expr: &str) -> Result<u32, ParseError> {
    let lower = expr.to_ascii_lowercase();
    if let Some(i) = field.names().iter().position(|n| *n == lower) {
        // `i` < 12, so the cast is lossless.
        return Ok(i as u32 + field.name_offset());
    }
    must_parse_int(field, expr)
}

fn bits(start: u32, end: u32, step: u32) -> u64 {
    let mut b = 0u64;
    let mut v = start;
    while v <= end && v < 64 {
        b |= 1u64 << v;
        match v.checked_add(step) {
            Some(n) => v = n,
            None => break,
        }
    }
    b
}

fn check_bounds(
    field: Field,
    start: u32,
    end: u32,
    step: u32,
    expr: &str,
) -> Result<(), ParseError> {
    if start < field.min() {
        return Err(ParseError::field_err(
            field,
            format!(
                "beginning of range ({start}) below minimum ({}): {expr}",
                field.min()
            ),
        ));
    }
    if end > field.max() {
        return Err(ParseError::field_err(
            field,
            format!(
                "end of range ({end}) above maximum ({}): {expr}",
                field.max()
            ),
        ));
    }
    if start > end {
        return Err(ParseError::field_err(
            field,
            format!("beginning of range ({start}) beyond end of range ({end}): {expr}"),
        ));
    }
    if step == 0 {
        return Err(ParseError::field_err(
            field,
            format!("step of range should be a positive number: {expr}"),
        ));
    }
    Ok(())
}

/// robfig `getRange`: `number | number "-" number [ "/" number ]`, `*`/`?` with optional step.
fn get_range(field: Field, expr: &str) -> Result<FieldSet, ParseError> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end, mut star);
    let wildcard = low_and_high[0] == "*" || low_and_high[0] == "?";
    if wildcard {
        start = field.min();
        end = field.max();
        star = true;
    } else {
        start = parse_int_or_name(field, low_and_high[0])?;
        end = match low_and_high.len() {
            1 => start,
            2 => parse_int_or_name(field, low_and_high[1])?,
            _ => {
                return Err(ParseError::field_err(
                    field,
                    format!("too many hyphens: {expr}"),
                ));
            }
        };
        star = false;
    }
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = must_parse_int(field, range_and_step[1])?;
            // "N/step" means "N-max/step".
            if single {
                end = field.max();
            }
            if step > 1 {
                star = false;
            }
            step
        }
        _ => {
            return Err(ParseError::field_err(
                field,
                format!("too many slashes: {expr}"),
            ));
        }
    };
    check_bounds(field, start, end, step, expr)?;
    Ok(FieldSet {
        bits: bits(start, end, step),
        star,
        plain: !wildcard && range_and_step.len() == 1,
    })
}

/// The hash behind `H`: FNV-1a 64 of `hash_key`, the field name and the list position.
pub(crate) fn h_hash(hash_key: &str, field: Field, index: usize) -> u64 {
    let idx = index.to_string();
    crate::hash::fnv1a64(&[hash_key.as_bytes(), field.name().as_bytes(), idx.as_bytes()])
}

/// `H`, `H(a-b)`, `H/n`, `H(a-b)/n`.
fn h_range(field: Field, expr: &str, hash: u64) -> Result<FieldSet, ParseError> {
    let bad = |why: &str| ParseError::field_err(field, format!("{why}: {expr}"));
    let rest = &expr[1..];
    let (range_part, step_part) = match rest.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (rest, None),
    };
    let (start, end) = if range_part.is_empty() {
        // Day of month defaults to 1-28 so H never picks a day some months lack.
        let max = if field == Field::DayOfMonth {
            28
        } else {
            field.max()
        };
        (field.min(), max)
    } else {
        let inner = range_part
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| bad("expected H, H(a-b), H/n or H(a-b)/n"))?;
        let (a, b) = inner
            .split_once('-')
            .ok_or_else(|| bad("expected a range a-b inside H(...)"))?;
        (parse_int_or_name(field, a)?, parse_int_or_name(field, b)?)
    };
    let step = match step_part {
        Some(s) => must_parse_int(field, s)?,
        None => 1,
    };
    check_bounds(field, start, end, step, expr)?;
    let span = u64::from(end - start + 1);
    let set = match step_part {
        None => {
            // `hash % span` < span <= 64, so it fits.
            let v = start + (hash % span) as u32;
            FieldSet {
                bits: 1u64 << v,
                star: false,
                plain: false,
            }
        }
        Some(_) => {
            let offset = (hash % u64::from(step).min(span)) as u32;
            FieldSet {
                bits: bits(start + offset, end, step),
                star: false,
                plain: false,
            }
        }
    };
    Ok(set)
}

/// robfig `getField` (comma list; empty elements are skipped as `strings.FieldsFunc` does),
/// extended with `H` elements.
pub(crate) fn get_field(
    field: Field,
    text: &str,
    hash_key: &str,
) -> Result<(FieldSet, bool), ParseError> {
    let mut set = FieldSet {
        bits: 0,
        star: false,
        plain: true,
    };
    let mut uses_h = false;
    for (index, expr) in text.split(',').filter(|e| !e.is_empty()).enumerate() {
        let part = if expr.starts_with('H') {
            uses_h = true;
            h_range(field, expr, h_hash(hash_key, field, index))?
        } else {
            get_range(field, expr)?
        };
        set.bits |= part.bits;
        set.star |= part.star;
        set.plain &= part.plain;
    }
    if set.bits == 0 {
        return Err(ParseError::field_err(
            field,
            format!("no values in {field} field: {text}"),
        ));
    }
    Ok((set, uses_h))
}

/// Go's `time.ParseDuration`, in whole nanoseconds, with Go's error texts.
pub(crate) fn parse_go_duration(orig: &str) -> Result<i128, String> {
    let invalid = || format!("time: invalid duration {orig:?}");
    let mut s = orig;
    let mut neg = false;
    if let Some(c) = s.chars().next()
        && (c == '-' || c == '+')
    {
        neg = c == '-';
        s = &s[1..];
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: i128 = 0;
    const LIMIT: i128 = 1 << 63;
    while !s.is_empty() {
        let first = s.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let int_digits = &s[..int_len];
        s = &s[int_len..];
        let mut frac_digits = "";
        if let Some(rest) = s.strip_prefix('.') {
            let frac_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            frac_digits = &rest[..frac_len];
            s = &rest[frac_len..];
            if int_digits.is_empty() && frac_digits.is_empty() {
                return Err(invalid());
            }
        }
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(s.len(), |(i, _)| i);
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        if unit.is_empty() {
            return Err(format!("time: missing unit in duration {orig:?}"));
        }
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("time: unknown unit {unit:?} in duration {orig:?}")),
        };
        let mut v: i128 = 0;
        for d in int_digits.bytes() {
            v = v * 10 + i128::from(d - b'0');
            if v > LIMIT {
                return Err(invalid());
            }
        }
        v *= scale;
        if v > LIMIT {
            return Err(invalid());
        }
        // Fraction: Go keeps digits while they fit in 63 bits, ignores the rest, then rounds
        // down. Past 30 digits (leading zeros) a digit is worth less than 10^-17 ns: ignored
        // too, so the divisor fits in an i128 as 63 bits times the largest unit do.
        let mut f: i128 = 0;
        let mut div: i128 = 1;
        for d in frac_digits.bytes().take(30) {
            let next = f * 10 + i128::from(d - b'0');
            if f > i128::from(i64::MAX) / 10 || next > LIMIT {
                break;
            }
            f = next;
            div *= 10;
        }
        v += f * scale / div;
        total += v;
        if total > LIMIT {
            return Err(invalid());
        }
    }
    if neg {
        return Ok(-total);
    }
    if total > LIMIT - 1 {
        return Err(invalid());
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("90s"), Ok(90_000_000_000));
        assert_eq!(parse_go_duration("1h30m"), Ok(5_400_000_000_000));
        assert_eq!(parse_go_duration("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_go_duration("500ms"), Ok(500_000_000));
        assert_eq!(parse_go_duration(".5s"), Ok(500_000_000));
        assert_eq!(parse_go_duration("-1h"), Ok(-3_600_000_000_000));
        assert_eq!(parse_go_duration("0"), Ok(0));
        assert_eq!(
            parse_go_duration("1"),
            Err("time: missing unit in duration \"1\"".into())
        );
        assert_eq!(
            parse_go_duration("1x"),
            Err("time: unknown unit \"x\" in duration \"1x\"".into())
        );
        assert_eq!(
            parse_go_duration(""),
            Err("time: invalid duration \"\"".into())
        );
        assert_eq!(
            parse_go_duration("."),
            Err("time: invalid duration \".\"".into())
        );
        assert!(parse_go_duration("99999999999h").is_err());
    }

    /// Found by fuzzing: 30 fraction digits times the unit overflowed (a panic in the webhook
    /// and the controller where overflow is checked, a wrong `@every` elsewhere). Go keeps the
    /// digits that fit in 63 bits (here 19) and ignores the rest.
    #[test]
    fn a_long_fraction_keeps_the_digits_that_fit() {
        assert_eq!(
            parse_go_duration("66.3325333013253253330132513212m"),
            Ok(3_979_951_998_079)
        );
        assert_eq!(
            parse_go_duration("1.999999999999999999999999999999h"),
            parse_go_duration("1.9999999999999999999h")
        );
        // Found by fuzzing too: a hundred leading zeros overflowed the divisor.
        let zeros = format!("0.{}773814127ms", "0".repeat(100));
        assert_eq!(parse_go_duration(&zeros), Ok(0));
    }
}
