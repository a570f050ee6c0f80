//! Jobs as the API server encodes them in protobuf, made into the JSON that kronjob's Job
//! caches decode ([`crate::controller::cache::SlimJob`]). Pure: bytes in, bytes out.
//!
//! The API server encodes and decodes protobuf at a fraction of JSON's cost, and a Job's
//! protobuf can be read without touching the parts nobody reads (the pod template,
//! managedFields, labels): a length prefix skips each. What comes out is a Job with only what a
//! slim Job keeps, a list of them, a watch event, or the `Status` of an error,
//! in the JSON the API server would have sent for those fields.
//!
//! The wire format: an object is the magic `k8s\0` and a `runtime.Unknown` (its `apiVersion`
//! and `kind`, and the object's own bytes); a watch stream is a sequence of frames, each a
//! 4-byte big-endian length and a `WatchEvent` (its type, and an object as above). Field
//! numbers are those of the Kubernetes API's `generated.proto`.

use std::io::Write as _;

use bytes::{Buf, Bytes, BytesMut};

use super::meta::KEPT_ANNOTATIONS;

/// The protobuf media type of the Kubernetes API.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The largest watch frame accepted: the API server stores objects of at most 1.5 MiB.
pub const MAX_FRAME: usize = 16 << 20;
/// The annotation of a bookmark that ends a watch's initial events (streaming lists).
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";
const MAGIC: &[u8] = b"k8s\0";

/// Why some bytes could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A field, a length or a frame ends past the bytes given.
    #[error("truncated protobuf")]
    Truncated,
    /// A varint longer than 10 bytes.
    #[error("malformed varint")]
    Varint,
    /// Groups (wire types 3 and 4) or an unknown wire type.
    #[error("unsupported protobuf wire type {0}")]
    WireType(u8),
    /// The object does not start with `k8s\0`.
    #[error("not a Kubernetes protobuf object (no k8s magic)")]
    Magic,
    /// An object of a kind this module does not read.
    #[error("unexpected object {0}")]
    Kind(String),
    /// A string field that is not UTF-8.
    #[error("a string field is not UTF-8")]
    Utf8,
    /// A time outside what can be written.
    #[error("a time out of range: {0} s")]
    Time(i64),
    /// A watch frame longer than [`MAX_FRAME`].
    #[error("a watch frame of {0} bytes exceeds {MAX_FRAME}")]
    FrameTooLarge(usize),
}

/// One field's value.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

impl<'a> Value<'a> {
    fn string(self) -> Result<&'a str, WireError> {
        match self {
            Value::Bytes(b) => std::str::from_utf8(b).map_err(|_| WireError::Utf8),
            _ => Ok(""),
        }
    }

    fn bytes(self) -> &'a [u8] {
        match self {
            Value::Bytes(b) => b,
            _ => &[],
        }
    }

    fn int(self) -> i64 {
        match self {
            // int32 and int64 are both written as the two's complement of 64 bits.
            Value::Varint(v) => v as i64,
            _ => 0,
        }
    }
}

/// The fields of a message, in the order written.
struct Fields<'a> {
    buf: &'a [u8],
}

fn fields(buf: &[u8]) -> Fields<'_> {
    Fields { buf }
}

fn varint(buf: &mut &[u8]) -> Result<u64, WireError> {
    let mut value = 0u64;
    for i in 0..10 {
        let (&byte, rest) = buf.split_first().ok_or(WireError::Truncated)?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Ok(value);
        }
    }
    Err(WireError::Varint)
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], WireError> {
    if buf.len() < n {
        return Err(WireError::Truncated);
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Value<'a>), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        let field = (|| {
            let key = varint(&mut self.buf)?;
            let value = match key & 7 {
                0 => Value::Varint(varint(&mut self.buf)?),
                1 => take(&mut self.buf, 8).map(|_| Value::Fixed)?,
                2 => {
                    let n = usize::try_from(varint(&mut self.buf)?)
                        .map_err(|_| WireError::Truncated)?;
                    Value::Bytes(take(&mut self.buf, n)?)
                }
                5 => take(&mut self.buf, 4).map(|_| Value::Fixed)?,
                t => return Err(WireError::WireType(t as u8)),
            };
            Ok((key >> 3, value))
        })();
        if field.is_err() {
            self.buf = &[];
        }
        Some(field)
    }
}

