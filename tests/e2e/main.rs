//! End-to-end tests on a real control plane: etcd, kube-apiserver and kube-controller-manager
//! (garbage collector, namespaces, ServiceAccounts, Jobs) from `KUBEBUILDER_ASSETS`, driving the
//! real `kronjob` and `kubectl-kronjob` binaries, kubectl and helm.
//!
//! The runner starts one control plane, applies `crd/` as the README says, runs every case
//! (in parallel: most of a case's time is waiting for a minute to turn) each in namespaces of
//! its own, deletes them after the case, and stops the control plane. Cases that would disturb
//! the others (killing the API server, cluster-wide installs) start a control plane of their own.
//!
//! Without `KUBEBUILDER_ASSETS` every case is skipped with one line saying so; with
//! `KRONJOB_E2E_REQUIRED=1` (as CI sets it) that is a failure instead.

mod admission;
mod alerts;
mod backfill;
mod calendar;
mod cronjob;
mod enqueue;
mod failure_policy;
mod faults;
mod harness;
mod hostile;
mod image;
mod install;
mod leader;
mod migrate;
mod missed;
mod multi_schedule;
mod observe;
mod once;
mod parity;
mod plugin;
mod policy;
mod rbac;
mod resilience;
mod schedule;
mod startup;
mod template;
mod timed;
#[path = "../tls_support/mod.rs"]
mod tls_support;
#[path = "../support/tools.rs"]
mod tools;
mod ttl;
mod webhook;
mod workloads;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Duration;

use harness::{CASE_LABEL, Ctx};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::wait::{await_condition, conditions::is_crd_established};
use libtest_mimic::{Arguments, Failed, Trial};

/// A case's body: it gets the shared cluster's kubeconfig and its log folder.
pub type CaseFn = fn(Ctx) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// The cases of a module, named `module::function` (what `cargo test --test e2e NAME` filters).
#[macro_export]
macro_rules! cases {
    ($module:ident: $($name:ident),* $(,)?) => {
        pub fn cases() -> Vec<(&'static str, $crate::CaseFn)> {
            vec![$(
                (concat!(stringify!($module), "::", stringify!($name)),
                 (|ctx| Box::pin($name(ctx))) as $crate::CaseFn)
            ),*]
        }
    };
}

/// Every case of every module.
fn cases() -> Vec<(&'static str, CaseFn)> {
    [
        admission::cases(),
        alerts::cases(),
        calendar::cases(),
        backfill::cases(),
        cronjob::cases(),
        enqueue::cases(),
        failure_policy::cases(),
        faults::cases(),
        hostile::cases(),
        image::cases(),
        install::cases(),
        leader::cases(),
        migrate::cases(),
        missed::cases(),
        multi_schedule::cases(),
        once::cases(),
        parity::cases(),
        plugin::cases(),
        policy::cases(),
        rbac::cases(),
        resilience::cases(),
        schedule::cases(),
        startup::cases(),
        template::cases(),
        timed::cases(),
        ttl::cases(),
        workloads::cases(),
    ]
    .concat()
}

/// How many cases run at once unless `--test-threads` says otherwise: they mostly wait.
const DEFAULT_THREADS: usize = 12;

