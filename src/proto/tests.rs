//! The encoder against a reader of the same schema, and that reader against a real
//! kube-apiserver 1.34's own protobuf (the fixtures of the Job caches: each answer in protobuf
//! and in JSON for the same object). The server's answer to a create from these bytes is
//! checked in the e2e suite.

use serde_json::{Value, json};

use super::*;
use crate::controller::cache::protobuf::tests as fixtures;

// ---------------------------------------------------------------------------------------------
// A reader by the schema (tests only)
// ---------------------------------------------------------------------------------------------

fn read_varint(bytes: &mut &[u8]) -> u64 {
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let (b, rest) = bytes.split_first().expect("varint");
        *bytes = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return v;
        }
    }
    panic!("varint too long")
}

/// The fields of `bytes` in order: number, and the varint or the length-delimited bytes.
fn fields(mut bytes: &[u8]) -> Vec<(u32, Result<u64, &[u8]>)> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let key = read_varint(&mut bytes);
        let n = u32::try_from(key >> 3).expect("field number");
        match key & 7 {
            0 => out.push((n, Ok(read_varint(&mut bytes)))),
            2 => {
                let len = usize::try_from(read_varint(&mut bytes)).expect("length");
                let (value, rest) = bytes.split_at(len);
                bytes = rest;
                out.push((n, Err(value)));
            }
            other => panic!("wire type {other} in a Job"),
        }
    }
    out
}

fn text(b: Result<u64, &[u8]>) -> String {
    String::from_utf8(b.expect_err("length-delimited").to_vec()).expect("UTF-8")
}

/// One value of `field`, as the API server writes it in JSON.
fn read_one(field: &Field, b: Result<u64, &[u8]>) -> Value {
    match field.kind {
        Kind::Bool => json!(b.expect("varint") != 0),
        Kind::Int32 => json!(b.expect("varint") as i64 as i32),
        Kind::Int64 => json!(b.expect("varint") as i64),
        Kind::String => json!(text(b)),
        Kind::Message(i) => read_message(i, b.expect_err("message")),
        Kind::Inline(_) => unreachable!("inline messages are read by read_message"),
        Kind::Map(_) => unreachable!("maps are read by read_message"),
        // Go writes its zero time (JSON's null) as an empty message.
        Kind::Time if b.expect_err("Time").is_empty() => Value::Null,
        Kind::Time => {
            let (mut seconds, mut nanos) = (0i64, 0i32);
            for (n, v) in fields(b.expect_err("Time")) {
                match n {
                    1 => seconds = v.expect("seconds") as i64,
                    2 => nanos = v.expect("nanos") as i64 as i32,
                    _ => panic!("Time field {n}"),
                }
            }
            let t = jiff::Timestamp::new(seconds, nanos).expect("a time");
            json!(format!("{t:.0}"))
        }
        Kind::Quantity => json!(text(fields(b.expect_err("Quantity"))[0].1)),
        Kind::IntOrString => {
            let f = fields(b.expect_err("IntOrString"));
            let get = |n| f.iter().find(|(m, _)| *m == n).map(|(_, v)| *v);
            match get(1).map(|t| t.expect("type")).unwrap_or(0) {
                0 => json!(get(2).map_or(0, |v| v.expect("intVal") as i64 as i32)),
                _ => json!(get(3).map(text).unwrap_or_default()),
            }
        }
        Kind::Unsupported => Value::Null,
    }
}

fn read_message(index: u16, bytes: &[u8]) -> Value {
    let schema = MESSAGES[usize::from(index)];
    let mut object = serde_json::Map::new();
    for (n, b) in fields(bytes) {
        let field = schema
            .iter()
            .find(|f| f.number == n)
            .unwrap_or_else(|| panic!("field {n} of message {index}"));
        let key = field.json.to_string();
        if let Kind::Inline(m) = field.kind {
            // Its fields are the parent's in JSON.
            if let Value::Object(inner) = read_message(m, b.expect_err("inline")) {
                object.extend(inner);
            }
        } else if let Kind::Map(entry) = field.kind {
            let entry_fields = MESSAGES[usize::from(entry)];
            let (mut k, mut v) = (String::new(), Value::Null);
            for (en, eb) in fields(b.expect_err("map entry")) {
                let ef = entry_fields.iter().find(|f| f.number == en).expect("entry");
                match ef.json {
                    "key" => k = text(eb),
                    _ => v = read_one(ef, eb),
                }
            }
            object
                .entry(key)
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("a map")
                .insert(k, v);
        } else if field.repeated {
            let item = read_one(field, b);
            object
                .entry(key)
                .or_insert_with(|| json!([]))
                .as_array_mut()
                .expect("a list")
                .push(item);
        } else {
            object.insert(key, read_one(field, b));
        }
    }
    Value::Object(object)
}