/// A JSON object being written: keys and values are appended in order.
struct Obj<'o> {
    out: &'o mut Vec<u8>,
    first: bool,
}

impl<'o> Obj<'o> {
    fn open(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Obj { out, first: true }
    }

    /// Start the member `key`: its value is to be written to what is returned.
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        string(self.out, key);
        self.out.push(b':');
        self.out
    }

    fn str(&mut self, key: &str, value: &str) {
        let out = self.key(key);
        string(out, value);
    }

    /// A string member written only when not empty (as the API server omits empty strings).
    fn non_empty(&mut self, key: &str, value: &str) {
        if !value.is_empty() {
            self.str(key, value);
        }
    }

    fn int(&mut self, key: &str, value: i64) {
        let out = self.key(key);
        let _ = write!(out, "{value}");
    }

    fn bool(&mut self, key: &str, value: bool) {
        let out = self.key(key);
        out.extend_from_slice(if value { b"true" } else { b"false" });
    }

    fn time(&mut self, key: &str, value: &[u8]) -> Result<(), WireError> {
        if let Some(t) = time(value)? {
            let out = self.key(key);
            let _ = write!(out, "\"{t}\"");
        }
        Ok(())
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

/// `items` as a JSON array, each written by `write`.
fn array<'a>(
    out: &mut Vec<u8>,
    items: Vec<&'a [u8]>,
    write: fn(&mut Vec<u8>, &'a [u8]) -> Result<(), WireError>,
) -> Result<(), WireError> {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(out, item)?;
    }
    out.push(b']');
    Ok(())
}

fn string(out: &mut Vec<u8>, s: &str) {
    // Writing JSON into a Vec cannot fail.
    let _ = serde_json::to_writer(out, s);
}

/// A `meta.v1.Time` (seconds, nanos): `None` for the zero time, which is written as an empty
/// message (JSON `null`). Kubernetes' JSON times have whole seconds.
fn time(b: &[u8]) -> Result<Option<jiff::Timestamp>, WireError> {
    let mut seconds = None;
    for f in fields(b) {
        if let (1, v) = f? {
            seconds = Some(v.int());
        }
    }
    seconds
        .map(|s| jiff::Timestamp::from_second(s).map_err(|_| WireError::Time(s)))
        .transpose()
}

/// Strip `k8s\0` and read the `runtime.Unknown`: `(apiVersion, kind, raw)`.
fn envelope(b: &[u8]) -> Result<(&str, &str, &[u8]), WireError> {
    let b = b.strip_prefix(MAGIC).ok_or(WireError::Magic)?;
    let (mut api_version, mut kind, mut raw) = ("", "", &[][..]);
    for f in fields(b) {
        match f? {
            (1, v) => {
                for t in fields(v.bytes()) {
                    match t? {
                        (1, v) => api_version = v.string()?,
                        (2, v) => kind = v.string()?,
                        _ => {}
                    }
                }
            }
            (2, v) => raw = v.bytes(),
            _ => {}
        }
    }
    Ok((api_version, kind, raw))
}

/// A whole response body (an object, `k8s\0` first) as JSON: a Job, a list of Jobs or a
/// `Status`.
pub fn object_to_json(body: &[u8]) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::with_capacity(512);
    object(&mut out, body)?;
    Ok(out)
}

fn object(out: &mut Vec<u8>, body: &[u8]) -> Result<(), WireError> {
    match envelope(body)? {
        ("batch/v1", "Job", raw) => job(out, raw),
        ("batch/v1", "JobList", raw) => job_list(out, raw),
        ("v1", "Status", raw) => status(out, raw),
        (api_version, kind, _) => Err(WireError::Kind(format!("{api_version} {kind}"))),
    }
}

/// A Job with what a slim Job reads: metadata as [`meta`] writes it,
/// `spec.ttlSecondsAfterFinished`, and `status`'s start and completion times and conditions
/// (type, status, last transition).
fn job(out: &mut Vec<u8>, b: &[u8]) -> Result<(), WireError> {
    let mut o = Obj::open(out);
    o.str("apiVersion", "batch/v1");
    o.str("kind", "Job");
    for f in fields(b) {
        match f? {
            (1, v) => meta(o.key("metadata"), v.bytes())?,
            (2, v) => job_spec(o.key("spec"), v.bytes())?,
            (3, v) => job_status(o.key("status"), v.bytes())?,
            _ => {}
        }
    }
    o.close();
    Ok(())
}

