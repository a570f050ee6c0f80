//! What a Job is to kronjob: its name, how it is built, checked, read and deleted.
//!
//! Defined once, below the controllers, the webhook and the commands: its name, how it is built
//! from a CronJob's template, the dry run that checks that template, how it is read, and the
//! one guarded delete.
//!
//! - [`name`]: `<cronjob>-<unix minutes>` for a slot, `<cronjob>-m<base 36 seconds>` for a
//!   manual run (pure);
//! - [`build`]: the Job a template makes, for a slot or a manual run (pure);
//! - [`read`]: which CronJob controls a Job, whether and when it finished, what it ran for,
//!   the slim copy kept in caches (pure);
//! - [`dry_run`]: the template checked as the API server checks a batch/v1 CronJob's (a
//!   `dryRun=All` create of one carrying it);
//! - [`delete`]: delete by name only while the UID is the one decided on.

pub mod backfill;
pub mod build;
pub mod delete;
pub mod dry_run;
pub mod name;
pub mod read;

pub use build::{for_backfill, for_slot, from_template, manual};
pub use delete::{Deletion, delete_guarded};
pub use dry_run::{
    DRY_RUN_TIMEOUT, TemplateDryRun, Unknown, Verdict, invalid, probe, refusal_message,
};
pub use name::{manual_name, scheduled_name};
pub use read::{
    Finish, Outcome, Ran, backfilled, controlled_by, controller_uid, created_by_kronjob, finish,
    is_controlled_by_kronjob, job_ref, outcome, ran_for, slim, slot_of, slot_recorded,
};
