//! The validation rules that both the API server (through the CRD schema) and the admission
//! webhook enforce. They live in one table, returned by [`rules`]: CRD generation turns each entry into a
//! `minimum`, a `maxLength` or an `x-kubernetes-validations` CEL rule at its schema location,
//! and the webhook evaluates the same entry in Rust. A test evaluates the generated CEL with a
//! CEL interpreter on a corpus of objects and requires the same verdicts as the Rust checks.
//!
//! A location may step into every item of a list with [`EACH`]: `spec.schedules[*]` holds for
//! each schedule of the list, and the error names the item (`spec.schedules[1]`), as the API
//! server names it for a rule on the schema's `items`.
//!
//! What CEL cannot say (parsing the cron expression, loading the time zone) is checked by the
//! webhook alone, in [`super::validation`].

use serde_json::Value;

/// When a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// On create and on update.
    Always,
    /// On create only (the webhook skips it on update, as upstream does for the name length).
    Create,
}

/// What a rule checks about the value at its location.
#[derive(Debug, Clone, Copy)]
pub enum Check {
    /// An integer must be at least this.
    Minimum(i64),
    /// An integer must be at most this.
    Maximum(i64),
    /// A string may have at most this many characters.
    MaxLength(u64),
    /// A list may have at most this many items.
    MaxItems(u64),
    /// A CEL expression over `self` (the value at the rule's location), with the equivalent
    /// Rust predicate. The predicate gets the value at the location (never absent: like CEL,
    /// a rule on an absent field does not run).
    Cel {
        /// The CEL source, as it appears in the CRD.
        rule: &'static str,
        /// The Rust predicate: `true` when the value is valid.
        holds: fn(&Value) -> bool,
    },
}

/// The kind of failure, rendered like the API server's `field.Error` types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `Required value`.
    Required,
    /// `Invalid value: <value>`.
    Invalid,
    /// `Forbidden`: the field may not be set (here).
    Forbidden,
    /// `Unsupported value: <value>`.
    NotSupported,
}

/// One validation rule.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Schema location as property names from the object root; `[]` is the root itself.
    pub at: &'static [&'static str],
    /// The field the error is reported on, relative to `at` (empty for `at` itself): by the
    /// webhook, and by the API server through the CEL rule's `fieldPath` (Kubernetes 1.28+).
    pub field: &'static [&'static str],
    /// The check.
    pub check: Check,
    /// The kind of error reported.
    pub kind: ErrorKind,
    /// The message (also the CEL rule's `message`).
    pub message: &'static str,
    /// When the rule applies.
    pub scope: Scope,
}

impl Rule {
    /// The full field path the error is reported on, e.g. `spec.jobTemplate.spec.parallelism`;
    /// `[*]` stands for each item of a list (`spec.schedules[*]`).
    pub fn path(&self) -> String {
        render_path(self.at.iter().chain(self.field.iter()).copied(), None)
    }

    /// Every value the rule applies to in `object`, with the path its error is reported on:
    /// the value at `at` (none when absent or null, as CEL runs no rule on an absent field),
    /// once per item where `at` steps into a list.
    pub fn locations<'a>(&self, object: &'a Value) -> Vec<(String, &'a Value)> {
        let split = self.at.iter().position(|key| *key == EACH);
        let Some(split) = split else {
            return lookup(object, self.at)
                .map(|v| (self.path(), v))
                .into_iter()
                .collect();
        };
        let (list_at, item_at) = (&self.at[..split], &self.at[split + 1..]);
        let Some(items) = lookup(object, list_at).and_then(Value::as_array) else {
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| {
                let value = lookup(item, item_at)?;
                let path = self.at.iter().chain(self.field.iter()).copied();
                Some((render_path(path, Some(i)), value))
            })
            .collect()
    }

    /// Evaluate the rule on the value at its location: `true` when it holds.
    pub fn holds(&self, value: &Value) -> bool {
        match self.check {
            Check::Minimum(min) => value.as_i64().is_none_or(|v| v >= min),
            Check::Maximum(max) => value.as_i64().is_none_or(|v| v <= max),
            Check::MaxLength(max) => value
                .as_str()
                .is_none_or(|s| s.chars().count() as u64 <= max),
            Check::MaxItems(max) => value.as_array().is_none_or(|a| a.len() as u64 <= max),
            Check::Cel { holds, .. } => holds(value),
        }
    }

    /// The value the error reports: the field's own value when it exists.
    pub fn reported_value<'a>(&self, at_value: &'a Value) -> Option<&'a Value> {
        self.field.iter().try_fold(at_value, |v, key| v.get(key))
    }
}

