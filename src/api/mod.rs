//! The `CronJob` API: types, defaults and validation rules. Pure: nothing here talks to the API.

pub mod crdgen;
pub mod rules;
mod types;
pub use types::*;
