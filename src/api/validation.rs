//! Validation of a `CronJob` as the admission webhook performs it, on the raw JSON object.
//!
//! [`validate`] reports every failing field at once, as the API server does, in four groups:
//! 1. every rule of [`super::rules::rules`] (the same table the CRD's CEL rules come from);
//! 2. the required field `spec` (one of `spec.schedule` and `spec.schedules`, and one of
//!    `spec.jobTemplate` and `spec.workloadTemplate`, are rules of the table);
//! 3. `spec.concurrencyPolicy` outside its three values;
//! 4. what CEL cannot check: each schedule parses, the time zone exists, a workload's
//!    completion rule is valid CEL and is given exactly for a kind kronjob has no rule for.
//!
//! Pure: no I/O, no clock. Errors render exactly like the API server's `field.Error`.

use std::fmt;

use serde_json::Value;

pub use super::rules::ErrorKind;
use super::rules::{EACH, Rule, Scope, lookup, rules};
use super::{ANNOTATION_BACKFILL, ConcurrencyPolicy, GROUP};
use crate::schedule::{Schedule, time_zone};

/// The admission operation being validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A new object.
    Create,
    /// A change to an existing object (the old object is passed too).
    Update,
}

/// One invalid field, rendered like the API server's `field.Error`:
/// `spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Dotted field path from the object root, e.g. `spec.startingDeadlineSeconds`.
    pub path: String,
    /// The kind of error.
    pub kind: ErrorKind,
    /// The offending value, when the error shows one (`Required` never does).
    pub value: Option<Value>,
    /// The explanation after the value; may be empty.
    pub detail: String,
}

impl FieldError {
    /// A `Required value` error.
    pub fn required(path: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            kind: ErrorKind::Required,
            value: None,
            detail: detail.into(),
        }
    }

    /// An `Invalid value` error showing `value`.
    pub fn invalid(path: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            kind: ErrorKind::Invalid,
            value: Some(value),
            detail: detail.into(),
        }
    }

    /// An `Unsupported value` error listing the supported values.
    pub fn not_supported(path: impl Into<String>, value: Value, supported: &[&str]) -> Self {
        let list = supported
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        FieldError {
            path: path.into(),
            kind: ErrorKind::NotSupported,
            value: Some(value),
            detail: format!("supported values: {list}"),
        }
    }

    /// The reason the API server puts in a `StatusCause` for this kind of error.
    pub fn cause_reason(&self) -> &'static str {
        match self.kind {
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::Invalid => "FieldValueInvalid",
            ErrorKind::Forbidden => "FieldValueForbidden",
            ErrorKind::NotSupported => "FieldValueNotSupported",
        }
    }
}

impl FieldError {
    /// The message without the path, as in a `StatusCause`: `Invalid value: -1: must be ...`.
    pub fn body(&self) -> String {
        let mut out = String::from(match self.kind {
            ErrorKind::Required => "Required value",
            ErrorKind::Invalid => "Invalid value",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::NotSupported => "Unsupported value",
        });
        // Like Go's `ErrorBody`: `Required` and `Forbidden` never show the value; strings are
        // quoted, numbers and booleans are not (JSON rendering gives exactly that).
        if !matches!(self.kind, ErrorKind::Required | ErrorKind::Forbidden)
            && let Some(value) = &self.value
        {
            out.push_str(": ");
            out.push_str(&value.to_string());
        }
        if !self.detail.is_empty() {
            out.push_str(": ");
            out.push_str(&self.detail);
        }
        out
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
    }
}

/// The `GroupKind` the API server names in its messages: `CronJob.batch.kronjob.dev`.
pub fn qualified_kind() -> String {
    format!("CronJob.{GROUP}")
}

/// The whole denial message, as the API server renders `errors.NewInvalid`:
/// `CronJob.batch.kronjob.dev "name" is invalid: [err1, err2]` (no brackets for one error).
pub fn invalid_message(name: &str, errors: &[FieldError]) -> String {
    let mut rendered: Vec<String> = Vec::with_capacity(errors.len());
    for e in errors {
        let s = e.to_string();
        // An aggregate lists each distinct message once.
        if !rendered.contains(&s) {
            rendered.push(s);
        }
    }
    let list = match rendered.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    format!("{} {name:?} is invalid: {list}", qualified_kind())
}

