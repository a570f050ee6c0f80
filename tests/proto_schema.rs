//! `src/proto/schema.rs` is generated from the Kubernetes API's `.proto` files in `proto/`:
//! every message a batch/v1 Job reaches, each field by its JSON name. This test generates it
//! again and fails when the committed file differs; `just generate` (or this test with
//! `KRONJOB_REGENERATE=1`) rewrites it.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;

use prost_reflect::{DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::Value;

const ROOT: &str = "api.batch.v1.Job";
const SCHEMA: &str = "src/proto/schema.rs";

/// Messages whose JSON is not the JSON of their fields: the encoder writes each its own way.
const SPECIAL: &[(&str, &str)] = &[
    ("apimachinery.pkg.apis.meta.v1.Time", "Time"),
    ("apimachinery.pkg.api.resource.Quantity", "Quantity"),
    ("apimachinery.pkg.util.intstr.IntOrString", "IntOrString"),
    // Not in a Job's schema today, and managedFields' raw field sets (kronjob sends none):
    // written as JSON.
    ("apimachinery.pkg.apis.meta.v1.MicroTime", "Unsupported"),
    ("apimachinery.pkg.apis.meta.v1.Duration", "Unsupported"),
    ("apimachinery.pkg.runtime.RawExtension", "Unsupported"),
    ("apimachinery.pkg.apis.meta.v1.FieldsV1", "Unsupported"),
];

fn pool() -> DescriptorPool {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/proto");
    protox::Compiler::new([dir])
        .expect("proto/ exists")
        .open_files(["api/batch/v1/generated.proto"])
        .expect("the protos compile")
        .descriptor_pool()
}

/// The JSON schema of every type a Job reaches, by name (`io.k8s.api.core.v1.PodSpec`), as
/// k8s-openapi describes them.
fn json_schemas() -> serde_json::Map<String, Value> {
    let root = schemars::SchemaGenerator::default()
        .into_root_schema_for::<k8s_openapi::api::batch::v1::Job>();
    let mut root = serde_json::to_value(root).expect("JSON");
    let mut defs = match root["$defs"].take() {
        Value::Object(defs) => defs,
        _ => panic!("no $defs"),
    };
    defs.insert(format!("io.k8s.{ROOT}"), root);
    defs
}

/// The JSON property names of message `m`, when k8s-openapi knows its type.
fn properties<'s>(
    schemas: &'s serde_json::Map<String, Value>,
    m: &MessageDescriptor,
) -> Option<&'s serde_json::Map<String, Value>> {
    schemas
        .get(&format!("io.k8s.{}", m.full_name()))?
        .get("properties")?
        .as_object()
}

/// Whether `field` of `parent` is a Go struct embedded inline: its fields are the parent's in
/// JSON (`Volume`'s `VolumeSource`, `Probe`'s `ProbeHandler`). It is a single message the JSON
/// does not name while it names some field of that message.
fn is_inline(
    schemas: &serde_json::Map<String, Value>,
    parent: &MessageDescriptor,
    field: &FieldDescriptor,
) -> bool {
    let (Kind::Message(m), Some(props)) = (field.kind(), properties(schemas, parent)) else {
        return false;
    };
    !field.is_list()
        && !field.is_map()
        && !props.contains_key(field.name())
        && m.fields().any(|f| props.contains_key(f.name()))
}

/// The Rust of one field's kind; a message not yet numbered is queued.
fn kind(
    schemas: &serde_json::Map<String, Value>,
    parent: &MessageDescriptor,
    field: &FieldDescriptor,
    index: &mut BTreeMap<String, usize>,
    queue: &mut VecDeque<MessageDescriptor>,
) -> String {
    let mut number = |m: MessageDescriptor| -> usize {
        let next = index.len();
        *index.entry(m.full_name().to_string()).or_insert_with(|| {
            queue.push_back(m.clone());
            next
        })
    };
    match field.kind() {
        Kind::Bool => "Bool".into(),
        Kind::Int32 => "Int32".into(),
        Kind::Int64 => "Int64".into(),
        Kind::String => "String".into(),
        Kind::Message(m) => {
            if let Some((_, special)) = SPECIAL.iter().find(|(name, _)| *name == m.full_name()) {
                (*special).into()
            } else if field.is_map() {
                format!("Map({})", number(m))
            } else if is_inline(schemas, parent, field) {
                format!("Inline({})", number(m))
            } else {
                format!("Message({})", number(m))
            }
        }
        // None in a Job's schema today (unsigned, floating point, bytes): such a field is
        // written as JSON until the encoder learns it.
        _ => "Unsupported".into(),
    }
}

