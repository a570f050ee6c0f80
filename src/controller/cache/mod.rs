//! What the controllers cache, decoded straight from the API server's JSON into records that
//! hold only what is read: [`cronjob::CachedCronJob`] (the template as shared compact text),
//! [`job::SlimJob`] (a Job without its pod template) and [`job::CachedJob`] (the owner index's
//! ~0.3 KB per Job). managedFields, labels and other annotations are skipped unread
//! ([`meta`]).

pub mod cronjob;
pub mod interned;
pub mod job;
pub mod meta;
pub mod seconds;
pub mod status;
pub mod uid;

pub use cronjob::CachedCronJob;
pub use job::{CachedJob, SlimJob};
