//! The `CronJob` API: its types, defaults and validation rules, and the CRD made from them.
//!
//! Pure: nothing here talks to the API server.

pub mod backfill;
pub mod crdgen;
pub mod defaults;
pub mod rules;
pub mod shard;
pub mod trigger;
mod types;
pub mod validation;
pub use types::*;
