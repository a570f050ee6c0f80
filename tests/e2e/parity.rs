//! Job templates side by side with batch/v1: a table of templates, valid and invalid by
//! upstream's Job and CronJob validation, each sent as a batch/v1 CronJob and as a kronjob
//! CronJob (through the webhook) to the real API server. kronjob accepts what batch/v1 accepts
//! and refuses what it refuses, naming the same fields; without the webhook, a CronJob whose
//! template batch/v1 refuses gets `Ready=False InvalidJobTemplate` and no Job.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::batch::v1::CronJob as BatchCronJob;
use kronjob::api::CronJob;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::harness::{Ctx, Env, wait_for};
use crate::webhook::Webhook;

crate::cases!(
    parity:
    templates_are_judged_as_batch_v1_judges_them,
    templates_batch_v1_refuses_get_ready_false_without_the_webhook,
);

/// `(case, jobTemplate.spec)`: templates upstream accepts and refuses, from its Job and
/// CronJob validation. Several are valid as Jobs only after Job defaulting, which a CronJob's
/// template never gets.
fn templates() -> Vec<(&'static str, Value)> {
    let pod = || json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}});
    let with = |extra: Value| {
        let mut spec = json!({"template": pod()});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                s.insert(k.clone(), v.clone());
            }
        }
        spec
    };
    let pod_with = |container: Value, pod_extra: Value| {
        let mut spec = json!({"restartPolicy": "Never", "containers": [container]});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), pod_extra.as_object()) {
            for (k, v) in e {
                s.insert(k.clone(), v.clone());
            }
        }
        json!({"template": {"spec": spec}})
    };
    let c = |extra: Value| {
        let mut container = json!({"name": "c", "image": "busybox:1.36"});
        if let (Some(s), Some(e)) = (container.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                s.insert(k.clone(), v.clone());
            }
        }
        container
    };
    vec![
        // Accepted by upstream.
        ("minimal", with(json!({}))),
        (
            "completions and parallelism",
            with(json!({"completions": 3, "parallelism": 2})),
        ),
        (
            "indexed with completions",
            with(json!({"completionMode": "Indexed", "completions": 3})),
        ),
        ("ttl zero", with(json!({"ttlSecondsAfterFinished": 0}))),
        (
            "active deadline",
            with(json!({"activeDeadlineSeconds": 100})),
        ),
        (
            "env name with a space (relaxed in 1.34)",
            pod_with(
                c(json!({"env": [{"name": "MY VAR", "value": "1"}]})),
                json!({}),
            ),
        ),
        (
            "restartPolicy OnFailure",
            pod_with(c(json!({})), json!({"restartPolicy": "OnFailure"})),
        ),
        (
            "pod failure policy with podReplacementPolicy Failed",
            with(json!({
                "podReplacementPolicy": "Failed",
                "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
            })),
        ),
        (
            "backoffLimitPerIndex with indexed",
            with(json!({"completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": 1})),
        ),
        (
            "success policy with indexed",
            with(json!({
                "completionMode": "Indexed", "completions": 3,
                "successPolicy": {"rules": [{"succeededIndexes": "0"}]}
            })),
        ),
        (
            "job template labels",
            json!({"template": {"metadata": {"labels": {"app": "x"}}, "spec": pod()["spec"]}}),
        ),
        // Refused by upstream.
        (
            "indexed without completions",
            with(json!({"completionMode": "Indexed"})),
        ),
        (
            "env name with =",
            pod_with(
                c(json!({"env": [{"name": "MY=VAR", "value": "1"}]})),
                json!({}),
            ),
        ),
        (
            "container name not a DNS label",
            pod_with(
                json!({"name": "Bad_Name", "image": "busybox:1.36"}),
                json!({}),
            ),
        ),
        (
            "container without an image",
            pod_with(json!({"name": "c"}), json!({})),
        ),
        (
            "image pull policy unknown",
            pod_with(c(json!({"imagePullPolicy": "Sometimes"})), json!({})),
        ),
        (
            "restartPolicy Always",
            pod_with(c(json!({})), json!({"restartPolicy": "Always"})),
        ),
        (
            "selector set",
            with(json!({"selector": {"matchLabels": {"a": "b"}}})),
        ),
        ("manualSelector true", with(json!({"manualSelector": true}))),
        ("negative parallelism", with(json!({"parallelism": -1}))),
        (
            "backoffLimitPerIndex without indexed",
            with(json!({"backoffLimitPerIndex": 1})),
        ),
        (
            "maxFailedIndexes without backoffLimitPerIndex",
            with(json!({"completionMode": "Indexed", "completions": 2, "maxFailedIndexes": 1})),
        ),
        (
            "success policy without indexed",
            with(json!({"successPolicy": {"rules": [{"succeededCount": 1}]}})),
        ),
        (
            "pod failure policy without podReplacementPolicy Failed",
            with(json!({
                "podReplacementPolicy": "TerminatingOrFailed",
                "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
            })),
        ),
        (
            "pod failure policy condition without status",
            with(json!({
                "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
            })),
        ),
        (
            "pod template label key invalid",
            json!({"template": {"metadata": {"labels": {"bad key": "x"}}, "spec": pod()["spec"]}}),
        ),
    ]
}

