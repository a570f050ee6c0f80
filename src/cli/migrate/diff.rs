//! Where two specs differ, field by field: the structured difference between the batch/v1
//! CronJob and the kronjob CronJob, as paths with both values. Pure.
//!
//! Both sides are read as a kronjob spec first ([`comparable`]): the same types (so a field
//! neither can hold is no difference), the `TZ=` prefix moved to `spec.timeZone` as a
//! migration moves it ([`move_zone_prefix`], which the plan uses too), the defaults both APIs
//! fill in, and without `spec.suspend` (which a migration and a revert set on purpose). Null,
//! `{}` and `[]` count as absent.

use serde_json::Value;

use crate::api::CronJobSpec;
use crate::api::defaults::apply_defaults;

/// One field whose value differs: `left` and `right` are `None` where it is absent.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// `spec.jobTemplate.spec.template.spec.containers[0].image`.
    pub path: String,
    /// Its value on the left.
    pub left: Option<Value>,
    /// Its value on the right.
    pub right: Option<Value>,
}

/// Longest rendering of a value in a message; longer ones end with `…`.
const SHOWN: usize = 120;

impl Difference {
    /// The same difference with the sides swapped.
    pub fn swapped(&self) -> Difference {
        Difference {
            path: self.path.clone(),
            left: self.right.clone(),
            right: self.left.clone(),
        }
    }

    /// `spec.schedule is "H * * * *" in LEFT and "0 * * * *" in RIGHT`, with `left` and
    /// `right` naming the two objects.
    pub fn describe(&self, left: &str, right: &str) -> String {
        let path = &self.path;
        match (&self.left, &self.right) {
            (Some(l), Some(r)) => {
                format!("{path} is {} in {left} and {} in {right}", show(l), show(r))
            }
            (Some(l), None) => format!("{path} is {} in {left} and not set in {right}", show(l)),
            (None, Some(r)) => format!("{path} is not set in {left} and is {} in {right}", show(r)),
            (None, None) => format!("{path} is not set in either"),
        }
    }
}

