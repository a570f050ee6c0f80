//! A fault of the control plane struck just before a slot (`--fault`), and how kronjob
//! recovered from it.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kronjob_envtest::ControlPlane;
use kube::api::{Api, PostParams};
use serde::Serialize;

use crate::BoxError;
use crate::phase::secs;
use crate::report::Spread;

/// What to do to the control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// etcd SIGKILLed 5 s before the slot, started again `--fault-away` later.
    EtcdKill,
    /// The API server stopped as a rollout does 3 s before the slot (SIGTERM; it answers 429
    /// with `Retry-After` while it drains) and started again at once.
    ApiserverRestart,
    /// The API server SIGKILLed 2 s before the slot and started again at once.
    ApiserverKill,
}

impl Fault {
    /// How long before the slot it strikes.
    pub fn lead(self) -> Duration {
        Duration::from_secs(match self {
            Fault::EtcdKill => 5,
            Fault::ApiserverRestart => 3,
            Fault::ApiserverKill => 2,
        })
    }

    /// The API server flags it needs from the start.
    pub fn apiserver_args(self) -> Vec<String> {
        match self {
            Fault::ApiserverRestart => vec![
                "--shutdown-delay-duration=1s".into(),
                "--shutdown-send-retry-after=true".into(),
            ],
            _ => Vec::new(),
        }
    }

    /// Strike `plane`; return once the failed part runs again.
    pub async fn strike(self, plane: &mut ControlPlane, away: Duration) -> Result<(), BoxError> {
        match self {
            Fault::EtcdKill => {
                plane.kill_etcd();
                tokio::time::sleep(away).await;
                plane.start_etcd().await?;
            }
            Fault::ApiserverRestart => {
                plane.stop_apiserver(Duration::from_secs(60)).await;
                plane.start_apiserver().await?;
            }
            Fault::ApiserverKill => {
                plane.kill_apiserver();
                plane.start_apiserver().await?;
            }
        }
        Ok(())
    }
}

/// How kronjob came back from a fault.
#[derive(Debug, Clone, Serialize)]
pub struct Recovery {
    pub fault: Fault,
    /// The slot it struck before.
    pub slot: Timestamp,
    /// When the failed part ran again, seconds after the slot.
    pub back_s: f64,
    /// When the API server first created an object again, seconds after the slot.
    pub writes_s: f64,
    /// The slot's runs' arrival at the tool's watch after the API server wrote again, seconds.
    pub jobs: Option<Spread>,
    /// The controller's memory just before the fault (with replicas, their sum).
    pub rss_before_mib: f64,
    /// The same 55 s after the slot that followed.
    pub rss_after_mib: f64,
}

/// When the API server first creates a ConfigMap in `ns` (tried every 250 ms, 2 s each).
pub async fn writable(client: &kube::Client, ns: &str) -> Timestamp {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    loop {
        let probe = ConfigMap {
            metadata: kube::api::ObjectMeta {
                generate_name: Some("probe-".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let params = PostParams::default();
        let created = tokio::time::timeout(Duration::from_secs(2), api.create(&params, &probe));
        if let Ok(Ok(_)) = created.await {
            return Timestamp::now();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

impl Recovery {
    /// `fault at HH:MM: back +a s, writes +b s; runs p50/p99/max; RSS before -> after`.
    pub fn show(&self) -> String {
        format!(
            "{:?} before {}: back {:.1} s after the slot, the API server writing {:.1} s after it; the slot's runs {} s (p50/p99/max) after that; RSS {:.0} -> {:.0} MiB",
            self.fault,
            self.slot.strftime("%H:%M"),
            self.back_s,
            self.writes_s,
            Spread::show(self.jobs),
            self.rss_before_mib,
            self.rss_after_mib
        )
    }
}

/// Seconds from `slot` to `at`.
pub fn after(slot: Timestamp, at: Timestamp) -> f64 {
    secs(at.duration_since(slot))
}