/// What the API server said: accepted, or refused with these field paths.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Accepted,
    Refused(BTreeSet<String>),
}

fn verdict<K>(result: Result<K, kube::Error>) -> Verdict {
    match result {
        Ok(_) => Verdict::Accepted,
        Err(kube::Error::Api(status)) => {
            let mut fields = status
                .details
                .map(|d| d.causes)
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.field)
                .filter(|f| f.starts_with("spec.jobTemplate"))
                .collect::<BTreeSet<_>>();
            if fields.is_empty() {
                // Webhook denials carry the paths in the message only.
                fields = paths_in(&status.message);
            }
            Verdict::Refused(fields)
        }
        Err(e) => panic!("no answer from the API server: {e}"),
    }
}

/// The `spec.jobTemplate...` field paths named in an error message.
fn paths_in(message: &str) -> BTreeSet<String> {
    message
        .match_indices("spec.jobTemplate")
        .map(|(i, _)| {
            let rest = &message[i..];
            let end = rest.find(": ").unwrap_or(rest.len());
            rest[..end].to_string()
        })
        .collect()
}

fn batch_cronjob(name: &str, template_spec: &Value) -> BatchCronJob {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": template_spec}}
    }))
    .expect("batch/v1 CronJob")
}

fn kronjob_cronjob(name: &str, template_spec: &Value) -> Value {
    json!({
        "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": template_spec}}
    })
}

/// Every template, as a server-side dry run: batch/v1 and kronjob (through the webhook) agree.
pub async fn templates_are_judged_as_batch_v1_judges_them(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let webhook = Webhook::start(&ctx, &env, &[]).await;
    let batch: Api<BatchCronJob> = env.api();
    let ours: Api<CronJob> = env.api();
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let mut disagreements = Vec::new();
    for (i, (case, spec)) in templates().into_iter().enumerate() {
        let name = format!("t{i}");
        let upstream = verdict(batch.create(&dry, &batch_cronjob(&name, &spec)).await);
        let object: CronJob = match serde_json::from_value(kronjob_cronjob(&name, &spec)) {
            Ok(cj) => cj,
            Err(e) => panic!("{case}: not a kronjob CronJob: {e}"),
        };
        let kronjob = verdict(ours.create(&dry, &object).await);
        if upstream != kronjob {
            disagreements.push(format!(
                "{case}: batch/v1 {upstream:?}, kronjob {kronjob:?}"
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "kronjob differs from batch/v1:\n{}",
        disagreements.join("\n")
    );
    webhook.uninstall().await;
    env.cleanup().await;
}

/// Without the webhook: every template batch/v1 refuses, if the CRD schema lets it in, gets
/// `Ready=False InvalidJobTemplate`; every template it accepts does not.
pub async fn templates_batch_v1_refuses_get_ready_false_without_the_webhook(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let _manager = env.manager(&[]);
    let batch: Api<BatchCronJob> = env.api();
    let ours: Api<CronJob> = env.api();
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let mut created = Vec::new();
    for (i, (case, spec)) in templates().into_iter().enumerate() {
        let name = format!("t{i}");
        let upstream = verdict(batch.create(&dry, &batch_cronjob(&name, &spec)).await);
        let object: CronJob =
            serde_json::from_value(kronjob_cronjob(&name, &spec)).expect("CronJob");
        if ours.create(&PostParams::default(), &object).await.is_ok() {
            created.push((case, name, upstream == Verdict::Accepted));
        }
    }
    let mut wrong = Vec::new();
    for (case, name, valid) in &created {
        let reason = wait_for(Duration::from_secs(60), "a Ready condition", || {
            let ours = ours.clone();
            async move {
                let status = ours.get_status(name).await.ok()?.status?;
                let ready = status.conditions.into_iter().find(|c| c.type_ == "Ready")?;
                Some(ready.reason)
            }
        })
        .await;
        let invalid = reason == "InvalidJobTemplate";
        if invalid == *valid {
            wrong.push(format!(
                "{case}: batch/v1 {}, Ready reason {reason}",
                if *valid { "accepts" } else { "refuses" }
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    env.cleanup().await;
}
