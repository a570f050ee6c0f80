//! End-to-end tests against the cluster in KUBECONFIG, driving the real `kronjob` binary.
//!
//! They are `#[ignore]`d: `just e2e` runs them with `KRONJOB_E2E=1`. Each test makes its own
//! namespace and deletes it at the end.

mod cronjob;
mod harness;
mod leader;
mod template;
#[path = "../support/tools.rs"]
mod tools;
mod ttl;

use harness::{Env, Manager, wait_for};
use kronjob::api::CronJob;
use kube::api::Api;
use std::time::Duration;

#[tokio::test]
#[ignore = "needs a cluster: KRONJOB_E2E=1 just e2e"]
async fn readme_install_commands_and_kubectl_get_output() {
    let env = Env::new().await;
    let manager = Manager::spawn(&env, &[]);
    harness::wait_crd_established(&env.client).await;

    // The README's commands, as written: `-f` and `-k` both exit 0 for crd/ and the samples.
    let kubectl = tools::tool("kubectl");
    let ns = env.namespace.as_str();
    tools::run(&kubectl, &["apply", "-f", "crd/"]);
    tools::run(&kubectl, &["apply", "-k", "crd/"]);
    let created = tools::run(&kubectl, &["apply", "-n", ns, "-f", "config/samples/"]);
    tools::run(&kubectl, &["apply", "-n", ns, "-k", "config/samples/"]);
    let names: Vec<String> = created
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter_map(|object| object.rsplit('/').next())
        .map(str::to_string)
        .collect();
    assert!(names.len() >= 2, "{created}");

    // Every sample gets a computed next schedule time from the running operator.
    let api: Api<CronJob> = Api::namespaced(env.client.clone(), ns);
    for name in &names {
        wait_for(Duration::from_secs(30), || {
            let api = api.clone();
            let name = name.clone();
            async move {
                api.get_status(&name)
                    .await
                    .ok()
                    .and_then(|cj| cj.status)
                    .and_then(|s| s.next_schedule_time)
                    .is_some()
            }
        })
        .await
        .unwrap_or_else(|| panic!("{name} never got status.nextScheduleTime"));
    }

    // `kubectl get kcj` prints the README's header, and NEXT SCHEDULE as a future time.
    let table = tools::run(&kubectl, &["get", "kcj", "-n", ns]);
    let readme = std::fs::read_to_string("README.md").expect("README.md");
    assert_eq!(header(&table), header(&readme), "README header vs\n{table}");
    let next_column = table
        .lines()
        .next()
        .and_then(|h| h.find("NEXT SCHEDULE"))
        .expect("NEXT SCHEDULE column");
    let now = jiff::Timestamp::now();
    for row in table.lines().skip(1) {
        let cell = row
            .get(next_column..)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_default();
        let next: jiff::Timestamp = cell
            .parse()
            .unwrap_or_else(|e| panic!("NEXT SCHEDULE {cell:?} is not a time ({e}):\n{table}"));
        assert!(
            next > now,
            "NEXT SCHEDULE {next} is not in the future:\n{table}"
        );
    }
    assert!(!table.contains("<invalid>"), "{table}");
    drop(manager);
    env.cleanup().await;
}

/// The words of the first line in `text` that reads like the header of `kubectl get kcj`.
fn header(text: &str) -> Option<Vec<&str>> {
    text.lines()
        .map(|l| {
            l.trim_start_matches("# ")
                .split_whitespace()
                .collect::<Vec<_>>()
        })
        .find(|words| words.first() == Some(&"NAME") && words.contains(&"SCHEDULE"))
}

/// Start the real manager in a fresh namespace, run one scenario, clean up.
async fn with_manager<F, Fut>(extra: &[&str], scenario: F)
where
    F: FnOnce(kube::Client, String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let env = Env::new().await;
    let manager = Manager::spawn(&env, extra);
    harness::wait_crd_established(&env.client).await;
    scenario(env.client.clone(), env.namespace.clone()).await;
    drop(manager);
    env.cleanup().await;
}

#[tokio::test]
#[ignore = "needs a cluster: KRONJOB_E2E=1 just e2e"]
async fn cronjob_creates_a_job_within_65s() {
    with_manager(&[], |client, ns| async move {
        cronjob::creates_job_within_65s(client, &ns).await
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster: KRONJOB_E2E=1 just e2e"]
async fn completed_job_sets_last_success_and_history_is_trimmed() {
    with_manager(&[], |client, ns| async move {
        cronjob::completion_sets_last_success_and_trims_history(client, &ns).await
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster: KRONJOB_E2E=1 just e2e"]
async fn ttl_deletes_a_finished_owned_job_within_7s() {
    with_manager(&["--ttl-jobs", "owned"], |client, ns| async move {
        ttl::finished_owned_job_disappears(client, &ns).await
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster: KRONJOB_E2E=1 just e2e"]
async fn trigger_creates_a_manual_run_with_the_default_ttl() {
    with_manager(&["--default-job-ttl", "1h"], |client, ns| async move {
        cronjob::trigger_runs_now_with_the_default_ttl(client, &ns).await
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster: KRONJOB_E2E=1 just e2e"]
async fn an_invalid_job_template_is_denied_by_the_webhook_and_reported_by_the_reconciler() {
    with_manager(&[], |client, ns| async move {
        template::webhook_denies_with_the_field_path(client.clone(), &ns).await;
        template::reconciler_reports_the_refusal_and_creates_no_job(client, &ns).await;
    })
    .await;
}
