//! The `CronJob` API: types, defaults and validation rules. Pure: nothing here talks to the API.

pub mod crdgen;
pub mod defaults;
pub mod rules;
mod types;
pub mod validation;
pub use types::*;
