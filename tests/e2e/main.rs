//! End-to-end tests against the cluster in KUBECONFIG, driving the real `kronjob` binary.
//!
//! They are `#[ignore]`d: `just e2e` runs them with `KRONJOB_E2E=1`. Each test makes its own
//! namespace and deletes it at the end.

mod cronjob;
mod harness;
mod leader;
mod ttl;

use harness::{Env, Manager, wait_for};
use kronjob::api::CronJob;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use std::time::Duration;

#[tokio::test]
#[ignore = "needs a cluster: KRONJOB_E2E=1 just e2e"]
async fn crd_installs_and_samples_apply() {
    let env = Env::new().await;
    let manager = Manager::spawn(&env, &[]);
    harness::wait_crd_established(&env.client).await;

    let gvk = GroupVersionKind::gvk("batch.kronjob.dev", "v1", "CronJob");
    let resource = ApiResource::from_gvk(&gvk);
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &resource);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/config/samples");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).expect("samples") {
        let path = entry.expect("entry").path();
        let file = path.display().to_string();
        if !file.ends_with(".yaml") || file.ends_with("kustomization.yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let object: DynamicObject = serde_yaml_ng::from_str(&text).expect("yaml");
        let name = object.metadata.name.clone().expect("name");
        dynamic
            .patch(
                &name,
                &PatchParams::apply("kronjob-e2e"),
                &Patch::Apply(&object),
            )
            .await
            .unwrap_or_else(|e| panic!("apply {file}: {e}"));
        names.push(name);
    }
    assert!(names.len() >= 2);

    // Every sample gets a computed next schedule time from the running operator.
    let api: Api<CronJob> = Api::namespaced(env.client.clone(), &env.namespace);
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
    drop(manager);
    env.cleanup().await;
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
