//! Generation of the `CustomResourceDefinition` from the Rust types, the rule table and the
//! size budget that plain `kubectl apply` imposes.
//!
//! Two edits are made to the derived CRD, on its structured form (never on text):
//! - descriptions are removed inside the embedded Kubernetes types (`spec.jobTemplate`,
//!   `status.active`, `status.conditions`), as kubebuilder's `maxDescLen=0` does, so the CRD fits
//!   in the 262,144-byte `last-applied-configuration` annotation; our own fields keep theirs;
//! - every rule of [`super::rules`] is attached at its schema location.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;
use serde_json::{Map, Value, json};

use super::CronJob;
use super::rules::{Check, EACH, ErrorKind, Rule, rules};

/// File name of the generated CRD under `crd/`.
pub const CRD_FILE: &str = "cronjobs.batch.kronjob.dev.yaml";
/// File name of the generated Calendar CRD under `crd/`.
pub const CALENDAR_CRD_FILE: &str = "calendars.batch.kronjob.dev.yaml";

/// Subtrees whose descriptions come from k8s-openapi and are dropped.
const EMBEDDED: &[&[&str]] = &[
    &["spec", "jobTemplate"],
    &["status", "active"],
    &["status", "conditions"],
];

/// Why the CRD could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The derived CRD has no schema (the derive always generates one).
    #[error("the derived CRD has no openAPIV3Schema")]
    MissingSchema,
    /// A rule names a location that the schema does not have.
    #[error("rule location {0} does not exist in the schema")]
    UnknownLocation(String),
    /// The schema did not round-trip through JSON.
    #[error("schema conversion failed")]
    Json(#[source] serde_json::Error),
    /// YAML serialisation failed.
    #[error("YAML serialisation failed: {0}")]
    Yaml(String),
}

/// The CRD as installed: derived, descriptions trimmed, rules attached.
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    edit_schema(CronJob::crd(), |schema| {
        for path in EMBEDDED {
            let node = schema_node(schema, path)
                .ok_or_else(|| CrdError::UnknownLocation(path.join(".")))?;
            // The field's own description is ours; everything inside comes from k8s-openapi.
            if let Value::Object(map) = node {
                map.iter_mut()
                    .filter(|(key, _)| key.as_str() != "description")
                    .for_each(|(_, child)| strip_descriptions(child));
            }
        }
        forbid_ephemeral_containers(schema)?;
        declare_metadata_name(schema)?;
        rules().iter().try_for_each(|rule| attach(schema, rule))
    })
}

/// The Calendar CRD as installed: derived, the rules of [`super::rules::calendar_rules`]
/// attached.
pub fn calendar_crd() -> Result<CustomResourceDefinition, CrdError> {
    edit_schema(super::Calendar::crd(), |schema| {
        super::rules::calendar_rules()
            .iter()
            .try_for_each(|rule| attach(schema, rule))
    })
}

/// `crd` with the schema of its one version changed by `edit`, as JSON.
fn edit_schema(
    mut crd: CustomResourceDefinition,
    edit: impl FnOnce(&mut Value) -> Result<(), CrdError>,
) -> Result<CustomResourceDefinition, CrdError> {
    let version = crd
        .spec
        .versions
        .first_mut()
        .ok_or(CrdError::MissingSchema)?;
    let validation = version.schema.as_mut().ok_or(CrdError::MissingSchema)?;
    let props = validation
        .open_api_v3_schema
        .take()
        .ok_or(CrdError::MissingSchema)?;
    let mut schema = serde_json::to_value(props).map_err(CrdError::Json)?;
    edit(&mut schema)?;
    let props: JSONSchemaProps = serde_json::from_value(schema).map_err(CrdError::Json)?;
    validation.open_api_v3_schema = Some(props);
    Ok(crd)
}

/// The Calendar CRD as the YAML document committed under `crd/`.
pub fn calendar_crd_yaml() -> Result<String, CrdError> {
    let crd = serde_json::to_value(calendar_crd()?).map_err(CrdError::Json)?;
    serde_saphyr::to_string(&Styled {
        value: &crd,
        depth: 0,
    })
    .map_err(|e| CrdError::Yaml(e.to_string()))
}

/// The CRD as the YAML document committed under `crd/`.
///
/// Nodes nested deeper than [`FLOW_DEPTH`] (the schemas of the embedded pod template's fields)
/// are written in flow style, one line each: block style would spend three quarters of the
/// file on indentation.
pub fn crd_yaml() -> Result<String, CrdError> {
    let crd = serde_json::to_value(crd()?).map_err(CrdError::Json)?;
    serde_saphyr::to_string(&Styled {
        value: &crd,
        depth: 0,
    })
    .map_err(|e| CrdError::Yaml(e.to_string()))
}

/// Depth (in YAML nodes from the document root) from which mappings are written in flow style.
pub const FLOW_DEPTH: usize = 20;

struct Styled<'a> {
    value: &'a Value,
    depth: usize,
}