/// A value as compact JSON, cut at [`SHOWN`] characters.
fn show(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The spec `spec` (JSON, of either API) as the two are compared: read as a kronjob spec, the
/// zone prefix moved, defaults filled in, `suspend` left out. `None` when it does not read.
pub fn comparable(spec: &Value) -> Option<Value> {
    let mut typed: CronJobSpec = serde_json::from_value(spec.clone()).ok()?;
    move_zone_prefix(&mut typed).ok()?;
    typed.suspend = None;
    let object = serde_json::json!({ "spec": typed });
    let mut defaulted = apply_defaults(&object);
    let spec = defaulted.get_mut("spec")?.as_object_mut()?;
    spec.remove("suspend");
    Some(Value::Object(spec.clone()))
}

/// Every field where `left` and `right` differ, under `path`, in the order of their keys
/// (objects) and indexes (arrays).
pub fn differences(left: &Value, right: &Value, path: &str) -> Vec<Difference> {
    let mut out = Vec::new();
    walk(present(left), present(right), path, &mut out);
    out
}

fn walk(left: Option<&Value>, right: Option<&Value>, path: &str, out: &mut Vec<Difference>) {
    match (left, right) {
        (None, None) => {}
        (Some(Value::Object(l)), Some(Value::Object(r))) => {
            let mut keys: Vec<&String> = l.keys().chain(r.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let at = format!("{path}.{key}");
                walk(present_in(l.get(key)), present_in(r.get(key)), &at, out);
            }
        }
        (Some(Value::Array(l)), Some(Value::Array(r))) => {
            for i in 0..l.len().max(r.len()) {
                let at = format!("{path}[{i}]");
                walk(present_in(l.get(i)), present_in(r.get(i)), &at, out);
            }
        }
        (l, r) if l == r => {}
        (l, r) => out.push(Difference {
            path: path.to_string(),
            left: l.cloned(),
            right: r.cloned(),
        }),
    }
}

fn present_in(value: Option<&Value>) -> Option<&Value> {
    value.and_then(present)
}

/// `value`, unless it carries nothing (null, `{}`, `[]`).
fn present(value: &Value) -> Option<&Value> {
    match value {
        Value::Null => None,
        Value::Object(o) if o.is_empty() => None,
        Value::Array(a) if a.is_empty() => None,
        other => Some(other),
    }
}

/// A grandfathered `TZ=zone ` or `CRON_TZ=zone ` prefix moves to `spec.timeZone`; refused when
/// `timeZone` is set too.
pub fn move_zone_prefix(spec: &mut CronJobSpec) -> Result<Option<String>, String> {
    let Some(original) = spec.schedule.clone() else {
        return Ok(None);
    };
    let schedule = original.trim_start();
    let Some(rest) = schedule
        .strip_prefix("CRON_TZ=")
        .or_else(|| schedule.strip_prefix("TZ="))
    else {
        return Ok(None);
    };
    let (zone, expr) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let expr = expr.trim();
    if let Some(set) = &spec.time_zone {
        return Err(format!(
            "spec.schedule {original:?} carries a time zone prefix and spec.timeZone is {set:?} too: remove one of them first"
        ));
    }
    let change = format!(
        "spec.schedule {original:?} becomes {expr:?} with spec.timeZone {zone:?} (kronjob refuses TZ= prefixes)"
    );
    spec.time_zone = Some(zone.to_string());
    spec.schedule = Some(expr.to_string());
    Ok(Some(change))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(schedule: &str) -> Value {
        json!({
            "schedule": schedule, "concurrencyPolicy": "Allow", "suspend": false,
            "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure",
                "containers": [{"name": "c", "image": "busybox"}]
            }}}}
        })
    }

    fn described(left: &Value, right: &Value) -> Vec<String> {
        let (l, r) = (
            comparable(left).expect("reads"),
            comparable(right).expect("reads"),
        );
        differences(&l, &r, "spec")
            .iter()
            .map(|d| d.describe("L", "R"))
            .collect()
    }

    #[test]
    fn every_field_that_differs_is_named_with_both_values() {
        const CONTAINERS: &str = "/jobTemplate/spec/template/spec/containers";
        let base = spec("0 * * * *");
        type Edit = fn(&mut Value);
        let cases: Vec<(&str, Edit, Vec<&str>)> = vec![
            ("nothing", |_| {}, vec![]),
            (
                "suspend is not a difference",
                |s| s["suspend"] = json!(true),
                vec![],
            ),
            (
                "absent and default are the same",
                |s| {
                    let spec = s.as_object_mut().expect("object");
                    spec.remove("concurrencyPolicy");
                    spec.remove("successfulJobsHistoryLimit");
                },
                vec![],
            ),
            (
                "schedule and zone",
                |s| {
                    s["schedule"] = json!("H * * * *");
                    s["timeZone"] = json!("Europe/Berlin");
                },
                vec![
                    r#"spec.schedule is "H * * * *" in L and "0 * * * *" in R"#,
                    r#"spec.timeZone is "Europe/Berlin" in L and not set in R"#,
                ],
            ),
            (
                "a TZ= prefix is the zone it names",
                |s| {
                    s["schedule"] = json!("TZ=Europe/Berlin 0 * * * *");
                },
                vec![r#"spec.timeZone is "Europe/Berlin" in L and not set in R"#],
            ),
            (
                "deep in the template",
                |s| {
                    let c = s.pointer_mut(CONTAINERS).expect("containers");
                    c[0]["image"] = json!("alpine");
                    c[0]["env"] = json!([{"name": "A", "value": "1"}]);
                },
                vec![
                    r#"spec.jobTemplate.spec.template.spec.containers[0].env is [{"name":"A","value":"1"}] in L and not set in R"#,
                    r#"spec.jobTemplate.spec.template.spec.containers[0].image is "alpine" in L and "busybox" in R"#,
                ],
            ),
            (
                "an element more",
                |s| {
                    let c = s.pointer_mut(CONTAINERS).expect("containers");
                    c.as_array_mut()
                        .expect("array")
                        .push(json!({"name": "d", "image": "x"}));
                },
                vec![
                    r#"spec.jobTemplate.spec.template.spec.containers[1] is {"image":"x","name":"d"} in L and not set in R"#,
                ],
            ),
            (
                "policies, limits and fields set on one side only",
                |s| {
                    s["concurrencyPolicy"] = json!("Forbid");
                    s["failedJobsHistoryLimit"] = json!(0);
                    s["startingDeadlineSeconds"] = json!(30);
                    s["jobTemplate"]["spec"]["backoffLimit"] = json!(2);
                },
                vec![
                    r#"spec.concurrencyPolicy is "Forbid" in L and "Allow" in R"#,
                    "spec.failedJobsHistoryLimit is 0 in L and 1 in R",
                    "spec.jobTemplate.spec.backoffLimit is 2 in L and not set in R",
                    "spec.startingDeadlineSeconds is 30 in L and not set in R",
                ],
            ),
            (
                "empty is absent",
                |s| {
                    let c = s.pointer_mut(CONTAINERS).expect("containers");
                    c[0]["env"] = json!([]);
                    c[0]["resources"] = json!({});
                },
                vec![],
            ),
        ];
        for (what, edit, want) in cases {
            let mut left = base.clone();
            edit(&mut left);
            assert_eq!(described(&left, &base), want, "{what}");
            // And the other way round: the same differences, the sides swapped.
            let (l, r) = (
                comparable(&left).expect("reads"),
                comparable(&base).expect("reads"),
            );
            let swapped: Vec<Difference> = differences(&l, &r, "spec")
                .iter()
                .map(Difference::swapped)
                .collect();
            assert_eq!(swapped, differences(&r, &l, "spec"), "{what}");
        }
    }

    #[test]
    fn long_values_are_cut_and_unreadable_specs_compare_as_nothing() {
        let mut left = spec("0 * * * *");
        left["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"] =
            json!(["x".repeat(500)]);
        let lines = described(&left, &spec("0 * * * *"));
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains('…') && lines[0].len() < 300,
            "{}",
            lines[0]
        );
        assert_eq!(comparable(&json!({"schedule": 5})), None);
        assert_eq!(comparable(&json!("not a spec")), None);
    }
}