/// The path step meaning "each item of the list": `["spec", "schedules", EACH]`.
pub const EACH: &str = "*";

/// Dotted path of property names; [`EACH`] is rendered as `[index]`, or `[*]` without one.
fn render_path<'a>(keys: impl Iterator<Item = &'a str>, index: Option<usize>) -> String {
    let mut out = String::new();
    for key in keys {
        if key == EACH {
            match index {
                Some(i) => out.push_str(&format!("[{i}]")),
                None => out.push_str("[*]"),
            }
            continue;
        }
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(key);
    }
    out
}

/// Whether the object `v` has the field `key` set (present and not null).
fn has(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(|f| !f.is_null())
}

/// Walk `path` from `root`; `None` when any step is absent or null.
pub fn lookup<'a>(root: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(root, |v, key| v.get(key))
        .filter(|v| !v.is_null())
}

const SPEC: &[&str] = &["spec"];
const SCHEDULE: &[&str] = &["spec", "schedule"];
const SCHEDULES: &[&str] = &["spec", "schedules"];
const EACH_SCHEDULE: &[&str] = &["spec", "schedules", EACH];
const TIME_ZONE: &[&str] = &["spec", "timeZone"];
const POD_SPEC: &[&str] = &["spec", "jobTemplate", "spec", "template", "spec"];

/// Longest accepted `timeZone` (the longest IANA name has 32 characters). It also bounds the
/// cost the API server estimates for the CEL rules on the field.
pub const MAX_TIME_ZONE_LENGTH: u64 = 255;
/// Longest accepted `schedule`; bounds the CEL cost estimate.
pub const MAX_SCHEDULE_LENGTH: u64 = 1024;
/// Most entries of `schedules`; bounds the CEL cost estimate too.
pub const MAX_SCHEDULES: u64 = crate::schedule::MAX_EXPRESSIONS as u64;
/// Longest CronJob name: a Job name (at most 63 characters) adds `-` and 10 digits of minutes.
pub const MAX_NAME_LENGTH: usize = 52;

const GE0: &str = "must be greater than or equal to 0";

fn minimum(at: &'static [&'static str]) -> Rule {
    Rule {
        at,
        field: &[],
        check: Check::Minimum(0),
        kind: ErrorKind::Invalid,
        message: GE0,
        scope: Scope::Always,
    }
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// The checks of one schedule expression, at `at`: `spec.schedule` or each of `spec.schedules`.
fn schedule_rules(at: &'static [&'static str]) -> [Rule; 3] {
    [
        Rule {
            at,
            field: &[],
            check: Check::Cel {
                rule: "size(self) > 0",
                // Not a string: the schema's type check refuses it (the webhook says so).
                holds: |v| v.as_str().is_none_or(|s| !s.is_empty()),
            },
            kind: ErrorKind::Required,
            message: "schedule must not be empty",
            scope: Scope::Always,
        },
        Rule {
            at,
            field: &[],
            check: Check::MaxLength(MAX_SCHEDULE_LENGTH),
            kind: ErrorKind::Invalid,
            message: "must have at most 1024 characters",
            scope: Scope::Always,
        },
        Rule {
            at,
            field: &[],
            check: Check::Cel {
                rule: "!self.contains('TZ=')",
                holds: |v| !str_of(v).contains("TZ="),
            },
            kind: ErrorKind::Invalid,
            message: "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            scope: Scope::Always,
        },
    ]
}