impl serde::Serialize for Styled<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.value {
            Value::Object(map) if self.depth >= FLOW_DEPTH => {
                serde_saphyr::FlowMap(map).serialize(serializer)
            }
            Value::Object(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, value) in map {
                    out.serialize_entry(
                        key,
                        &Styled {
                            value,
                            depth: self.depth + 1,
                        },
                    )?;
                }
                out.end()
            }
            Value::Array(items) => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for value in items {
                    out.serialize_element(&Styled {
                        value,
                        depth: self.depth + 1,
                    })?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// Pod templates may not carry ephemeral containers (the API server rejects them in any pod
/// template). The field keeps a schema that says so instead of a copy of the container schema.
fn forbid_ephemeral_containers(schema: &mut Value) -> Result<(), CrdError> {
    const PATH: &[&str] = &[
        "spec",
        "jobTemplate",
        "spec",
        "template",
        "spec",
        "ephemeralContainers",
    ];
    let node =
        schema_node(schema, PATH).ok_or_else(|| CrdError::UnknownLocation(PATH.join(".")))?;
    *node = json!({
        "type": "array",
        "maxItems": 0,
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    });
    Ok(())
}

/// `metadata.name` declared as a string at the root: the name-length rule sits at the root
/// (CEL cannot sit inside `metadata`) and reports on `.metadata.name`, which the API server
/// accepts only for a field the schema declares. `name` and `generateName` are the only
/// `metadata` fields a CRD schema may declare.
fn declare_metadata_name(schema: &mut Value) -> Result<(), CrdError> {
    let properties = schema
        .get_mut("properties")
        .and_then(Value::as_object_mut)
        .ok_or(CrdError::MissingSchema)?;
    properties.insert(
        "metadata".into(),
        json!({"type": "object", "properties": {"name": {"type": "string"}}}),
    );
    Ok(())
}

/// The schema node at a path of property names (`[]` is the root); arrays are entered through
/// their `items`, and [`EACH`] is the `items` node itself.
pub fn schema_node<'a>(schema: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut node = schema;
    for key in path {
        if *key == EACH {
            node = node.get_mut("items")?;
            continue;
        }
        if node.get("properties").is_none() && node.get("items").is_some() {
            node = node.get_mut("items")?;
        }
        node = node.get_mut("properties")?.get_mut(*key)?;
    }
    Some(node)
}

fn strip_descriptions(node: &mut Value) {
    match node {
        Value::Object(map) => {
            if map.get("description").is_some_and(Value::is_string) {
                map.remove("description");
            }
            map.values_mut().for_each(strip_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

fn attach(schema: &mut Value, rule: &Rule) -> Result<(), CrdError> {
    let node = schema_node(schema, rule.at)
        .and_then(Value::as_object_mut)
        .ok_or_else(|| CrdError::UnknownLocation(rule.at.join(".")))?;
    match rule.check {
        Check::Minimum(min) => {
            node.insert("minimum".into(), json!(min));
        }
        Check::Maximum(max) => {
            node.insert("maximum".into(), json!(max));
        }
        Check::MaxLength(max) => {
            node.insert("maxLength".into(), json!(max));
        }
        Check::MaxItems(max) => {
            node.insert("maxItems".into(), json!(max));
        }
        Check::Cel { rule: cel, .. } => {
            let list = node
                .entry("x-kubernetes-validations")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = list {
                list.push(Value::Object(cel_entry(cel, rule)));
            }
        }
    }
    Ok(())
}

/// The `x-kubernetes-validations` entry of a CEL rule. The API server reports a failure on the
/// rule's field (`fieldPath`, relative to where the rule sits) with the rule's kind
/// (`reason`; `Invalid` is the API server's default), so that the schema's message reads like
/// the webhook's: `spec.jobTemplate.spec.template.spec.restartPolicy: Required value: ...`.
pub fn cel_entry(cel: &str, rule: &Rule) -> Map<String, Value> {
    let mut entry = Map::new();
    entry.insert("rule".into(), json!(cel));
    entry.insert("message".into(), json!(rule.message));
    if !rule.field.is_empty() {
        entry.insert(
            "fieldPath".into(),
            json!(format!(".{}", rule.field.join("."))),
        );
    }
    match rule.kind {
        ErrorKind::Required => {
            entry.insert("reason".into(), json!("FieldValueRequired"));
        }
        ErrorKind::Forbidden => {
            entry.insert("reason".into(), json!("FieldValueForbidden"));
        }
        ErrorKind::Invalid | ErrorKind::NotSupported => {}
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule_at(path: &str) -> &'static Rule {
        rules()
            .iter()
            .find(|r| r.path() == path && matches!(r.check, Check::Cel { .. }))
            .unwrap_or_else(|| panic!("a CEL rule on {path}"))
    }

    fn entry(path: &str) -> Value {
        let rule = rule_at(path);
        let Check::Cel { rule: cel, .. } = rule.check else {
            unreachable!("rule_at finds CEL rules only")
        };
        Value::Object(cel_entry(cel, rule))
    }

    #[test]
    fn cel_entries_report_on_the_rules_field_with_its_kind() {
        let restart = entry("spec.jobTemplate.spec.template.spec.restartPolicy");
        assert_eq!(restart["fieldPath"], ".restartPolicy");
        assert_eq!(restart["reason"], "FieldValueRequired");
        assert_eq!(restart["message"], "valid values: \"OnFailure\", \"Never\"");
        let name = entry("metadata.name");
        assert_eq!(name["fieldPath"], ".metadata.name");
        assert_eq!(name["message"], "must be no more than 52 characters");
        assert!(
            name.get("reason").is_none(),
            "Invalid is the default: {name}"
        );
        let selector = entry("spec.jobTemplate.spec.selector");
        assert!(selector.get("fieldPath").is_none(), "{selector}");
        assert!(selector.get("reason").is_none(), "{selector}");
    }

    #[test]
    fn every_field_path_is_declared_in_the_schema() {
        let crd = crd().expect("CRD");
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("JSON");
        let mut root = schema["openAPIV3Schema"].clone();
        for rule in rules() {
            if let Check::Cel { .. } = rule.check {
                let path: Vec<&str> = rule.at.iter().chain(rule.field).copied().collect();
                assert!(
                    schema_node(&mut root, &path).is_some(),
                    "{} is not in the schema",
                    rule.path()
                );
            }
        }
    }
}