const SPEC: &[&str] = &["spec"];
const SCHEDULE: &[&str] = &["spec", "schedule"];
const SCHEDULES: &[&str] = &["spec", "schedules"];
const EACH_SCHEDULE: &[&str] = &["spec", "schedules", EACH];
const TIME_ZONE: &[&str] = &["spec", "timeZone"];
const CONCURRENCY_POLICY: &[&str] = &["spec", "concurrencyPolicy"];

/// Whether a rule belongs to the time-zone group, which upstream re-checks on update only when
/// the value changed (validation ratcheting).
fn is_zone_rule(rule: &Rule) -> bool {
    rule.at == TIME_ZONE
}

/// Validate a `CronJob` given as raw JSON; `old` is the stored object on update. Returns every
/// failing field (empty when the object is valid), in a stable order: rule table first, then
/// required fields, the concurrency policy, the schedule and the time zone, each a step below.
///
/// Like CEL, a rule runs only when the value at its location exists. Rules with
/// [`Scope::Create`] are skipped on update. On update, the time-zone checks are skipped when
/// `spec.timeZone` is unchanged, as upstream does.
pub fn validate(object: &Value, old: Option<&Value>, op: Operation) -> Vec<FieldError> {
    let zone_unchanged = op == Operation::Update
        && old.is_some_and(|old| lookup(old, TIME_ZONE) == lookup(object, TIME_ZONE));
    let mut errors = Vec::new();
    let zone_rule_failed = table_errors(object, op, zone_unchanged, &mut errors);
    required_errors(object, &mut errors);
    policy_errors(object, &mut errors);
    schedule_errors(object, &mut errors);
    if !zone_unchanged && !zone_rule_failed {
        zone_errors(object, &mut errors);
    }
    errors.extend(days_errors(object, &["spec", "exclusions"]));
    window_errors(object, &mut errors);
    backfill_errors(object, &mut errors);
    workload_errors(object, &mut errors);
    errors
}

/// (i) A workload's completion rule: given for a kind kronjob has no rule for (and only
/// then), each expression valid CEL within its bounds; the workload's spec an object.
fn workload_errors(object: &Value, errors: &mut Vec<FieldError>) {
    let Some(template) = lookup(object, &["spec", "workloadTemplate"]) else {
        return;
    };
    if let Some(spec) = lookup(template, &["spec"])
        && !spec.is_object()
    {
        errors.push(FieldError::invalid(
            "spec.workloadTemplate.spec",
            spec.clone(),
            "must be an object",
        ));
    }
    let text = |key: &str| lookup(template, &[key]).and_then(Value::as_str);
    let (Some(api_version), Some(kind)) = (text("apiVersion"), text("kind")) else {
        return;
    };
    let group = api_version.split_once('/').map_or("", |(group, _)| group);
    let known = crate::workload::kinds::known(group, kind).is_some();
    match lookup(object, &["spec", "completion"]) {
        None if !known => errors.push(FieldError::required(
            "spec.completion",
            format!(
                "kronjob has no rule for {api_version} {kind}: say when a run succeeded and when it failed"
            ),
        )),
        Some(_) if known => errors.push(FieldError {
            path: "spec.completion".into(),
            kind: ErrorKind::Forbidden,
            value: None,
            detail: format!("kronjob knows when a {kind} finished"),
        }),
        None => {}
        Some(completion) => {
            for key in ["succeeded", "failed"] {
                let path = format!("spec.completion.{key}");
                match completion.get(key).and_then(Value::as_str) {
                    None => errors.push(FieldError::required(path, "")),
                    Some(expression) => {
                        if let Err(why) = crate::workload::cel::check(expression) {
                            errors.push(FieldError::invalid(path, expression.into(), why.0));
                        }
                    }
                }
            }
        }
    }
}

