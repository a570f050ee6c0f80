//! Controllers: the parts of kronjob that watch the API server and act on it.

pub mod ttl;
