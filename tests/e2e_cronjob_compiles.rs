//! Compile check of the CronJob e2e scenarios (they need a cluster and run from the lead's
//! e2e harness, not here).

#[path = "e2e/cronjob.rs"]
mod cronjob;

#[test]
fn scenarios_are_async_fns_of_client_and_namespace() {
    // Only type-checks the signatures; nothing is run.
    let _a: fn(kube::Client, &'static str) -> _ = |c, ns| cronjob::creates_job_within_65s(c, ns);
    let _b: fn(kube::Client, &'static str) -> _ =
        |c, ns| cronjob::completion_sets_last_success_and_trims_history(c, ns);
}