/// (f) The dates of a set of days at `at` (a CronJob's `spec.exclusions`, a Calendar's
/// `spec`) are real days: `YYYY-MM-DD` in `dates` and in each range's `from` and `to` (the
/// schema's `format: date`; the rule table checks the rest).
pub fn days_errors(object: &Value, at: &[&str]) -> Vec<FieldError> {
    use crate::schedule::exclusions::parse_date;
    let mut errors = Vec::new();
    let Some(days) = lookup(object, at) else {
        return errors;
    };
    let base = at.join(".");
    let mut check = |path: String, value: &Value| match value.as_str() {
        Some(s) => {
            if let Err(e) = parse_date(s) {
                errors.push(FieldError::invalid(path, value.clone(), e));
            }
        }
        None => errors.push(FieldError::invalid(path, value.clone(), "must be a string")),
    };
    for (i, date) in days
        .get("dates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        check(format!("{base}.dates[{i}]"), date);
    }
    for (i, range) in days
        .get("ranges")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        for end in ["from", "to"] {
            if let Some(value) = range.get(end).filter(|v| !v.is_null()) {
                check(format!("{base}.ranges[{i}].{end}"), value);
            }
        }
    }
    errors
}

/// (g) `notBefore` and `notAfter` are RFC 3339 instants (the schema's `format: date-time`).
fn window_errors(object: &Value, errors: &mut Vec<FieldError>) {
    for key in ["notBefore", "notAfter"] {
        let Some(value) = lookup(object, &["spec", key]) else {
            continue;
        };
        if value
            .as_str()
            .is_none_or(|s| s.parse::<jiff::Timestamp>().is_err())
        {
            errors.push(FieldError::invalid(
                format!("spec.{key}"),
                value.clone(),
                "must be an RFC 3339 time, e.g. 2026-01-01T00:00:00Z",
            ));
        }
    }
}

/// (h) A backfill request (`kubectl kronjob backfill`) reads as one: RFC 3339 `from` and `to`,
/// `to` not before `from`, `parallel` 1 to 10.
fn backfill_errors(object: &Value, errors: &mut Vec<FieldError>) {
    let Some(value) = lookup(object, &["metadata", "annotations", ANNOTATION_BACKFILL]) else {
        return;
    };
    let path = format!("metadata.annotations[{ANNOTATION_BACKFILL}]");
    match value.as_str() {
        None => errors.push(FieldError::invalid(path, value.clone(), "must be a string")),
        Some(text) => {
            if let Err(why) = super::backfill::Request::parse(text) {
                errors.push(FieldError::invalid(path, value.clone(), why));
            }
        }
    }
}

/// (a) The shared rule table; whether a time-zone rule failed.
fn table_errors(
    object: &Value,
    op: Operation,
    zone_unchanged: bool,
    errors: &mut Vec<FieldError>,
) -> bool {
    let mut zone_rule_failed = false;
    for rule in rules() {
        if rule.scope == Scope::Create && op == Operation::Update {
            continue;
        }
        if is_zone_rule(rule) && zone_unchanged {
            continue;
        }
        for (path, at_value) in rule.locations(object) {
            if rule.holds(at_value) {
                continue;
            }
            zone_rule_failed |= is_zone_rule(rule);
            let shown = !matches!(rule.kind, ErrorKind::Required | ErrorKind::Forbidden);
            errors.push(FieldError {
                path,
                kind: rule.kind,
                value: rule.reported_value(at_value).filter(|_| shown).cloned(),
                detail: rule.message.to_string(),
            });
        }
    }
    zone_rule_failed
}

/// (b) Required fields (the CRD schema says so too; the webhook must not rely on it, since
/// mutating webhooks run before schema validation).
fn required_errors(object: &Value, errors: &mut Vec<FieldError>) {
    match lookup(object, SPEC) {
        None => errors.push(FieldError::required("spec", "")),
        Some(spec) if !spec.is_object() => {
            errors.push(FieldError::invalid(
                "spec",
                spec.clone(),
                "must be an object",
            ));
        }
        Some(_) => {}
    }
}

/// (c) The concurrency policy (absent means the default, `Allow`).
fn policy_errors(object: &Value, errors: &mut Vec<FieldError>) {
    let Some(policy) = lookup(object, CONCURRENCY_POLICY) else {
        return;
    };
    let supported = ConcurrencyPolicy::ALL.map(ConcurrencyPolicy::as_str);
    if policy.as_str() == Some("") {
        errors.push(FieldError::required(CONCURRENCY_POLICY.join("."), ""));
    } else if !policy.as_str().is_some_and(|p| supported.contains(&p)) {
        errors.push(FieldError::not_supported(
            CONCURRENCY_POLICY.join("."),
            policy.clone(),
            &supported,
        ));
    }
}