/// Exactly one of `schedule` and `schedules`; a non-empty list of at most 16, `@every` alone.
fn schedules_rules() -> [Rule; 5] {
    [
        Rule {
            at: SPEC,
            field: &["schedule"],
            check: Check::Cel {
                rule: "has(self.schedule) || has(self.schedules)",
                holds: |v| !v.is_object() || has(v, "schedule") || has(v, "schedules"),
            },
            kind: ErrorKind::Required,
            message: "one of schedule and schedules is required",
            scope: Scope::Always,
        },
        Rule {
            at: SPEC,
            field: &["schedules"],
            check: Check::Cel {
                rule: "!has(self.schedule) || !has(self.schedules)",
                holds: |v| !(has(v, "schedule") && has(v, "schedules")),
            },
            kind: ErrorKind::Forbidden,
            message: "may not be set together with schedule",
            scope: Scope::Always,
        },
        Rule {
            at: SCHEDULES,
            field: &[],
            check: Check::Cel {
                rule: "size(self) > 0",
                holds: |v| v.as_array().is_none_or(|a| !a.is_empty()),
            },
            kind: ErrorKind::Required,
            message: "schedules must not be empty",
            scope: Scope::Always,
        },
        Rule {
            at: SCHEDULES,
            field: &[],
            check: Check::MaxItems(MAX_SCHEDULES),
            kind: ErrorKind::Invalid,
            message: "must have at most 16 items",
            scope: Scope::Always,
        },
        Rule {
            at: SCHEDULES,
            field: &[],
            check: Check::Cel {
                rule: "size(self) <= 1 || !self.exists(s, s.startsWith('@every'))",
                holds: |v| {
                    v.as_array().is_none_or(|a| {
                        a.len() <= 1 || !a.iter().any(|s| str_of(s).starts_with("@every"))
                    })
                },
            },
            kind: ErrorKind::Invalid,
            message: "@every cannot be combined with other schedules",
            scope: Scope::Always,
        },
    ]
}

/// Whether `tz` has the shape of an IANA name: `/`-separated parts of 1-14 characters from
/// `A-Za-z0-9._+-`, no part `.` or `..`, no part starting with `-` (upstream's rule).
pub fn time_zone_shape_ok(tz: &str) -> bool {
    tz.split('/').all(|part| {
        (1..=14).contains(&part.len())
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
            && part != "."
            && part != ".."
            && !part.starts_with('-')
    })
}

/// Every rule, in the order errors are reported.
pub fn rules() -> &'static [Rule] {
    &RULES
}

static RULES: std::sync::LazyLock<Vec<Rule>> = std::sync::LazyLock::new(|| {
    let name = Rule {
        at: &[],
        field: &["metadata", "name"],
        check: Check::Cel {
            rule: "size(self.metadata.name) <= 52",
            holds: |v| {
                lookup(v, &["metadata", "name"])
                    .and_then(Value::as_str)
                    .is_none_or(|n| n.chars().count() <= MAX_NAME_LENGTH)
            },
        },
        kind: ErrorKind::Invalid,
        message: "must be no more than 52 characters",
        scope: Scope::Create,
    };
    let mut rules = vec![name];
    rules.extend(schedules_rules());
    rules.extend(schedule_rules(SCHEDULE));
    rules.extend(schedule_rules(EACH_SCHEDULE));
    rules.extend(zone_rules());
    rules.extend(count_and_template_rules());
    rules.extend(workload_rules());
    rules.extend(exclusion_rules(&INLINE));
    rules.extend(reference_and_window_rules());
    rules
});

/// The rules of a Calendar's spec (the CRD schema of `Calendar` enforces them; there is no
/// webhook for Calendars).
pub fn calendar_rules() -> &'static [Rule] {
    &CALENDAR_RULES
}

static CALENDAR_RULES: std::sync::LazyLock<Vec<Rule>> =
    std::sync::LazyLock::new(|| exclusion_rules(&CALENDAR));

/// The locations of a set of days: a CronJob's `spec.exclusions` or a Calendar's `spec`.
struct DaysAt {
    dates: &'static [&'static str],
    each_date: &'static [&'static str],
    ranges: &'static [&'static str],
    each_range: &'static [&'static str],
    each_from: &'static [&'static str],
    each_to: &'static [&'static str],
    yearly: &'static [&'static str],
    each_yearly: &'static [&'static str],
}