use schema::MESSAGES;

/// A protobuf Job object (`k8s\0`, `runtime.Unknown`): its type and its JSON.
pub(crate) fn read_job(bytes: &[u8]) -> (String, String, Value) {
    let unknown = bytes.strip_prefix(MAGIC).expect("the magic");
    let (mut api_version, mut kind, mut job) = (String::new(), String::new(), Value::Null);
    for (n, b) in fields(unknown) {
        match n {
            1 => {
                for (tn, tb) in fields(b.expect_err("TypeMeta")) {
                    match tn {
                        1 => api_version = text(tb),
                        _ => kind = text(tb),
                    }
                }
            }
            2 => job = read_message(schema::JOB, b.expect_err("raw")),
            _ => {}
        }
    }
    (api_version, kind, job)
}

/// `v` without what the API server's JSON leaves out and Go's protobuf writes anyway: empty
/// strings, zeros, `false`, empty lists and objects (and objects left empty by that).
fn without_zeros(v: &Value) -> Option<Value> {
    match v {
        Value::String(s) if s.is_empty() => None,
        Value::Bool(false) | Value::Null => None,
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        Value::Array(items) => {
            let items: Vec<Value> = items
                .iter()
                .map(|i| without_zeros(i).unwrap_or(json!({})))
                .collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(map) => {
            let map: serde_json::Map<String, Value> = map
                .iter()
                .filter(|(k, _)| *k != "managedFields")
                .filter_map(|(k, v)| without_zeros(v).map(|v| (k.clone(), v)))
                .collect();
            (!map.is_empty()).then_some(Value::Object(map))
        }
        other => Some(other.clone()),
    }
}

// ---------------------------------------------------------------------------------------------
// The reader against the API server's own protobuf
// ---------------------------------------------------------------------------------------------

#[test]
fn the_schema_reads_the_api_servers_protobuf_jobs_as_its_json() {
    for (name, (pb, js)) in [
        ("create", fixtures::CREATE),
        ("finished", fixtures::FINISHED),
        ("deleting", fixtures::DELETING),
    ] {
        let (api_version, kind, job) = read_job(pb);
        assert_eq!(
            (api_version.as_str(), kind.as_str()),
            ("batch/v1", "Job"),
            "{name}"
        );
        let mut expected: Value = serde_json::from_str(js).expect("JSON");
        let map = expected.as_object_mut().expect("an object");
        map.remove("apiVersion");
        map.remove("kind");
        assert_json_diff::assert_json_eq!(without_zeros(&job), without_zeros(&expected));
        // The fixtures hold each kind the encoder writes: a time, a map, a list of messages.
        assert!(job["metadata"]["creationTimestamp"].is_string(), "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// The encoder
// ---------------------------------------------------------------------------------------------

/// A Job with a field of every kind the schema has: maps, lists of strings and of messages,
/// int-or-strings of both types, quantities, times, negative and large integers, empty objects.
pub(crate) fn rich_job() -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "report-29000000",
            "namespace": "team-a",
            "labels": {"app": "report", "batch.kronjob.dev/cronjob": "report"},
            "annotations": {"batch.kubernetes.io/cronjob-scheduled-timestamp": "2025-02-20T10:00:00Z"},
            "ownerReferences": [{
                "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob", "name": "report",
                "uid": "00000000-0000-4000-8000-000000000001", "controller": true,
                "blockOwnerDeletion": true
            }],
            "finalizers": ["example.com/keep"],
            "deletionTimestamp": "2025-02-20T10:00:01.5Z",
            "creationTimestamp": null
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 9_007_199_254_740_993_i64,
            "ttlSecondsAfterFinished": 3600,
            "suspend": false,
            "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42, -1, 0]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
            ]},
            "template": {
                "metadata": {"labels": {"app": "report"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "main",
                        "image": "busybox:1.36",
                        "command": ["/bin/sh", "-c"],
                        "args": ["date; echo héllo ✓", ""],
                        "env": [
                            {"name": "MODE", "value": "full"},
                            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "t"}}}
                        ],
                        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": 1}},
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
                        "readinessProbe": {"tcpSocket": {"port": 8080}},
                        "securityContext": {"runAsUser": -2, "capabilities": {"drop": ["ALL"]}}
                    }],
                    "volumes": [
                        {"name": "data", "emptyDir": {}},
                        {"name": "big", "emptyDir": {"sizeLimit": "1Gi"}}
                    ],
                    "nodeSelector": {"pool": "batch"},
                    "securityContext": {}
                }
            }
        }
    })
}