fn generate() -> String {
    let pool = pool();
    let schemas = json_schemas();
    let root = pool.get_message_by_name(ROOT).expect("the Job message");
    let mut index = BTreeMap::from([(ROOT.to_string(), 0)]);
    let mut queue = VecDeque::from([root]);
    let mut messages: Vec<(usize, String, Vec<String>)> = Vec::new();
    while let Some(m) = queue.pop_front() {
        let mut fields: Vec<(String, String)> = m
            .fields()
            .map(|f| {
                let kind = kind(&schemas, &m, &f, &mut index, &mut queue);
                let repeated = f.is_list();
                (
                    f.name().to_string(),
                    format!(
                        "Field {{ json: {:?}, number: {}, kind: {kind}, repeated: {repeated} }}",
                        f.name(),
                        f.number()
                    ),
                )
            })
            .collect();
        // Sorted by JSON name: the encoder finds a field by binary search.
        fields.sort();
        let i = index[m.full_name()];
        messages.push((
            i,
            m.full_name().to_string(),
            fields.into_iter().map(|(_, f)| f).collect(),
        ));
    }
    messages.sort_by_key(|(i, _, _)| *i);
    let mut out = String::new();
    out.push_str(
        "//! Every message a batch/v1 Job reaches in the Kubernetes API's protobuf schema (`proto/`),\n\
         //! each field by its JSON name. Generated by `tests/proto_schema.rs`: do not edit,\n\
         //! `just generate` rewrites it.\n\n\
         use super::Field;\nuse super::Kind::*;\n\n\
         /// The index of `batch/v1` `Job` in [`MESSAGES`].\npub(super) const JOB: u16 = 0;\n\n\
         /// Each message's fields, sorted by JSON name; a field's `Message(i)` or `Map(i)` is\n\
         /// `MESSAGES[i]`.\n\
         pub(super) static MESSAGES: &[&[Field]] = &[\n",
    );
    for (i, name, fields) in &messages {
        let _ = writeln!(out, "    // {i}: {name}\n    &[");
        for f in fields {
            let _ = writeln!(out, "        {f},");
        }
        out.push_str("    ],\n");
    }
    out.push_str("];\n");
    out
}

#[test]
fn committed_schema_is_generated_from_the_protos() {
    let path = format!("{}/{SCHEMA}", env!("CARGO_MANIFEST_DIR"));
    let generated = generate();
    if std::env::var_os("KRONJOB_REGENERATE").is_some() {
        std::fs::write(&path, &generated).expect("writes the schema");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{path} is stale: run `just generate` (or this test with KRONJOB_REGENERATE=1)"
    );
}

#[test]
fn every_json_field_of_a_job_has_a_protobuf_field() {
    // Each JSON property k8s-openapi knows for a type a Job reaches is a field of its message
    // or of a message embedded inline in it; some types must have been checked, and the
    // embeddings the encoder relies on found.
    let pool = pool();
    let schemas = json_schemas();
    let mut checked = 0;
    let mut inline = Vec::new();
    for (name, schema) in &schemas {
        let Some(m) = name
            .strip_prefix("io.k8s.")
            .and_then(|n| pool.get_message_by_name(n))
        else {
            continue;
        };
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for key in props.keys() {
            let direct = m.get_field_by_name(key).is_some();
            let embedded = m.fields().find(|f| {
                is_inline(&schemas, &m, f)
                    && matches!(f.kind(), Kind::Message(e) if e.get_field_by_name(key).is_some())
            });
            if let Some(f) = &embedded {
                inline.push(f.full_name().to_string());
            }
            // apiVersion and kind are the envelope's, not the message's.
            let envelope = m.full_name() == ROOT && (key == "apiVersion" || key == "kind");
            assert!(
                direct || embedded.is_some() || envelope,
                "{name}.{key}: no protobuf field"
            );
        }
        checked += 1;
    }
    assert!(checked > 100, "only {checked} types checked");
    for expected in [
        "api.core.v1.Volume.volumeSource",
        "api.core.v1.Probe.handler",
        "api.core.v1.SecretKeySelector.localObjectReference",
    ] {
        assert!(
            inline.iter().any(|i| i == expected),
            "{expected} not inline"
        );
    }
}

#[test]
fn every_field_of_the_job_schema_is_named_as_in_json() {
    // The encoder finds fields by JSON name; go-to-protobuf names each field after its JSON
    // tag, so the names are the JSON names (and no field needs a `json_name` of its own).
    let pool = pool();
    let mut seen = 0;
    for m in pool.all_messages() {
        for f in m.fields() {
            assert!(
                !f.name().contains('_'),
                "{}: a field name with an underscore",
                f.full_name()
            );
            seen += 1;
        }
    }
    assert!(seen > 1_000, "only {seen} fields read from proto/");
    // The names the encoder relies on, spot-checked against the JSON of a PodSpec.
    let pod = pool
        .get_message_by_name("api.core.v1.PodSpec")
        .expect("PodSpec");
    for (json, number) in [("restartPolicy", 3), ("hostIPC", 13), ("nodeSelector", 7)] {
        let f = pod.get_field_by_name(json).expect(json);
        assert_eq!(f.number(), number, "{json}");
    }
}