const INLINE: DaysAt = DaysAt {
    dates: &["spec", "exclusions", "dates"],
    each_date: &["spec", "exclusions", "dates", EACH],
    ranges: &["spec", "exclusions", "ranges"],
    each_range: &["spec", "exclusions", "ranges", EACH],
    each_from: &["spec", "exclusions", "ranges", EACH, "from"],
    each_to: &["spec", "exclusions", "ranges", EACH, "to"],
    yearly: &["spec", "exclusions", "yearly"],
    each_yearly: &["spec", "exclusions", "yearly", EACH],
};

const CALENDAR: DaysAt = DaysAt {
    dates: &["spec", "dates"],
    each_date: &["spec", "dates", EACH],
    ranges: &["spec", "ranges"],
    each_range: &["spec", "ranges", EACH],
    each_from: &["spec", "ranges", EACH, "from"],
    each_to: &["spec", "ranges", EACH, "to"],
    yearly: &["spec", "yearly"],
    each_yearly: &["spec", "yearly", EACH],
};

/// A yearly `MM-DD` day some year has.
const YEARLY_CEL: &str = "self.matches('^(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$') && !(self in ['02-30', '02-31', '04-31', '06-31', '09-31', '11-31'])";

fn yearly_ok(s: &str) -> bool {
    crate::schedule::exclusions::parse_yearly(s).is_ok()
}

fn max_items(at: &'static [&'static str], max: u64, message: &'static str) -> Rule {
    Rule {
        at,
        field: &[],
        check: Check::MaxItems(max),
        kind: ErrorKind::Invalid,
        message,
        scope: Scope::Always,
    }
}

fn max_length(at: &'static [&'static str], max: u64, message: &'static str) -> Rule {
    Rule {
        at,
        field: &[],
        check: Check::MaxLength(max),
        kind: ErrorKind::Invalid,
        message,
        scope: Scope::Always,
    }
}

/// Days: at most 366 dates, 100 ranges and 100 yearly days, each range ending on or after its
/// start, each yearly day one some year has. That a date is a real `YYYY-MM-DD` day is the
/// schema's `format: date` (and a check of the webhook's own, [`super::validation`]).
fn exclusion_rules(at: &DaysAt) -> Vec<Rule> {
    vec![
        max_items(
            at.dates,
            crate::api::MAX_CALENDAR_DATES,
            "must have at most 366 items",
        ),
        max_length(at.each_date, 10, "must have at most 10 characters"),
        max_items(
            at.ranges,
            crate::api::MAX_CALENDAR_RANGES,
            "must have at most 100 items",
        ),
        max_length(at.each_from, 10, "must have at most 10 characters"),
        max_length(at.each_to, 10, "must have at most 10 characters"),
        Rule {
            at: at.each_range,
            field: &["to"],
            check: Check::Cel {
                rule: "!has(self.from) || !has(self.to) || self.to >= self.from",
                holds: |v| match (
                    v.get("from").and_then(Value::as_str),
                    v.get("to").and_then(Value::as_str),
                ) {
                    (Some(from), Some(to)) => to >= from,
                    _ => true,
                },
            },
            kind: ErrorKind::Invalid,
            message: "must not be before from",
            scope: Scope::Always,
        },
        max_items(
            at.yearly,
            crate::api::MAX_CALENDAR_YEARLY,
            "must have at most 100 items",
        ),
        max_length(at.each_yearly, 5, "must have at most 5 characters"),
        Rule {
            at: at.each_yearly,
            field: &[],
            check: Check::Cel {
                rule: YEARLY_CEL,
                holds: |v| v.as_str().is_none_or(yearly_ok),
            },
            kind: ErrorKind::Invalid,
            message: "must be a day MM-DD",
            scope: Scope::Always,
        },
    ]
}

