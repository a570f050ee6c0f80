//! A CronJob's own completion rule (`spec.completion`): two CEL expressions over `self`, the
//! workload as kronjob keeps it (`apiVersion`, `kind`, `metadata` and `status`). `failed` is
//! asked first, then `succeeded`; neither true means still running. An expression that reads a
//! field the object lacks, or does not give a boolean, says "not yet". Pure.
//!
//! The cost of an evaluation is bounded by the expression: at most [`MAX_LENGTH`] characters and
//! [`MAX_COMPREHENSIONS`] list macros (`all`, `exists`, `exists_one`, `map`, `filter`), so a
//! rule cannot iterate the object's lists more than twice over, whatever its author writes.

use std::panic::{AssertUnwindSafe, catch_unwind};

use cel::{Context, Program, Value as CelValue};
use serde_json::Value;

use super::read::Outcome;

/// The longest expression accepted, in characters.
pub const MAX_LENGTH: usize = 1024;
/// The most list macros an expression may use.
pub const MAX_COMPREHENSIONS: usize = 2;
const COMPREHENSIONS: [&str; 5] = ["all", "exists", "exists_one", "map", "filter"];

/// A compiled `spec.completion`.
pub struct Completion {
    succeeded: Program,
    failed: Program,
    source: (String, String),
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion")
            .field("succeeded", &self.source.0)
            .field("failed", &self.source.1)
            .finish()
    }
}

impl PartialEq for Completion {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

/// Why an expression is refused: what is wrong with it, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Check one expression: at most [`MAX_LENGTH`] characters and [`MAX_COMPREHENSIONS`] list
/// macros, and valid CEL.
pub fn check(expression: &str) -> Result<(), Refused> {
    compile(expression).map(|_| ())
}

fn compile(expression: &str) -> Result<Program, Refused> {
    let length = expression.chars().count();
    if length > MAX_LENGTH {
        return Err(Refused(format!(
            "must have at most {MAX_LENGTH} characters (has {length})"
        )));
    }
    if expression.trim().is_empty() {
        return Err(Refused("must not be empty".into()));
    }
    let macros = comprehensions(expression);
    if macros > MAX_COMPREHENSIONS {
        return Err(Refused(format!(
            "may use at most {MAX_COMPREHENSIONS} of the list macros all, exists, exists_one, map and filter (uses {macros})"
        )));
    }
    // The parser is not ours: whatever it does with odd input, a refusal is the answer.
    match catch_unwind(|| Program::compile(expression)) {
        Ok(Ok(program)) => Ok(program),
        Ok(Err(e)) => Err(Refused(format!("is not valid CEL: {e}"))),
        Err(_) => Err(Refused("is not valid CEL".into())),
    }
}

/// How many list macros `expression` calls (`.name(` with any spaces between).
fn comprehensions(expression: &str) -> usize {
    let mut count = 0;
    let mut rest = expression;
    while let Some(dot) = rest.find('.') {
        rest = &rest[dot + 1..];
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let after = rest.trim_start()[name.len()..].trim_start();
        if COMPREHENSIONS.contains(&name.as_str()) && after.starts_with('(') {
            count += 1;
        }
    }
    count
}

impl Completion {
    /// Compile `succeeded` and `failed`; the refusal names which one is wrong.
    pub fn compile(succeeded: &str, failed: &str) -> Result<Self, (&'static str, Refused)> {
        Ok(Completion {
            succeeded: compile(succeeded).map_err(|e| ("succeeded", e))?,
            failed: compile(failed).map_err(|e| ("failed", e))?,
            source: (succeeded.to_string(), failed.to_string()),
        })
    }

    /// The expressions, as written.
    pub fn source(&self) -> (&str, &str) {
        (&self.source.0, &self.source.1)
    }