#[test]
fn a_job_reads_back_as_its_json() {
    let job = rich_job();
    let bytes = super::job(&job).expect("encodes");
    let (api_version, kind, read) = read_job(&bytes);
    assert_eq!((api_version.as_str(), kind.as_str()), ("batch/v1", "Job"));
    let mut expected = job.clone();
    let map = expected.as_object_mut().expect("an object");
    map.remove("apiVersion");
    map.remove("kind");
    map["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("creationTimestamp");
    // The reader writes a time at whole seconds, as the API server's JSON does.
    map["metadata"]["deletionTimestamp"] = json!("2025-02-20T10:00:01Z");
    // The API server reads a quantity from a number as from its text.
    map["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("1");
    assert_eq!(read, expected);
    // Empty objects are written (an emptyDir of no fields is still an emptyDir), and so are
    // zeros and falses given in the JSON (a pointer field set to 0 is not an absent one).
    assert_eq!(
        read["spec"]["template"]["spec"]["volumes"][0]["emptyDir"],
        json!({})
    );
    assert_eq!(read["spec"]["backoffLimit"], json!(0));
    assert_eq!(read["spec"]["suspend"], json!(false));
}

#[test]
fn the_bytes_of_a_small_job() {
    let bytes = super::job(&json!({
        "kind": "Job", "apiVersion": "batch/v1",
        "metadata": {"name": "a", "labels": {"k": "v"}},
        "spec": {"parallelism": -1, "template": {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}}
    }))
    .expect("encodes");
    let mut expected = b"k8s\0".to_vec();
    // runtime.Unknown: typeMeta (apiVersion, kind), raw
    expected.extend([0x0a, 15, 0x0a, 8]);
    expected.extend(b"batch/v1");
    expected.extend([0x12, 3]);
    expected.extend(b"Job");
    // Fields in the order of their JSON names (serde_json's maps are sorted).
    let metadata: &[u8] = &[
        0x5a, 6, 0x0a, 1, b'k', 0x12, 1, b'v', // labels = 11, one entry (key 1, value 2)
        0x0a, 1, b'a', // name = 1
    ];
    // name = 1; ports = 6, one ContainerPort (containerPort = 3)
    let container: &[u8] = &[0x0a, 1, b'c', 0x32, 2, 0x18, 80];
    let mut pod_spec = vec![0x12, u8::try_from(container.len()).expect("short")]; // containers = 2
    pod_spec.extend(container);
    let mut template = vec![0x12, u8::try_from(pod_spec.len()).expect("short")]; // spec = 2
    template.extend(&pod_spec);
    // parallelism = 1, sign-extended to ten bytes; template = 6
    let mut spec = vec![
        0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    ];
    spec.extend([0x32, u8::try_from(template.len()).expect("short")]);
    spec.extend(&template);
    let mut raw = vec![0x0a, u8::try_from(metadata.len()).expect("short")];
    raw.extend(metadata);
    raw.extend([0x12, u8::try_from(spec.len()).expect("short")]);
    raw.extend(&spec);
    expected.extend([0x12, u8::try_from(raw.len()).expect("short")]);
    expected.extend(&raw);
    assert_eq!(bytes, expected);
}

#[test]
fn what_the_schema_cannot_write_is_reported_with_its_path() {
    // What, the change to the rich Job, the path reported, the reason.
    type Case = (&'static str, fn(&mut Value), &'static str, &'static str);
    let cases: &[Case] = &[
        (
            "an unknown field",
            |j| j["spec"]["template"]["spec"]["containers"][0]["imagePulPolicy"] = json!("Always"),
            "spec.template.spec.containers[0].imagePulPolicy",
            "a field the protobuf schema lacks",
        ),
        (
            "a string for a number",
            |j| j["spec"]["backoffLimit"] = json!("6"),
            "spec.backoffLimit",
            "not a 32-bit integer",
        ),
        (
            "an int32 overflow",
            |j| j["spec"]["backoffLimit"] = json!(2_147_483_648_i64),
            "spec.backoffLimit",
            "not a 32-bit integer",
        ),
        (
            "a fraction",
            |j| j["spec"]["ttlSecondsAfterFinished"] = json!(1.5),
            "spec.ttlSecondsAfterFinished",
            "not a 32-bit integer",
        ),
        (
            "a number for a string",
            |j| j["metadata"]["name"] = json!(7),
            "metadata.name",
            "not a string",
        ),
        (
            "a string for a list",
            |j| j["metadata"]["finalizers"] = json!("x"),
            "metadata.finalizers",
            "not a list",
        ),
        (
            "a list for an object",
            |j| j["spec"]["template"] = json!([]),
            "spec.template",
            "not an object",
        ),
        (
            "a null label",
            |j| j["metadata"]["labels"]["app"] = Value::Null,
            "metadata.labels.app",
            "a null map value",
        ),
        (
            "a number label",
            |j| j["metadata"]["labels"]["app"] = json!(1),
            "metadata.labels.app",
            "not a string",
        ),
        (
            "a bad time",
            |j| j["metadata"]["deletionTimestamp"] = json!("yesterday"),
            "metadata.deletionTimestamp",
            "not a time",
        ),
        (
            "a bool port",
            |j| {
                j["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["tcpSocket"]["port"] =
                    json!(true)
            },
            "spec.template.spec.containers[0].readinessProbe.tcpSocket.port",
            "not an integer or a string",
        ),
        (
            "a list quantity",
            |j| {
                j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] =
                    json!([1])
            },
            "spec.template.spec.containers[0].resources.limits.cpu",
            "not a quantity",
        ),
        (
            "managed fields",
            |j| {
                j["metadata"]["managedFields"] =
                    json!([{"manager": "m", "fieldsV1": {"f:spec": {}}}])
            },
            "metadata.managedFields[0].fieldsV1",
            "a value written only as JSON",
        ),
        (
            "another kind",
            |j| j["kind"] = json!("Pod"),
            "",
            "not a batch/v1 Job",
        ),
        (
            "another version",
            |j| j["apiVersion"] = json!("batch/v2"),
            "",
            "not a batch/v1 Job",
        ),
    ];
    for (what, change, path, reason) in cases {
        let mut job = rich_job();
        change(&mut job);
        assert_eq!(
            super::job(&job),
            Err(Unsupported {
                path: (*path).into(),
                reason
            }),
            "{what}"
        );
    }
    assert!(super::job(&json!([1])).is_err());
}

#[test]
fn any_value_anywhere_gives_bytes_or_an_error_never_a_panic() {
    // Each leaf of the rich Job replaced by each kind of JSON value.
    fn leaves(v: &Value, path: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
        match v {
            Value::Object(map) => map.iter().for_each(|(k, v)| {
                path.push(json!(k));
                leaves(v, path, out);
                path.pop();
            }),
            Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| {
                path.push(json!(i));
                leaves(v, path, out);
                path.pop();
            }),
            _ => out.push(path.clone()),
        }
    }
    let job = rich_job();
    let mut paths = Vec::new();
    leaves(&job, &mut Vec::new(), &mut paths);
    assert!(paths.len() > 50, "{} leaves", paths.len());
    let values = [
        Value::Null,
        json!(true),
        json!(-1),
        json!(u64::MAX),
        json!(1e300),
        json!(""),
        json!("x"),
        json!([]),
        json!([null, {}]),
        json!({}),
        json!({"": null}),
    ];
    let (mut written, mut refused) = (0, 0);
    for path in &paths {
        for value in &values {
            let mut j = job.clone();
            let mut at = &mut j;
            for step in path {
                at = match step {
                    Value::String(k) => &mut at[k.as_str()],
                    _ => &mut at[usize::try_from(step.as_u64().expect("index")).expect("index")],
                };
            }
            *at = value.clone();
            match super::job(&j) {
                Ok(bytes) => {
                    written += 1;
                    // What is written reads back.
                    let (_, kind, _) = read_job(&bytes);
                    assert_eq!(kind, "Job");
                }
                Err(e) => {
                    refused += 1;
                    assert!(!e.reason.is_empty());
                }
            }
        }
    }
    assert!(
        written > 0 && refused > 0,
        "{written} written, {refused} refused"
    );
}
