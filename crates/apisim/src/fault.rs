//! Errors as Kubernetes `Status` bodies, injected faults and validation failures.

use serde_json::{Value, json};

use crate::route::ResKey;

/// The standard tail of a resourceVersion conflict message.
pub(crate) const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// An error answer: HTTP status plus the fields of a `Status` body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) reason: String,
    pub(crate) message: String,
    pub(crate) details: Option<Value>,
    pub(crate) retry_after: Option<u64>,
}

fn details(res: &ResKey, name: &str) -> Value {
    let mut d = json!({"name": name, "kind": res.plural});
    if !res.group.is_empty() {
        d["group"] = json!(res.group);
    }
    d
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// The `Status` body.
    pub(crate) fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }

    pub(crate) fn not_found(res: &ResKey, name: &str) -> Self {
        ApiError {
            details: Some(details(res, name)),
            ..Self::new(
                404,
                "NotFound",
                format!("{} \"{name}\" not found", res.qualified()),
            )
        }
    }

    pub(crate) fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub(crate) fn already_exists(res: &ResKey, name: &str) -> Self {
        let message = format!("{} \"{name}\" already exists", res.qualified());
        ApiError {
            details: Some(details(res, name)),
            ..Self::new(409, "AlreadyExists", message)
        }
    }

    /// `Operation cannot be fulfilled on {res} "{name}": {why}`.
    pub(crate) fn conflict(res: &ResKey, name: &str, why: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} \"{name}\": {why}",
            res.qualified()
        );
        ApiError {
            details: Some(details(res, name)),
            ..Self::new(409, "Conflict", message)
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn internal(message: &str) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
    }

    pub(crate) fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// 422 Invalid, worded like the API server: `Job.batch "x" is invalid: spec.a: msg`.
    pub(crate) fn invalid(kind: &str, group: &str, name: &str, invalid: &Invalid) -> Self {
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let causes: Vec<String> = invalid
            .causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let list = match causes.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut d = json!({
            "name": name, "kind": kind,
            "causes": invalid.causes.iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect::<Vec<_>>(),
        });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        ApiError {
            details: Some(d),
            ..Self::new(
                422,
                "Invalid",
                format!("{qualified} \"{name}\" is invalid: {list}"),
            )
        }
    }
}

/// One field error of a validation failure (`details.causes[]` of a 422 `Status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The field path, e.g. `spec.schedule`.
    pub field: String,
    /// The cause type, e.g. `FieldValueInvalid` or `FieldValueRequired`.
    pub reason: String,
    /// The message, e.g. `Invalid value: "x": not a cron expression`.
    pub message: String,
}

/// A validation failure: the validator's answer, turned into a 422 Invalid `Status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invalid {
    /// The field errors.
    pub causes: Vec<Cause>,
}

impl Invalid {
    /// A failure with one cause.
    pub fn field(
        field: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Invalid::default().and(field, reason, message)
    }

    /// Adds a cause.
    pub fn and(
        mut self,
        field: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        self.causes.push(Cause {
            field: field.into(),
            reason: reason.into(),
            message: message.into(),
        });
        self
    }
}

/// An injected failure: the next `count` requests matching `method` and `path_contains` are
/// answered with HTTP `status` and a `Status` body, before any cost is paid and without touching
/// the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The HTTP method to match (`"POST"`...), or any.
    pub method: Option<String>,
    /// A substring of the request path to match (empty: any).
    pub path_contains: String,
    /// How many requests to fail.
    pub count: usize,
    /// The HTTP status.
    pub status: u16,
    /// The `Status` reason, e.g. `TooManyRequests`.
    pub reason: String,
    /// The `Status` message.
    pub message: String,
    /// Sent as a `Retry-After` header and `details.retryAfterSeconds`.
    pub retry_after: Option<u64>,
}

impl Fault {
    /// Fails the next request (any method, any path) with this status and reason.
    pub fn new(status: u16, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Fault {
            method: None,
            path_contains: String::new(),
            count: 1,
            status,
            message: format!("apisim: injected {reason}"),
            reason,
            retry_after: None,
        }
    }

    /// 429 TooManyRequests with `Retry-After`, as the API server's priority and fairness sends.
    pub fn too_many_requests(retry_after_seconds: u64) -> Self {
        Fault::new(429, "TooManyRequests")
            .message("Too many requests, please try again later.")
            .retry_after(retry_after_seconds)
    }

    /// 500 InternalError.
    pub fn internal_error() -> Self {
        Fault::new(500, "InternalError").message("Internal error occurred: apisim: injected")
    }

    /// Only requests with this method (`GET`, `POST`, `PUT`, `PATCH`, `DELETE`).
    pub fn method(mut self, method: impl Into<String>) -> Self {
        self.method = Some(method.into().to_ascii_uppercase());
        self
    }

    /// Only requests whose path contains this.
    pub fn path(mut self, path_contains: impl Into<String>) -> Self {
        self.path_contains = path_contains.into();
        self
    }

    /// Fail this many requests.
    pub fn times(mut self, count: usize) -> Self {
        self.count = count;
        self
    }

    /// The `Status` message.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Send `Retry-After: seconds`.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    pub(crate) fn matches(&self, method: &str, path: &str) -> bool {
        self.count > 0
            && self.method.as_deref().is_none_or(|m| m == method)
            && path.contains(&self.path_contains)
    }

    pub(crate) fn to_error(&self) -> ApiError {
        let mut e = ApiError::new(self.status, &self.reason, self.message.clone());
        if let Some(secs) = self.retry_after {
            e.details = Some(json!({"retryAfterSeconds": secs}));
            e.retry_after = Some(secs);
        }
        e
    }
}

/// Requests held back: every request matching `method` and a path containing `path_contains`
/// waits, before it is answered or touches the store, until [`Hold::release`] (or the hold is
/// dropped), or is lost with [`Hold::fail`]. For a write that lags behind, e.g. a status write
/// still queued while other things happen, or one a process that dies never sends.
#[derive(Debug)]
pub struct Hold {
    pub(crate) state: tokio::sync::watch::Sender<Held>,
    pub(crate) waiting: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

/// Where a held request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    Waiting,
    /// Answered as usual.
    Released,
    /// Never answered: the connection fails (a transport error).
    Failed,
}

impl Hold {
    /// How many requests wait now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Let every held request (and every later one) through.
    pub fn release(&self) {
        self.state.send_if_modified(|s| {
            let waiting = *s == Held::Waiting;
            if waiting {
                *s = Held::Released;
            }
            waiting
        });
    }

    /// Lose every held request (it fails as a broken connection and never reaches the store);
    /// later ones go through.
    pub fn fail(&self) {
        self.state.send_replace(Held::Failed);
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.release();
    }
}