    /// How `object` ended, if it did: `failed` true is a failure, else `succeeded` true a
    /// success.
    pub fn outcome(&self, object: &Value) -> Option<Outcome> {
        let Ok(this) = cel::to_value(object) else {
            return None;
        };
        if holds(&self.failed, &this) {
            Some(Outcome::Failed)
        } else if holds(&self.succeeded, &this) {
            Some(Outcome::Complete)
        } else {
            None
        }
    }
}

/// Whether `program` gives `true` for `self` = `this`; anything else (false, an error such as
/// a missing field, a value that is not a boolean) is not.
fn holds(program: &Program, this: &CelValue) -> bool {
    let mut context = Context::default();
    context.add_variable_from_value("self", this.clone());
    let result = catch_unwind(AssertUnwindSafe(|| program.execute(&context)));
    matches!(result, Ok(Ok(CelValue::Bool(true))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outcome(succeeded: &str, failed: &str, object: Value) -> Option<Outcome> {
        Completion::compile(succeeded, failed)
            .expect("valid rules")
            .outcome(&object)
    }

    #[test]
    fn a_rule_table() {
        let done = "self.status.phase == 'Done'";
        let broke = "self.status.phase == 'Broken'";
        let cases: Vec<(&str, Value, Option<Outcome>)> = vec![
            (
                "succeeded",
                json!({"status": {"phase": "Done"}}),
                Some(Outcome::Complete),
            ),
            (
                "failed",
                json!({"status": {"phase": "Broken"}}),
                Some(Outcome::Failed),
            ),
            ("running", json!({"status": {"phase": "Running"}}), None),
            ("no status yet: not yet, no error", json!({}), None),
            ("a status without the field", json!({"status": {}}), None),
            (
                "the field of another type",
                json!({"status": {"phase": 3}}),
                None,
            ),
        ];
        for (name, object, want) in cases {
            assert_eq!(outcome(done, broke, object), want, "{name}");
        }
    }

    #[test]
    fn failed_is_asked_first_and_only_true_counts() {
        let object = json!({"status": {"done": true, "ok": false}});
        assert_eq!(
            outcome(
                "self.status.done",
                "self.status.done && !self.status.ok",
                object.clone()
            ),
            Some(Outcome::Failed)
        );
        assert_eq!(outcome("'yes'", "1", object.clone()), None, "not booleans");
        assert_eq!(
            outcome(
                "has(self.status.done) && self.status.done",
                "has(self.status.error)",
                object
            ),
            Some(Outcome::Complete)
        );
    }

    #[test]
    fn conditions_can_be_read_with_list_macros() {
        let object = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "Finished", "status": "True", "reason": "Succeeded"}
        ]}});
        let finished = |reason: &str| {
            format!(
                "self.status.conditions.exists(c, c.type == 'Finished' && c.status == 'True' && c.reason == '{reason}')"
            )
        };
        assert_eq!(
            outcome(&finished("Succeeded"), &finished("Failed"), object),
            Some(Outcome::Complete)
        );
    }

    #[test]
    fn refusals_say_what_is_wrong() {
        let long = "true || ".repeat(200) + "true";
        let nested = "self.a.all(x, self.b.exists(y, self.c.map(z, z).size() > 0))";
        let cases = [
            ("self.status.phase ==", "is not valid CEL"),
            ("", "must not be empty"),
            (long.as_str(), "at most 1024 characters"),
            (nested, "at most 2 of the list macros"),
        ];
        for (expression, want) in cases {
            let refused = check(expression).expect_err(expression);
            assert!(refused.0.contains(want), "{expression}: {refused}");
        }
        assert_eq!(comprehensions("self.a . exists (x, x)"), 1);
        assert_eq!(comprehensions("self.mapping.size() > 0"), 0);
        assert!(check("self.a.all(x, self.b.exists(y, y == x))").is_ok());
        let (which, _) = Completion::compile("true", "(").expect_err("failed is invalid");
        assert_eq!(which, "failed");
    }
}
