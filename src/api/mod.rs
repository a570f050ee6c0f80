//! The `CronJob` API: types, defaults and validation rules. Pure: nothing here talks to the API.

mod types;
pub use types::*;