/// Identity, version, generation, creation and deletion time, the annotations the caches keep
/// (kronjob's own, and the end of a watch's initial events) and the owner references. Labels,
/// managedFields, finalizers and other annotations are skipped.
fn meta(out: &mut Vec<u8>, b: &[u8]) -> Result<(), WireError> {
    let mut o = Obj::open(out);
    let mut annotations: Vec<(&str, &str)> = Vec::new();
    let mut owners: Vec<&[u8]> = Vec::new();
    for f in fields(b) {
        match f? {
            (1, v) => o.non_empty("name", v.string()?),
            (3, v) => o.non_empty("namespace", v.string()?),
            (5, v) => o.non_empty("uid", v.string()?),
            (6, v) => o.non_empty("resourceVersion", v.string()?),
            (7, v) if v.int() != 0 => o.int("generation", v.int()),
            (8, v) => o.time("creationTimestamp", v.bytes())?,
            (9, v) => o.time("deletionTimestamp", v.bytes())?,
            (12, v) => {
                let (mut key, mut value) = ("", "");
                for e in fields(v.bytes()) {
                    match e? {
                        (1, v) => key = v.string()?,
                        (2, v) => value = v.string()?,
                        _ => {}
                    }
                }
                if key.starts_with(KEPT_ANNOTATIONS) || key == INITIAL_EVENTS_END {
                    annotations.push((key, value));
                }
            }
            (13, v) => owners.push(v.bytes()),
            _ => {}
        }
    }
    if !annotations.is_empty() {
        let mut a = Obj::open(o.key("annotations"));
        for (key, value) in annotations {
            a.str(key, value);
        }
        a.close();
    }
    if !owners.is_empty() {
        array(o.key("ownerReferences"), owners, owner_reference)?;
    }
    o.close();
    Ok(())
}

fn owner_reference(out: &mut Vec<u8>, b: &[u8]) -> Result<(), WireError> {
    let mut o = Obj::open(out);
    for f in fields(b) {
        match f? {
            (1, v) => o.str("kind", v.string()?),
            (3, v) => o.str("name", v.string()?),
            (4, v) => o.str("uid", v.string()?),
            (5, v) => o.str("apiVersion", v.string()?),
            (6, v) => o.bool("controller", v.int() != 0),
            (7, v) => o.bool("blockOwnerDeletion", v.int() != 0),
            _ => {}
        }
    }
    o.close();
    Ok(())
}

fn job_spec(out: &mut Vec<u8>, b: &[u8]) -> Result<(), WireError> {
    let mut o = Obj::open(out);
    for f in fields(b) {
        if let (8, v) = f? {
            o.int("ttlSecondsAfterFinished", i64::from(v.int() as i32));
        }
    }
    o.close();
    Ok(())
}

fn job_status(out: &mut Vec<u8>, b: &[u8]) -> Result<(), WireError> {
    let mut o = Obj::open(out);
    let mut conditions: Vec<&[u8]> = Vec::new();
    for f in fields(b) {
        match f? {
            (1, v) => conditions.push(v.bytes()),
            (2, v) => o.time("startTime", v.bytes())?,
            (3, v) => o.time("completionTime", v.bytes())?,
            _ => {}
        }
    }
    if !conditions.is_empty() {
        array(o.key("conditions"), conditions, job_condition)?;
    }
    o.close();
    Ok(())
}

fn job_condition(out: &mut Vec<u8>, b: &[u8]) -> Result<(), WireError> {
    let mut c = Obj::open(out);
    for f in fields(b) {
        match f? {
            (1, v) => c.str("type", v.string()?),
            (2, v) => c.str("status", v.string()?),
            (4, v) => c.time("lastTransitionTime", v.bytes())?,
            _ => {}
        }
    }
    c.close();
    Ok(())
}

fn job_list(out: &mut Vec<u8>, b: &[u8]) -> Result<(), WireError> {
    let mut o = Obj::open(out);
    o.str("apiVersion", "batch/v1");
    o.str("kind", "JobList");
    let mut items: Vec<&[u8]> = Vec::new();
    for f in fields(b) {
        match f? {
            (1, v) => list_meta(o.key("metadata"), v.bytes())?,
            (2, v) => items.push(v.bytes()),
            _ => {}
        }
    }
    array(o.key("items"), items, job)?;
    o.close();
    Ok(())
}

