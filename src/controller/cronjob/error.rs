//! What fails a reconcile of a CronJob.

/// Errors of the CronJob reconciler.
#[derive(thiserror::Error, Debug)]
pub enum Error {
    /// An API call failed.
    #[error("kubernetes API error: {0}")]
    Kube(#[source] kube::Error),
    /// The CronJob lacks a field the API always sets (name, namespace, UID).
    #[error("CronJob is missing {0}")]
    MissingField(&'static str),
    /// The cached CronJob's Job template does not decode (never the case for a template the
    /// API server stored).
    #[error("the Job template does not decode: {0}")]
    Decode(#[source] serde_json::Error),
    /// The CronJob does not exist.
    #[error("CronJob {0} not found")]
    NotFound(String),
}

/// Every value [`Error::category`] gives: the error counter exports each at zero from the
/// start, so a rate over it has series before the first error.
pub const CATEGORIES: [&str; 9] = [
    "api_conflict",
    "api_not_found",
    "api_forbidden",
    "api_invalid",
    "api_server",
    "api_other",
    "transport",
    "invalid_object",
    "not_found",
];

impl Error {
    /// A fixed, low-cardinality category for metrics and logs (one of [`CATEGORIES`]).
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(s)) if s.is_conflict() => "api_conflict",
            Error::Kube(kube::Error::Api(s)) if s.is_not_found() => "api_not_found",
            Error::Kube(kube::Error::Api(s)) if s.is_forbidden() => "api_forbidden",
            Error::Kube(kube::Error::Api(s)) if s.is_invalid() => "api_invalid",
            Error::Kube(kube::Error::Api(s)) if s.code >= 500 || s.code == 429 => "api_server",
            Error::Kube(kube::Error::Api(_)) => "api_other",
            Error::Kube(_) => "transport",
            Error::MissingField(_) | Error::Decode(_) => "invalid_object",
            Error::NotFound(_) => "not_found",
        }
    }

    /// The message of the API server's refusal of a Job as invalid (422), if this is one.
    pub fn refused(&self) -> Option<String> {
        match self {
            Error::Kube(e) => crate::workload::invalid(e).map(crate::workload::refusal_message),
            _ => None,
        }
    }

    /// Whether retrying without a change to the object cannot help: also a create refused
    /// because the namespace is being deleted (the CronJob goes with it).
    pub fn is_permanent(&self) -> bool {
        match self {
            Error::MissingField(_) | Error::Decode(_) => true,
            Error::Kube(e) => crate::client::namespace_terminating(e),
            Error::NotFound(_) => false,
        }
    }
}