/// (d) What CEL cannot do: parse `spec.schedule` and each of `spec.schedules`.
fn schedule_errors(object: &Value, errors: &mut Vec<FieldError>) {
    let key = hash_key(object);
    if let Some(schedule) = lookup(object, SCHEDULE) {
        expression_errors("spec.schedule", schedule, SCHEDULE, &key, errors);
    }
    let Some(list) = lookup(object, SCHEDULES) else {
        return;
    };
    let Some(items) = list.as_array() else {
        let detail = "must be a list of strings";
        errors.push(FieldError::invalid("spec.schedules", list.clone(), detail));
        return;
    };
    for (i, item) in items.iter().enumerate() {
        let path = format!("spec.schedules[{i}]");
        expression_errors(&path, item, EACH_SCHEDULE, &key, errors);
    }
}

/// One schedule expression at `path` parses (the rule table's checks at `at` come first).
fn expression_errors(
    path: &str,
    value: &Value,
    at: &[&str],
    key: &str,
    errors: &mut Vec<FieldError>,
) {
    match value.as_str() {
        None => errors.push(FieldError::invalid(path, value.clone(), "must be a string")),
        // Empty, over-long and `TZ=` schedules are already reported by the rule table.
        Some(expr) if rule_table_rejects(at, value) || expr.is_empty() => {}
        Some(expr) => {
            if let Err(e) = Schedule::parse(expr, key) {
                errors.push(FieldError::invalid(path, value.clone(), e.to_string()));
            }
        }
    }
}

/// (e) What CEL cannot do either: load the time zone.
fn zone_errors(object: &Value, errors: &mut Vec<FieldError>) {
    let Some(tz) = lookup(object, TIME_ZONE) else {
        return;
    };
    match tz.as_str() {
        None => errors.push(FieldError::invalid(
            "spec.timeZone",
            tz.clone(),
            "must be a string",
        )),
        Some(name) => {
            if let Err(e) = time_zone(Some(name)) {
                errors.push(FieldError::invalid(
                    "spec.timeZone",
                    tz.clone(),
                    e.to_string(),
                ));
            }
        }
    }
}

/// Whether some rule at `at` rejects `value` (so a second message would only repeat it).
fn rule_table_rejects(at: &[&str], value: &Value) -> bool {
    rules()
        .iter()
        .any(|rule| rule.at == at && !rule.holds(value))
}