fn list_meta(out: &mut Vec<u8>, b: &[u8]) -> Result<(), WireError> {
    let mut o = Obj::open(out);
    for f in fields(b) {
        match f? {
            (2, v) => o.non_empty("resourceVersion", v.string()?),
            (3, v) => o.non_empty("continue", v.string()?),
            (4, v) => o.int("remainingItemCount", v.int()),
            _ => {}
        }
    }
    o.close();
    Ok(())
}

/// A `Status` (an error's answer, or a watch's `ERROR` event) with everything kube reads.
fn status(out: &mut Vec<u8>, b: &[u8]) -> Result<(), WireError> {
    let mut o = Obj::open(out);
    o.str("apiVersion", "v1");
    o.str("kind", "Status");
    for f in fields(b) {
        match f? {
            (1, v) => list_meta(o.key("metadata"), v.bytes())?,
            (2, v) => o.non_empty("status", v.string()?),
            (3, v) => o.non_empty("message", v.string()?),
            (4, v) => o.non_empty("reason", v.string()?),
            (5, v) => status_details(o.key("details"), v.bytes())?,
            (6, v) => o.int("code", v.int()),
            _ => {}
        }
    }
    o.close();
    Ok(())
}

fn status_details(out: &mut Vec<u8>, b: &[u8]) -> Result<(), WireError> {
    let mut o = Obj::open(out);
    let mut causes: Vec<&[u8]> = Vec::new();
    for f in fields(b) {
        match f? {
            (1, v) => o.non_empty("name", v.string()?),
            (2, v) => o.non_empty("group", v.string()?),
            (3, v) => o.non_empty("kind", v.string()?),
            (4, v) => causes.push(v.bytes()),
            (5, v) if v.int() > 0 => o.int("retryAfterSeconds", v.int()),
            (6, v) => o.non_empty("uid", v.string()?),
            _ => {}
        }
    }
    if !causes.is_empty() {
        array(o.key("causes"), causes, status_cause)?;
    }
    o.close();
    Ok(())
}

fn status_cause(out: &mut Vec<u8>, b: &[u8]) -> Result<(), WireError> {
    let mut c = Obj::open(out);
    for f in fields(b) {
        match f? {
            (1, v) => c.non_empty("reason", v.string()?),
            (2, v) => c.non_empty("message", v.string()?),
            (3, v) => c.non_empty("field", v.string()?),
            _ => {}
        }
    }
    c.close();
    Ok(())
}

/// A watch event (one frame, without its length) as one line of JSON, `\n` included, as the
/// API server's JSON watch streams write them.
pub fn watch_event_to_json(frame: &[u8], out: &mut Vec<u8>) -> Result<(), WireError> {
    let (mut type_, mut object) = ("", None);
    for f in fields(frame) {
        match f? {
            (1, v) => type_ = v.string()?,
            (2, v) => {
                for r in fields(v.bytes()) {
                    if let (1, raw) = r? {
                        object = Some(raw.bytes());
                    }
                }
            }
            _ => {}
        }
    }
    let mut o = Obj::open(out);
    o.str("type", type_);
    match object {
        Some(raw) => self::object(o.key("object"), raw)?,
        None => return Err(WireError::Truncated),
    }
    o.close();
    out.push(b'\n');
    Ok(())
}

/// A watch stream cut into frames: bytes go in as they arrive, whole frames come out.
#[derive(Debug, Default)]
pub struct Frames {
    buf: BytesMut,
}

impl Frames {
    /// Append bytes read from the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole frame, if one has arrived; an error for a frame over [`MAX_FRAME`].
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, WireError> {
        let Some(prefix) = self.buf.first_chunk::<4>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*prefix) as usize;
        if len > MAX_FRAME {
            return Err(WireError::FrameTooLarge(len));
        }
        if self.buf.len() < 4 + len {
            self.buf.reserve(4 + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(len).freeze()))
    }

    /// Bytes received that do not yet make a whole frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
#[path = "protobuf_tests.rs"]
pub(crate) mod tests;