/// At most 16 Calendar names, each a resource name; `notAfter` after `notBefore`.
fn reference_and_window_rules() -> Vec<Rule> {
    vec![
        max_items(
            &["spec", "calendars"],
            crate::api::MAX_CALENDAR_REFS,
            "must have at most 16 items",
        ),
        max_length(
            &["spec", "calendars", EACH],
            253,
            "must have at most 253 characters",
        ),
        Rule {
            at: &["spec", "calendars", EACH],
            field: &[],
            check: Check::Cel {
                rule: "self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",
                holds: |v| {
                    v.as_str().is_none_or(|s| {
                        let b = s.as_bytes();
                        !b.is_empty()
                            && b.iter().all(|c| {
                                c.is_ascii_lowercase()
                                    || c.is_ascii_digit()
                                    || *c == b'-'
                                    || *c == b'.'
                            })
                            && b[0].is_ascii_alphanumeric()
                            && b[b.len() - 1].is_ascii_alphanumeric()
                    })
                },
            },
            kind: ErrorKind::Invalid,
            message: "must be the name of a Calendar (lower case letters, digits, '-' and '.')",
            scope: Scope::Always,
        },
        Rule {
            at: SPEC,
            field: &["notAfter"],
            check: Check::Cel {
                rule: "!has(self.notBefore) || !has(self.notAfter) || self.notAfter > self.notBefore",
                holds: |v| {
                    let at = |key: &str| {
                        v.get(key)
                            .and_then(Value::as_str)
                            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
                    };
                    match (at("notBefore"), at("notAfter")) {
                        (Some(before), Some(after)) => after > before,
                        _ => true,
                    }
                },
            },
            kind: ErrorKind::Invalid,
            message: "must be after notBefore",
            scope: Scope::Always,
        },
    ]
}

const WORKLOAD: &[&str] = &["spec", "workloadTemplate"];

/// Exactly one of the Job and workload templates; a workload's `apiVersion` and `kind` that
/// name a kind (not a batch/v1 Job, which goes in `jobTemplate`, nor one of kronjob's own);
/// `completion` with a workload only, its expressions bounded (the webhook parses them).
fn workload_rules() -> Vec<Rule> {
    vec![
        Rule {
            at: SPEC,
            field: &["jobTemplate"],
            check: Check::Cel {
                rule: "has(self.jobTemplate) || has(self.workloadTemplate)",
                holds: |v| !v.is_object() || has(v, "jobTemplate") || has(v, "workloadTemplate"),
            },
            kind: ErrorKind::Required,
            message: "one of jobTemplate and workloadTemplate is required",
            scope: Scope::Always,
        },
        Rule {
            at: SPEC,
            field: &["workloadTemplate"],
            check: Check::Cel {
                rule: "!has(self.jobTemplate) || !has(self.workloadTemplate)",
                holds: |v| !(has(v, "jobTemplate") && has(v, "workloadTemplate")),
            },
            kind: ErrorKind::Forbidden,
            message: "may not be set together with jobTemplate",
            scope: Scope::Always,
        },
        Rule {
            at: SPEC,
            field: &["completion"],
            check: Check::Cel {
                rule: "!has(self.completion) || has(self.workloadTemplate)",
                holds: |v| !has(v, "completion") || has(v, "workloadTemplate"),
            },
            kind: ErrorKind::Forbidden,
            message: "may only be set with workloadTemplate",
            scope: Scope::Always,
        },
        max_length(
            &["spec", "workloadTemplate", "apiVersion"],
            MAX_API_VERSION_LENGTH,
            "must have at most 317 characters",
        ),
        Rule {
            at: &["spec", "workloadTemplate", "apiVersion"],
            field: &[],
            check: Check::Cel {
                rule: "self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$')",
                holds: |v| v.as_str().is_none_or(api_version_ok),
            },
            kind: ErrorKind::Invalid,
            message: "must be GROUP/VERSION, e.g. jobset.x-k8s.io/v1alpha2",
            scope: Scope::Always,
        },
        Rule {
            at: WORKLOAD,
            field: &["apiVersion"],
            check: Check::Cel {
                rule: "!self.apiVersion.startsWith('batch.kronjob.dev/')",
                holds: |v| {
                    lookup(v, &["apiVersion"])
                        .and_then(Value::as_str)
                        .is_none_or(|a| !a.starts_with("batch.kronjob.dev/"))
                },
            },
            kind: ErrorKind::Invalid,
            message: "kronjob's own kinds cannot be run by a CronJob",
            scope: Scope::Always,
        },
        Rule {
            at: WORKLOAD,
            field: &["kind"],
            check: Check::Cel {
                rule: "!(self.apiVersion == 'batch/v1' && self.kind == 'Job')",
                holds: |v| {
                    let text = |key: &str| lookup(v, &[key]).and_then(Value::as_str);
                    !(text("apiVersion") == Some("batch/v1") && text("kind") == Some("Job"))
                },
            },
            kind: ErrorKind::Invalid,
            message: "a batch/v1 Job goes in spec.jobTemplate",
            scope: Scope::Always,
        },
        max_length(
            &["spec", "workloadTemplate", "kind"],
            63,
            "must have at most 63 characters",
        ),
        Rule {
            at: &["spec", "workloadTemplate", "kind"],
            field: &[],
            check: Check::Cel {
                rule: "self.matches('^[A-Za-z][A-Za-z0-9]*$')",
                holds: |v| {
                    v.as_str().is_none_or(|k| {
                        k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                            && k.chars().all(|c| c.is_ascii_alphanumeric())
                    })
                },
            },
            kind: ErrorKind::Invalid,
            message: "must be a kind, e.g. JobSet",
            scope: Scope::Always,
        },
        max_length(
            &["spec", "completion", "succeeded"],
            crate::workload::cel::MAX_LENGTH as u64,
            "must have at most 1024 characters",
        ),
        max_length(
            &["spec", "completion", "failed"],
            crate::workload::cel::MAX_LENGTH as u64,
            "must have at most 1024 characters",
        ),
    ]
}

