//! The fixtures in `testdata/` are a real kube-apiserver 1.34's answers, each twice: in
//! protobuf and in JSON, for the same object at the same version (the watch streams were open
//! together). Whatever the protobuf reads as must be what the JSON reads as.

use kube::core::{ObjectList, Status, WatchEvent};
use serde_json::Value;

use super::*;
use crate::controller::cache::SlimJob;

/// A fixture: the server's answer in protobuf and in JSON.
pub(crate) type Fixture = (&'static [u8], &'static str);

macro_rules! fixture {
    ($name:literal) => {
        (
            include_bytes!(concat!("testdata/", $name, ".pb")),
            include_str!(concat!("testdata/", $name, ".json")),
        )
    };
}

pub(crate) const CREATE: Fixture = fixture!("create");
pub(crate) const FINISHED: Fixture = fixture!("finished");
pub(crate) const DELETING: Fixture = fixture!("deleting");
pub(crate) const LIST: Fixture = fixture!("list");
pub(crate) const CONFLICT: Fixture = fixture!("conflict");
pub(crate) const INVALID: Fixture = fixture!("invalid");
pub(crate) const NOT_FOUND: Fixture = fixture!("notfound");
pub(crate) const WATCH: Fixture = fixture!("watch");
pub(crate) const WATCH_ERROR: Fixture = fixture!("watch-error");

fn slim(json: &[u8]) -> SlimJob {
    serde_json::from_slice(json).expect("a Job")
}

fn transcoded(pb: &[u8]) -> Vec<u8> {
    object_to_json(pb).expect("the protobuf reads")
}

#[test]
fn a_job_reads_as_its_json_does_created_finished_and_being_deleted() {
    for (name, (pb, json)) in [
        ("create", CREATE),
        ("finished", FINISHED),
        ("deleting", DELETING),
    ] {
        let ours = transcoded(pb);
        assert_eq!(slim(&ours), slim(json.as_bytes()), "{name}");
        let text = String::from_utf8(ours).expect("UTF-8");
        for skipped in [
            "managedFields",
            "template",
            "labels",
            "\"other\"",
            "finalizers",
        ] {
            assert!(!text.contains(skipped), "{name}: {skipped} in {text}");
        }
        assert!(text.contains("batch.kronjob.dev/scheduled-at"), "{name}");
    }
}

#[test]
fn the_fields_that_matter_are_all_there() {
    let job = slim(&transcoded(FINISHED.0)).0;
    let meta = &job.metadata;
    assert_eq!(meta.name.as_deref(), Some("hello-29000000"));
    assert_eq!(meta.namespace.as_deref(), Some("fixtures"));
    assert!(meta.uid.is_some() && meta.resource_version.is_some());
    assert_eq!(meta.generation, Some(1));
    assert!(meta.creation_timestamp.is_some());
    let owner = &meta.owner_references.as_ref().expect("owners")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("CronJob", "hello", Some(true))
    );
    assert_eq!(
        job.spec.expect("spec").ttl_seconds_after_finished,
        Some(300)
    );
    let status = job.status.expect("status");
    assert_eq!(
        status.completion_time.map(|t| t.0.to_string()).as_deref(),
        Some("2026-11-27T12:00:06Z")
    );
    let types: Vec<_> = status
        .conditions
        .expect("conditions")
        .into_iter()
        .map(|c| (c.type_, c.status, c.last_transition_time.is_some()))
        .collect();
    assert_eq!(
        types,
        [
            ("SuccessCriteriaMet".into(), "True".into(), true),
            ("Complete".into(), "True".into(), true)
        ]
    );
    let deleting = slim(&transcoded(DELETING.0)).0;
    assert!(deleting.metadata.deletion_timestamp.is_some());
}

#[test]
fn a_list_reads_as_its_json_does_with_its_continue_token() {
    let ours: ObjectList<SlimJob> = serde_json::from_slice(&transcoded(LIST.0)).expect("a list");
    let theirs: ObjectList<SlimJob> = serde_json::from_str(LIST.1).expect("a list");
    assert_eq!(ours.items, theirs.items);
    assert_eq!(ours.items.len(), 1);
    assert_eq!(
        ours.metadata.resource_version,
        theirs.metadata.resource_version
    );
    assert!(theirs.metadata.continue_.is_some());
    assert_eq!(ours.metadata.continue_, theirs.metadata.continue_);
    assert_eq!(
        ours.metadata.remaining_item_count,
        theirs.metadata.remaining_item_count
    );
}