/// The shared control plane's admin kubeconfig and scratch folder, once started.
static SHARED: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads.get_or_insert(DEFAULT_THREADS);
    let cases = cases();
    let assets = match kronjob_envtest::Assets::from_env() {
        Ok(assets) => assets,
        Err(e) => {
            eprintln!("e2e: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(assets) = assets else {
        eprintln!(
            "e2e: {} cases skipped: KUBEBUILDER_ASSETS is not set (a folder with etcd, kube-apiserver and kube-controller-manager: ../shared/envtest/setup.sh or `setup-envtest use 1.34.x -p path` prints one)",
            cases.len()
        );
        if std::env::var("KRONJOB_E2E_REQUIRED").as_deref() == Ok("1") {
            eprintln!("e2e: KRONJOB_E2E_REQUIRED=1: the e2e cases must run");
            return ExitCode::FAILURE;
        }
        let trials = cases
            .into_iter()
            .map(|(name, _)| Trial::test(name, || Ok(())).with_ignored_flag(true))
            .collect();
        return libtest_mimic::run(&args, trials).exit_code();
    };
    if args.list {
        let trials = cases
            .into_iter()
            .map(|(n, _)| Trial::test(n, || Ok(())))
            .collect();
        return libtest_mimic::run(&args, trials).exit_code();
    }
    let runtime = runtime();
    let plane = match runtime.block_on(start_shared(&assets)) {
        Ok(plane) => plane,
        Err(e) => {
            eprintln!("e2e: cannot start the control plane: {e}");
            return ExitCode::FAILURE;
        }
    };
    let _ = SHARED.set((plane.kubeconfig().to_path_buf(), plane.dir().to_path_buf()));
    let trials = cases
        .into_iter()
        .map(|(name, body)| Trial::test(name, move || run_case(name, body)))
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    if conclusion.has_failed() {
        // Keep the control plane's logs for a look; its processes die with this one.
        eprintln!("e2e: control plane logs in {}", plane.dir().display());
        std::mem::forget(plane);
    } else {
        drop(plane);
    }
    conclusion.exit_code()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Start the shared control plane and install the CRD the way the README says.
async fn start_shared(
    assets: &kronjob_envtest::Assets,
) -> Result<kronjob_envtest::ControlPlane, kronjob_envtest::Error> {
    let plane = kronjob_envtest::ControlPlane::start(assets, Default::default()).await?;
    eprintln!(
        "e2e: control plane at {} (logs in {})",
        plane.server(),
        plane.dir().display()
    );
    let kubectl = tools::tool("kubectl");
    let kubeconfig = plane.kubeconfig().display().to_string();
    tools::run(
        &kubectl,
        &["--kubeconfig", &kubeconfig, "apply", "-f", "crd/"],
    );
    let crds: Api<CustomResourceDefinition> = Api::all(plane.client().await?);
    let established = await_condition(crds, "cronjobs.batch.kronjob.dev", is_crd_established());
    match tokio::time::timeout(Duration::from_secs(60), established).await {
        Ok(Ok(_)) => {}
        _ => panic!("the CRD was not established within 60 s"),
    }
    let crds: Api<CustomResourceDefinition> = Api::all(plane.client().await?);
    let calendars = await_condition(crds, "calendars.batch.kronjob.dev", is_crd_established());
    match tokio::time::timeout(Duration::from_secs(60), calendars).await {
        Ok(Ok(_)) => {}
        _ => panic!("the Calendar CRD was not established within 60 s"),
    }
    Ok(plane)
}

/// Run one case on its own runtime; delete its namespaces after it, whatever its outcome; on a
/// failure, add the end of every log the case wrote.
fn run_case(name: &'static str, body: CaseFn) -> Result<(), Failed> {
    let Some((kubeconfig, dir)) = SHARED.get() else {
        return Err("the control plane is not running".into());
    };
    let ctx = Ctx {
        kubeconfig: kubeconfig.clone(),
        logs: dir.join("logs").join(harness::label_value(name)),
        case: name,
    };
    std::fs::create_dir_all(&ctx.logs).map_err(|e| format!("log folder: {e}"))?;
    let runtime = runtime();
    let started = std::time::Instant::now();
    let outcome = runtime.block_on(async { tokio::spawn(body(ctx.clone())).await });
    eprintln!("e2e: {name} took {:.1} s", started.elapsed().as_secs_f64());
    runtime.block_on(delete_namespaces(&ctx));
    match outcome {
        Ok(()) => Ok(()),
        Err(e) => {
            let message = match e.try_into_panic() {
                Ok(payload) => payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panicked".into()),
                Err(e) => e.to_string(),
            };
            Err(format!("{message}\n{}", log_tails(&ctx.logs)).into())
        }
    }
}

/// Delete what the case left: its namespaces, its webhook configurations, ClusterRoles and
/// ClusterRoleBindings.
async fn delete_namespaces(ctx: &Ctx) {
    let Ok(client) = kronjob_envtest::client_from(&ctx.kubeconfig).await else {
        return;
    };
    let selector = format!("{CASE_LABEL}={}", ctx.label());
    let lp = ListParams::default().labels(&selector);
    let dp = DeleteParams::background();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client);
    let _ = tokio::time::timeout(Duration::from_secs(30), async {
        let _ = mutating.delete_collection(&dp, &lp).await;
        let _ = validating.delete_collection(&dp, &lp).await;
        let _ = bindings.delete_collection(&dp, &lp).await;
        let _ = roles.delete_collection(&dp, &lp).await;
        let _ = namespaces.delete_collection(&dp, &lp).await;
    })
    .await;
}

/// The last lines of every log in `dir`, for a failure message.
fn log_tails(dir: &std::path::Path) -> String {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return String::new();
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            format!(
                "--- last lines of {} ---\n{}",
                p.display(),
                kronjob_envtest::process::tail(p, 30)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