/// Longest `workloadTemplate.apiVersion`: a group of 253 characters, `/`, a version of 63.
pub const MAX_API_VERSION_LENGTH: u64 = 317;

/// Whether `api_version` is `GROUP/VERSION` (or a core `VERSION`): a DNS subdomain, a `/`,
/// and a version such as `v1`, `v1alpha2` or `v2beta1`.
pub fn api_version_ok(api_version: &str) -> bool {
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) => (Some(group), version),
        None => (None, api_version),
    };
    let label = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
    };
    let version_ok = version.strip_prefix('v').is_some_and(|rest| {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (major, tail) = rest.split_at(digits);
        !major.is_empty()
            && (tail.is_empty()
                || ["alpha", "beta"].iter().any(|stage| {
                    tail.strip_prefix(stage)
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                }))
    });
    version_ok && group.is_none_or(|g| g.split('.').all(label))
}

/// The rules of `timeZone` (what CEL can say of a name; the webhook loads it too).
fn zone_rules() -> Vec<Rule> {
    vec![
        Rule {
            at: TIME_ZONE,
            field: &[],
            check: Check::MaxLength(MAX_TIME_ZONE_LENGTH),
            kind: ErrorKind::Invalid,
            message: "must have at most 255 characters",
            scope: Scope::Always,
        },
        Rule {
            at: TIME_ZONE,
            field: &[],
            check: Check::Cel {
                rule: "size(self) > 0",
                holds: |v| !str_of(v).is_empty(),
            },
            kind: ErrorKind::Invalid,
            message: "timeZone must be nil or non-empty string",
            scope: Scope::Always,
        },
        Rule {
            at: TIME_ZONE,
            field: &[],
            check: Check::Cel {
                rule: "self.lowerAscii() != 'local'",
                holds: |v| !str_of(v).eq_ignore_ascii_case("local"),
            },
            kind: ErrorKind::Invalid,
            message: "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
            scope: Scope::Always,
        },
        Rule {
            at: TIME_ZONE,
            field: &[],
            check: Check::Cel {
                rule: "size(self) == 0 || (self.matches('^[A-Za-z0-9._+-]{1,14}(/[A-Za-z0-9._+-]{1,14})*$') && !self.matches('(^|/)[.][.]?(/|$)') && !self.matches('(^|/)-'))",
                holds: |v| {
                    let tz = str_of(v);
                    tz.is_empty() || time_zone_shape_ok(tz)
                },
            },
            kind: ErrorKind::Invalid,
            message: "unknown time zone",
            scope: Scope::Always,
        },
    ]
}

