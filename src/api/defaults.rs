//! Defaulting of a `CronJob`, as the mutating webhook applies it, on the raw JSON object.
//!
//! The defaults are the ones the CRD schema declares (`default:`), so objects look the same
//! whether the API server or the webhook filled them in; a test checks the two agree. The work
//! is done on JSON, never through the typed struct: a newer API server may send fields that
//! k8s-openapi does not know, and a typed round-trip would silently drop them.

use serde_json::Value;

use super::shard::{LABEL_SHARD, bucket, label_value};
use super::{
    ConcurrencyPolicy, DEFAULT_FAILED_JOBS_HISTORY_LIMIT, DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT,
    DEFAULT_SUSPEND,
};

/// One defaulted field: its name under `spec` and its default value.
#[derive(Debug, Clone)]
pub struct FieldDefault {
    /// Property name under `spec`.
    pub field: &'static str,
    /// The value set when the field is absent or null.
    pub value: Value,
}

/// Every field the webhook defaults, all under `spec`.
pub fn spec_defaults() -> Vec<FieldDefault> {
    vec![
        FieldDefault {
            field: "concurrencyPolicy",
            value: Value::from(ConcurrencyPolicy::default().as_str()),
        },
        FieldDefault {
            field: "suspend",
            value: Value::from(DEFAULT_SUSPEND),
        },
        FieldDefault {
            field: "successfulJobsHistoryLimit",
            value: Value::from(DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT),
        },
        FieldDefault {
            field: "failedJobsHistoryLimit",
            value: Value::from(DEFAULT_FAILED_JOBS_HISTORY_LIMIT),
        },
    ]
}

/// The object with every missing default filled in, and its shard label set. Present values
/// (even invalid ones) are kept; a missing or non-object `spec` is left alone (validation
/// reports it).
pub fn apply_defaults(object: &Value) -> Value {
    let mut out = object.clone();
    if let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut) {
        for d in spec_defaults() {
            let slot = spec.entry(d.field).or_insert(Value::Null);
            if slot.is_null() {
                *slot = d.value;
            }
        }
    }
    label_shard(&mut out);
    out
}

/// Set [`LABEL_SHARD`] to the bucket of the object's namespace and name, replacing a missing
/// or wrong value. Left alone when the name is not known yet (`generateName`: the controller
/// labels the object once it exists) or `metadata.labels` is not a map.
fn label_shard(object: &mut Value) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let text = |key: &str| {
        meta.get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let (Some(namespace), Some(name)) = (text("namespace"), text("name")) else {
        return;
    };
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Default::default()));
    if labels.is_null() {
        *labels = Value::Object(Default::default());
    }
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(
            LABEL_SHARD.to_string(),
            Value::from(label_value(bucket(&namespace, &name))),
        );
    }
}

/// The JSON Patch that adds the missing defaults to `object`; empty when nothing is missing.
pub fn default_patch(object: &Value) -> json_patch::Patch {
    json_patch::diff(object, &apply_defaults(object))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn adds_only_missing_fields() {
        let o = json!({"spec": {"schedule": "* * * * *", "suspend": true, "x-new": {"a": 1}}});
        let patch = default_patch(&o);
        let mut patched = o.clone();
        json_patch::patch(&mut patched, &patch).expect("patch applies");
        assert_eq!(
            patched,
            json!({"spec": {
                "schedule": "* * * * *", "suspend": true, "x-new": {"a": 1},
                "concurrencyPolicy": "Allow",
                "successfulJobsHistoryLimit": 3,
                "failedJobsHistoryLimit": 1
            }})
        );
        assert_eq!(patch.0.len(), 3, "{patch:?}");
    }

    #[test]
    fn complete_object_gets_empty_patch() {
        let o = json!({"spec": {
            "concurrencyPolicy": "Forbid", "suspend": false,
            "successfulJobsHistoryLimit": -4, "failedJobsHistoryLimit": 0
        }});
        assert!(default_patch(&o).0.is_empty());
    }

    #[test]
    fn the_shard_label_is_set_or_corrected_once_the_name_is_known() {
        let want = label_value(bucket("team-a", "nightly"));
        let o = json!({"metadata": {"name": "nightly", "namespace": "team-a"}});
        assert_eq!(apply_defaults(&o)["metadata"]["labels"][LABEL_SHARD], want);
        let o = json!({"metadata": {"name": "nightly", "namespace": "team-a",
            "labels": {"app": "x", "batch.kronjob.dev/shard": "wrong"}}});
        let out = apply_defaults(&o);
        assert_eq!(out["metadata"]["labels"][LABEL_SHARD], want);
        assert_eq!(out["metadata"]["labels"]["app"], "x");
        let o = json!({"metadata": {"name": "nightly", "namespace": "team-a", "labels": null}});
        assert_eq!(apply_defaults(&o)["metadata"]["labels"][LABEL_SHARD], want);
        // Not known yet, or labels that are not a map: left for the controller and the API server.
        for o in [
            json!({"metadata": {"generateName": "nightly-", "namespace": "team-a"}}),
            json!({"metadata": {"name": "nightly", "namespace": "team-a", "labels": "x"}}),
        ] {
            assert_eq!(apply_defaults(&o), o);
        }
        // Right already: nothing to patch.
        let o = json!({"metadata": {"name": "nightly", "namespace": "team-a",
            "labels": {"batch.kronjob.dev/shard": want}}});
        assert!(default_patch(&o).0.is_empty());
    }

    #[test]
    fn no_spec_no_patch() {
        assert!(default_patch(&json!({"metadata": {}})).0.is_empty());
        assert!(default_patch(&json!({"spec": "nope"})).0.is_empty());
    }
}