/// The key `H` hashes: `namespace/name`.
fn hash_key(object: &Value) -> String {
    let part = |key: &str| {
        lookup(object, &["metadata", key])
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    format!("{}/{}", part("namespace"), part("name"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn valid() -> Value {
        json!({
            "apiVersion": "batch.kronjob.dev/v1",
            "kind": "CronJob",
            "metadata": {"name": "hello", "namespace": "default"},
            "spec": {
                "schedule": "*/5 * * * *",
                "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{"name": "c", "image": "busybox"}]
                }}}}
            }
        })
    }

    fn rendered(object: &Value, old: Option<&Value>, op: Operation) -> Vec<String> {
        validate(object, old, op)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn valid_object_has_no_errors() {
        assert!(validate(&valid(), None, Operation::Create).is_empty());
    }

    #[test]
    fn display_matches_the_api_server() {
        let mut o = valid();
        o["spec"]["schedule"] = json!("61 * * * *");
        o["spec"]["startingDeadlineSeconds"] = json!(-1);
        o["spec"]["concurrencyPolicy"] = json!("Sometimes");
        let got = rendered(&o, None, Operation::Create);
        assert!(got.contains(&"spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0".to_string()), "{got:?}");
        assert!(got.contains(&"spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\", \"Enqueue\"".to_string()), "{got:?}");
        assert!(got.contains(&"spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61".to_string()), "{got:?}");
        assert_eq!(got.len(), 3, "{got:?}");
    }

    #[test]
    fn exclusions_calendars_and_the_window_are_refused_with_their_field() {
        let mut o = valid();
        o["spec"]["exclusions"] = json!({
            "dates": ["2026-12-24", "2026-02-30", "26-1-1"],
            "ranges": [{"from": "2026-12-24", "to": "2026-12-23"}, {"from": "2026-13-01", "to": "2027-01-01"}],
            "yearly": ["02-29", "02-30"],
        });
        o["spec"]["calendars"] = json!(["holidays", "Bad_Name"]);
        o["spec"]["notBefore"] = json!("2026-02-01T00:00:00Z");
        o["spec"]["notAfter"] = json!("2026-01-01T00:00:00+01:00");
        let got = rendered(&o, None, Operation::Create);
        #[rustfmt::skip]
        let want = [
            "spec.exclusions.ranges[0].to: Invalid value: \"2026-12-23\": must not be before from",
            "spec.exclusions.yearly[1]: Invalid value: \"02-30\": must be a day MM-DD",
            "spec.calendars[1]: Invalid value: \"Bad_Name\": must be the name of a Calendar (lower case letters, digits, '-' and '.')",
            "spec.notAfter: Invalid value: \"2026-01-01T00:00:00+01:00\": must be after notBefore",
            "spec.exclusions.dates[1]: Invalid value: \"2026-02-30\": must be a real date YYYY-MM-DD",
            "spec.exclusions.dates[2]: Invalid value: \"26-1-1\": must be a date YYYY-MM-DD",
            "spec.exclusions.ranges[1].from: Invalid value: \"2026-13-01\": must be a real date YYYY-MM-DD",
        ];
        assert_eq!(got, want);
        let mut many = valid();
        let dates: Vec<String> = (0..367)
            .map(|i| {
                jiff::civil::date(2026, 1, 1)
                    .checked_add(jiff::Span::new().days(i))
                    .expect("date")
                    .to_string()
            })
            .collect();
        many["spec"]["exclusions"] = json!({"dates": dates});
        many["spec"]["calendars"] = json!((0..17).map(|i| format!("c{i}")).collect::<Vec<_>>());
        many["spec"]["notBefore"] = json!("yesterday");
        let got = rendered(&many, None, Operation::Create);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(
            got[0].starts_with("spec.exclusions.dates: Invalid value"),
            "{got:?}"
        );
        assert!(got[0].ends_with("must have at most 366 items"), "{got:?}");
        assert!(got[1].ends_with("must have at most 16 items"), "{got:?}");
        assert!(
            got[2].starts_with("spec.notBefore: Invalid value: \"yesterday\""),
            "{got:?}"
        );
    }

    #[test]
    fn a_backfill_request_must_read_as_one() {
        let key = ANNOTATION_BACKFILL;
        let cases = [
            (
                r#"{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z","parallel":3}"#,
                None,
            ),
            (
                r#"{"from":"2026-01-02T00:00:00Z","to":"2026-01-01T00:00:00Z"}"#,
                Some("\"to\" 2026-01-01T00:00:00Z is before \"from\" 2026-01-02T00:00:00Z"),
            ),
            (
                r#"{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z","parallel":50}"#,
                Some("\"parallel\" must be 1 to 10, not 50"),
            ),
            (
                r#"{"to":"2026-01-02T00:00:00Z"}"#,
                Some("\"from\" (an RFC 3339 time) is required"),
            ),
        ];
        for (value, want) in cases {
            let mut o = valid();
            o["metadata"]["annotations"] = json!({ key: value });
            let got = rendered(&o, None, Operation::Update);
            match want {
                None => assert!(got.is_empty(), "{value}: {got:?}"),
                Some(why) => assert_eq!(
                    got,
                    [format!(
                        "metadata.annotations[{key}]: Invalid value: {}: {why}",
                        json!(value)
                    )],
                    "{value}"
                ),
            }
        }
    }

    #[test]
    fn missing_fields_are_required() {
        let o = json!({"metadata": {"name": "x"}, "spec": {}});
        let got = rendered(&o, None, Operation::Create);
        assert_eq!(
            got,
            [
                "spec.schedule: Required value: one of schedule and schedules is required",
                "spec.jobTemplate: Required value: one of jobTemplate and workloadTemplate is required"
            ]
        );
        let got = rendered(&json!({"metadata": {"name": "x"}}), None, Operation::Create);
        assert_eq!(got, ["spec: Required value"]);
    }

    #[test]
    fn schedules_are_checked_each_with_its_index_and_against_schedule() {
        let with = |edit: fn(&mut Value)| {
            let mut o = valid();
            edit(&mut o);
            rendered(&o, None, Operation::Create)
        };
        fn list(o: &mut Value, items: Value) {
            o["spec"].as_object_mut().expect("spec").remove("schedule");
            o["spec"]["schedules"] = items;
        }
        type Case = (&'static str, fn(&mut Value), &'static [&'static str]);
        let cases: &[Case] = &[
            (
                "two schedules",
                |o| list(o, json!(["*/2 * * * *", "*/3 * * * *"])),
                &[],
            ),
            (
                "one schedule in a list",
                |o| list(o, json!(["@every 90m"])),
                &[],
            ),
            (
                "both",
                |o| o["spec"]["schedules"] = json!(["0 * * * *"]),
                &["spec.schedules: Forbidden: may not be set together with schedule"],
            ),
            (
                "neither",
                |o| list(o, Value::Null),
                &["spec.schedule: Required value: one of schedule and schedules is required"],
            ),
            (
                "an empty list",
                |o| list(o, json!([])),
                &["spec.schedules: Required value: schedules must not be empty"],
            ),
            (
                "seventeen",
                |o| list(o, json!(vec!["0 * * * *"; 17])),
                &[
                    "spec.schedules: Invalid value: [\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\",\"0 * * * *\"]: must have at most 16 items",
                ],
            ),
            (
                "@every with another",
                |o| list(o, json!(["0 * * * *", "@every 1h"])),
                &[
                    "spec.schedules: Invalid value: [\"0 * * * *\",\"@every 1h\"]: @every cannot be combined with other schedules",
                ],
            ),
            (
                "a bad second entry",
                |o| list(o, json!(["0 * * * *", "61 * * * *"])),
                &[
                    "spec.schedules[1]: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61",
                ],
            ),
            (
                "an empty and a TZ= entry, each once",
                |o| list(o, json!(["", "0 * * * *", "TZ=UTC 0 * * * *"])),
                &[
                    "spec.schedules[0]: Required value: schedule must not be empty",
                    "spec.schedules[2]: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                ],
            ),
            (
                "an entry that is not a string",
                |o| list(o, json!(["0 * * * *", 5])),
                &["spec.schedules[1]: Invalid value: 5: must be a string"],
            ),
            (
                "not a list",
                |o| list(o, json!("0 * * * *")),
                &["spec.schedules: Invalid value: \"0 * * * *\": must be a list of strings"],
            ),
            (
                "a failure policy of 0",
                |o| o["spec"]["failurePolicy"] = json!({"suspendAfterConsecutiveFailures": 0}),
                &[
                    "spec.failurePolicy.suspendAfterConsecutiveFailures: Invalid value: 0: must be greater than or equal to 1",
                ],
            ),
            (
                "a failure policy of 3",
                |o| o["spec"]["failurePolicy"] = json!({"suspendAfterConsecutiveFailures": 3}),
                &[],
            ),
        ];
        for (what, edit, want) in cases {
            assert_eq!(with(*edit), *want, "{what}");
        }
    }

    #[test]
    fn unknown_zone_and_ratcheting() {
        let mut o = valid();
        o["spec"]["timeZone"] = json!("Europe/Pariss");
        assert_eq!(
            rendered(&o, None, Operation::Create),
            ["spec.timeZone: Invalid value: \"Europe/Pariss\": unknown time zone Europe/Pariss"]
        );
        // Unchanged on update: not re-checked.
        assert!(validate(&o, Some(&o), Operation::Update).is_empty());
        // Changed on update: checked.
        let mut old = o.clone();
        old["spec"]["timeZone"] = json!("UTC");
        assert_eq!(validate(&o, Some(&old), Operation::Update).len(), 1);
    }

    #[test]
    fn zone_shape_error_is_not_repeated_by_the_loader() {
        let mut o = valid();
        o["spec"]["timeZone"] = json!("../etc");
        assert_eq!(
            rendered(&o, None, Operation::Create),
            ["spec.timeZone: Invalid value: \"../etc\": unknown time zone"]
        );
    }

    #[test]
    fn name_length_only_on_create() {
        let mut o = valid();
        o["metadata"]["name"] = json!("a".repeat(53));
        let got = rendered(&o, None, Operation::Create);
        assert_eq!(got.len(), 1);
        assert!(
            got[0].starts_with("metadata.name: Invalid value: \"aaa"),
            "{got:?}"
        );
        assert!(got[0].ends_with(": must be no more than 52 characters"));
        assert!(validate(&o, Some(&o), Operation::Update).is_empty());
    }

    #[test]
    fn tz_prefix_reported_once() {
        let mut o = valid();
        o["spec"]["schedule"] = json!("CRON_TZ=UTC * * * * *");
        assert_eq!(
            rendered(&o, None, Operation::Create),
            [
                "spec.schedule: Invalid value: \"CRON_TZ=UTC * * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
            ]
        );
    }

    #[test]
    fn empty_concurrency_policy_is_required() {
        let mut o = valid();
        o["spec"]["concurrencyPolicy"] = json!("");
        assert_eq!(
            rendered(&o, None, Operation::Create),
            ["spec.concurrencyPolicy: Required value"]
        );
    }

    #[test]
    fn aggregate_message() {
        let e1 = FieldError::required("spec.schedule", "");
        let e2 = FieldError::invalid("spec.x", json!(-1), "must be greater than or equal to 0");
        assert_eq!(
            invalid_message("n", std::slice::from_ref(&e1)),
            "CronJob.batch.kronjob.dev \"n\" is invalid: spec.schedule: Required value"
        );
        assert_eq!(
            invalid_message("n", &[e1, e2]),
            "CronJob.batch.kronjob.dev \"n\" is invalid: [spec.schedule: Required value, spec.x: Invalid value: -1: must be greater than or equal to 0]"
        );
    }

    #[test]
    fn a_workloads_completion_rule_is_checked_against_its_kind() {
        let with = |workload: serde_json::Value, completion: Option<serde_json::Value>| {
            let mut o = json!({"metadata": {"name": "x"}, "spec": {"schedule": "* * * * *", "workloadTemplate": workload}});
            if let Some(c) = completion {
                o["spec"]["completion"] = c;
            }
            rendered(&o, None, Operation::Create)
        };
        let jobset =
            json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {}});
        let thing = json!({"apiVersion": "example.com/v1", "kind": "Thing", "spec": {}});
        let rule = json!({"succeeded": "self.status.done", "failed": "has(self.status.error)"});
        assert!(
            with(jobset.clone(), None).is_empty(),
            "a known kind needs no rule"
        );
        assert!(with(thing.clone(), Some(rule.clone())).is_empty());
        assert_eq!(
            with(thing.clone(), None),
            [
                "spec.completion: Required value: kronjob has no rule for example.com/v1 Thing: say when a run succeeded and when it failed"
            ]
        );
        assert_eq!(
            with(jobset, Some(rule)),
            ["spec.completion: Forbidden: kronjob knows when a JobSet finished"]
        );
        let got = with(
            thing.clone(),
            Some(
                json!({"succeeded": "self.status.(", "failed": "self.a.all(x, self.b.all(y, self.c.all(z, true)))"}),
            ),
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got[0].starts_with(
                "spec.completion.succeeded: Invalid value: \"self.status.(\": is not valid CEL"
            ),
            "{got:?}"
        );
        assert!(
            got[1].starts_with("spec.completion.failed: Invalid value: "),
            "{got:?}"
        );
        assert!(got[1].ends_with("may use at most 2 of the list macros all, exists, exists_one, map and filter (uses 3)"), "{got:?}");
        assert_eq!(
            with(
                json!({"apiVersion": "example.com/v1", "kind": "Thing", "spec": [1]}),
                Some(json!({"succeeded": "true", "failed": "false"}))
            ),
            ["spec.workloadTemplate.spec: Invalid value: [1]: must be an object"]
        );
    }
}