/// The counts (non-negative, the failure policy at least 1) and the Job template.
fn count_and_template_rules() -> Vec<Rule> {
    vec![
        minimum(&["spec", "startingDeadlineSeconds"]),
        minimum(&["spec", "successfulJobsHistoryLimit"]),
        minimum(&["spec", "failedJobsHistoryLimit"]),
        Rule {
            at: &["spec", "jobTemplate", "spec", "selector"],
            field: &[],
            check: Check::Cel {
                rule: "false",
                holds: |_| false,
            },
            kind: ErrorKind::Invalid,
            message: "`selector` will be auto-generated",
            scope: Scope::Always,
        },
        Rule {
            at: &["spec", "jobTemplate", "spec", "manualSelector"],
            field: &[],
            check: Check::Cel {
                rule: "!self",
                holds: |v| v.as_bool() != Some(true),
            },
            kind: ErrorKind::NotSupported,
            message: "supported values: \"nil\", \"false\"",
            scope: Scope::Always,
        },
        minimum(&["spec", "jobTemplate", "spec", "parallelism"]),
        minimum(&["spec", "jobTemplate", "spec", "completions"]),
        minimum(&["spec", "jobTemplate", "spec", "activeDeadlineSeconds"]),
        minimum(&["spec", "jobTemplate", "spec", "backoffLimit"]),
        minimum(&["spec", "jobTemplate", "spec", "ttlSecondsAfterFinished"]),
        Rule {
            at: POD_SPEC,
            field: &["restartPolicy"],
            check: Check::Cel {
                rule: "has(self.restartPolicy) && (self.restartPolicy == 'OnFailure' || self.restartPolicy == 'Never')",
                holds: |v| {
                    matches!(
                        lookup(v, &["restartPolicy"]).and_then(Value::as_str),
                        Some("OnFailure" | "Never")
                    )
                },
            },
            kind: ErrorKind::Required,
            message: "valid values: \"OnFailure\", \"Never\"",
            scope: Scope::Always,
        },
        Rule {
            at: &["spec", "failurePolicy", "suspendAfterConsecutiveFailures"],
            field: &[],
            check: Check::Minimum(1),
            kind: ErrorKind::Invalid,
            message: "must be greater than or equal to 1",
            scope: Scope::Always,
        },
        Rule {
            at: &["spec", "queue", "maxQueued"],
            field: &[],
            check: Check::Minimum(1),
            kind: ErrorKind::Invalid,
            message: "must be greater than or equal to 1",
            scope: Scope::Always,
        },
        Rule {
            at: &["spec", "queue", "maxQueued"],
            field: &[],
            check: Check::Maximum(crate::api::MAX_QUEUED_LIMIT as i64),
            kind: ErrorKind::Invalid,
            message: "must be less than or equal to 100",
            scope: Scope::Always,
        },
        Rule {
            at: &["spec"],
            field: &["queue"],
            check: Check::Cel {
                rule: "!has(self.queue) || (has(self.concurrencyPolicy) && self.concurrencyPolicy == 'Enqueue')",
                holds: |v| {
                    v.get("queue").is_none_or(Value::is_null)
                        || lookup(v, &["concurrencyPolicy"]).and_then(Value::as_str)
                            == Some("Enqueue")
                },
            },
            kind: ErrorKind::Forbidden,
            message: "may only be set with concurrencyPolicy: Enqueue",
            scope: Scope::Always,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn time_zone_shape_follows_upstream() {
        for ok in [
            "UTC",
            "America/New_York",
            "Etc/GMT+5",
            "America/Argentina/Salta",
        ] {
            assert!(time_zone_shape_ok(ok), "{ok}");
        }
        for bad in [
            "",
            "a//b",
            "../etc",
            "./x",
            "-x/y",
            "Europe/ThisIsFarTooLong",
            "a b",
            "x/",
        ] {
            assert!(!time_zone_shape_ok(bad), "{bad}");
        }
    }

    #[test]
    fn paths_name_the_field() {
        let paths: Vec<String> = rules().iter().map(Rule::path).collect();
        assert!(paths.contains(&"metadata.name".to_string()));
        assert!(paths.contains(&"spec.jobTemplate.spec.template.spec.restartPolicy".to_string()));
        assert!(paths.contains(&"spec.jobTemplate.spec.ttlSecondsAfterFinished".to_string()));
    }

    #[test]
    fn minimum_ignores_absent_and_rejects_negative() {
        let rule = minimum(&["spec", "startingDeadlineSeconds"]);
        assert!(rule.holds(&json!(0)));
        assert!(rule.holds(&json!(10)));
        assert!(!rule.holds(&json!(-1)));
    }
}