#[test]
fn errors_read_as_the_same_status_with_their_causes() {
    for (name, (pb, json)) in [
        ("conflict", CONFLICT),
        ("invalid", INVALID),
        ("not found", NOT_FOUND),
    ] {
        let ours: Status = serde_json::from_slice(&transcoded(pb)).expect("a Status");
        let theirs: Status = serde_json::from_str(json).expect("a Status");
        assert_eq!(ours, theirs, "{name}");
        assert!(ours.code >= 400, "{name}");
    }
    let invalid: Status = serde_json::from_slice(&transcoded(INVALID.0)).expect("a Status");
    let causes = invalid.details.expect("details").causes;
    assert_eq!(causes[0].field, "metadata.name");
}

/// The events of a protobuf watch stream, as JSON lines, the stream fed in chunks of `chunk`
/// bytes.
pub(crate) fn lines(stream: &[u8], chunk: usize) -> Vec<Value> {
    let mut frames = Frames::default();
    let mut out = Vec::new();
    for piece in stream.chunks(chunk) {
        frames.push(piece);
        while let Some(frame) = frames.next_frame().expect("a frame") {
            watch_event_to_json(&frame, &mut out).expect("an event");
        }
    }
    assert_eq!(frames.pending(), 0);
    String::from_utf8(out)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("one event per line"))
        .collect()
}

fn events(lines: Vec<Value>) -> Vec<Value> {
    lines
        .into_iter()
        .map(|l| {
            let event: WatchEvent<SlimJob> = serde_json::from_value(l).expect("a watch event");
            serde_json::to_value(event).expect("encodes")
        })
        .collect()
}

fn json_lines(json: &str) -> Vec<Value> {
    json.lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

#[test]
fn a_watch_stream_reads_as_its_json_does_in_any_chunking() {
    let theirs = events(json_lines(WATCH.1));
    let types: Vec<_> = theirs.iter().map(|e| e["type"].clone()).collect();
    assert_eq!(types, ["MODIFIED", "DELETED", "BOOKMARK"]);
    for chunk in [1, 3, 100, WATCH.0.len()] {
        assert_eq!(events(lines(WATCH.0, chunk)), theirs, "chunks of {chunk}");
    }
}

#[test]
fn a_watch_error_event_reads_as_its_json_does() {
    let theirs = events(json_lines(WATCH_ERROR.1));
    assert_eq!(events(lines(WATCH_ERROR.0, 7)), theirs);
    assert_eq!(theirs[0]["type"], "ERROR");
}

#[test]
fn a_frame_waits_for_its_bytes_and_a_huge_one_is_refused() {
    let mut frames = Frames::default();
    frames.push(&[0, 0, 0, 5, 1, 2]);
    assert_eq!(frames.next_frame(), Ok(None));
    frames.push(&[3, 4, 5, 0, 0]);
    assert_eq!(
        frames.next_frame(),
        Ok(Some(Bytes::from_static(&[1, 2, 3, 4, 5])))
    );
    assert_eq!(frames.next_frame(), Ok(None));
    assert_eq!(frames.pending(), 2);
    let mut huge = Frames::default();
    huge.push(&u32::try_from(MAX_FRAME + 1).expect("fits").to_be_bytes());
    assert_eq!(
        huge.next_frame(),
        Err(WireError::FrameTooLarge(MAX_FRAME + 1))
    );
}

#[test]
fn bytes_that_are_not_a_job_give_an_error() {
    assert_eq!(object_to_json(b"{\"kind\":\"Job\"}"), Err(WireError::Magic));
    // An envelope of another kind (v1 Pod).
    let pod = b"k8s\0\x0a\x09\x0a\x02v1\x12\x03Pod\x12\x00";
    assert_eq!(object_to_json(pod), Err(WireError::Kind("v1 Pod".into())));
    let cut = &FINISHED.0[..FINISHED.0.len() / 2];
    assert_eq!(object_to_json(cut), Err(WireError::Truncated));
    let group = b"k8s\0\x0b";
    assert_eq!(object_to_json(group), Err(WireError::WireType(3)));
    let mut out = Vec::new();
    assert_eq!(
        watch_event_to_json(b"\x0a\x05ADDED", &mut out),
        Err(WireError::Truncated)
    );
}

#[test]
fn no_damage_to_the_bytes_makes_it_panic() {
    for (pb, _) in [FINISHED, LIST, INVALID] {
        for cut in 0..pb.len() {
            let _ = object_to_json(&pb[..cut]);
        }
        for at in 4..pb.len() {
            for byte in [0x00, 0x07, 0x80, 0xff] {
                let mut damaged = pb.to_vec();
                damaged[at] = byte;
                let _ = object_to_json(&damaged);
            }
        }
    }
    for at in 0..WATCH.0.len() {
        let mut damaged = WATCH.0.to_vec();
        damaged[at] ^= 0xff;
        let mut frames = Frames::default();
        frames.push(&damaged);
        let mut out = Vec::new();
        while let Ok(Some(frame)) = frames.next_frame() {
            let _ = watch_event_to_json(&frame, &mut out);
        }
    }
}
