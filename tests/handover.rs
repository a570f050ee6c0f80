//! Leader handover between two replicas electing on one Lease of the simulated API server,
//! with the manager's default timing (lease 15 s, renew deadline 10 s, retry 1 s), under
//! paused time:
//!
//! - on SIGTERM the leader releases the Lease and the standby leads within 2 s;
//! - when the leader dies without a word, the standby leads once the Lease has not changed
//!   for a whole lease duration;
//! - when the network between the leader and the API server stops forwarding (without closing
//!   a connection), the leader stops its controllers and their writes at its renew deadline,
//!   before the standby can take over, and rejoins as a follower when the network returns;
//! - at no instant do both lead.

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kronjob::client::Fence;
use kronjob::manager::Health;
use kronjob::manager::lease::{LeaseConfig, lead};
use kronjob::task::TaskError;
use kronjob_apisim::{ApiSim, CostModel};
use kube::Api;
use support::fixtures::t;
use support::sim::{TokioClock, sim_clock};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The Lease settings `kronjob run --leader-elect` uses by default, for `identity`.
fn default_config(identity: &str) -> LeaseConfig {
    let args = support::manager::run_args(&["--leader-elect"]).expect("flags parse");
    LeaseConfig {
        identity: identity.to_string(),
        namespace: "kronjob-system".into(),
        ..args.lease().expect("leader election on")
    }
}

/// One replica: its election task, its shutdown token, when it started leading, its
/// controllers' write fence, and the switch of the network between it and the API server.
struct Replica {
    task: JoinHandle<Result<(), TaskError>>,
    shutdown: CancellationToken,
    leading_since: watch::Receiver<Option<Instant>>,
    fence: Fence,
    cut: watch::Sender<bool>,
}

fn replica(
    sim: &ApiSim,
    clock: Arc<TokioClock>,
    identity: &str,
    leaders: Arc<AtomicUsize>,
) -> Replica {
    let shutdown = CancellationToken::new();
    let (tx, leading_since) = watch::channel(None);
    let (cut, network) = watch::channel(false);
    let client = kube::Client::new(
        Network {
            api: sim.service(),
            cut: network,
        },
        "default",
    );
    let api: Api<Lease> = Api::namespaced(client, "kronjob-system");
    let fence = Fence::default();
    let writes = fence.clone();
    let task = tokio::spawn(lead(
        Some(api),
        Some(default_config(identity)),
        clock,
        Health::new(false),
        fence.clone(),
        shutdown.clone(),
        move |token: CancellationToken, mut leading: watch::Receiver<bool>| {
            let tx = tx.clone();
            let leaders = leaders.clone();
            let writes = writes.clone();
            async move {
                // A standby's controllers run, and act once it leads.
                tokio::select! {
                    led = leading.wait_for(|leads| *leads) => {
                        led.expect("the election tells its standby");
                    }
                    () = token.cancelled() => return Ok(()),
                }
                let together = leaders.fetch_add(1, Ordering::SeqCst) + 1;
                assert_eq!(together, 1, "two replicas lead at once");
                assert!(writes.is_open(), "a leader's writes are open");
                tx.send_replace(Some(Instant::now()));
                token.cancelled().await;
                leaders.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }
        },
    ));
    Replica {
        task,
        shutdown,
        leading_since,
        fence,
        cut,
    }
}

/// The network between a replica and the API server: while cut, requests and answers wait
/// (the connection stays open, nothing moves), and go on once it is back.
#[derive(Clone)]
struct Network {
    api: kronjob_apisim::SimService,
    cut: watch::Receiver<bool>,
}

impl tower::Service<http::Request<kube::client::Body>> for Network {
    type Response = http::Response<kronjob_apisim::SimBody>;
    type Error = std::io::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let mut api = self.api.clone();
        let mut cut = self.cut.clone();
        Box::pin(async move {
            let _ = cut.wait_for(|cut| !cut).await;
            let answer = tower::Service::call(&mut api, request).await;
            let _ = cut.wait_for(|cut| !cut).await;
            answer
        })
    }
}

async fn leads(replica: &mut Replica, limit: Duration) -> Instant {
    let since = tokio::time::timeout(limit, replica.leading_since.wait_for(Option::is_some))
        .await
        .unwrap_or_else(|_| panic!("no leadership within {limit:?}"))
        .expect("replica running");
    since.expect("some")
}

/// Two replicas on one simulated API server; `a` leads, `b` stands by.
async fn pair() -> (ApiSim, Replica, Replica, Arc<AtomicUsize>) {
    let clock = TokioClock::new(t("2024-01-01T10:00:00Z"));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    let leaders = Arc::new(AtomicUsize::new(0));
    let mut a = replica(&sim, clock.clone(), "a", leaders.clone());
    leads(&mut a, Duration::from_secs(3)).await;
    let b = replica(&sim, clock, "b", leaders.clone());
    // The standby has been following for a while.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(
        b.leading_since.borrow().is_none(),
        "the standby took a held lease"
    );
    (sim, a, b, leaders)
}

#[tokio::test(start_paused = true)]
async fn on_sigterm_the_leader_releases_and_the_standby_leads_within_2s() {
    let (sim, a, mut b, _) = pair().await;
    let stopped = Instant::now();
    a.shutdown.cancel();
    a.task.await.expect("join").expect("clean stop");
    let handover = leads(&mut b, Duration::from_secs(15)).await - stopped;
    eprintln!("graceful handover: {handover:?}");
    assert!(
        handover <= Duration::from_secs(2),
        "handover took {handover:?}"
    );
    let lease = sim
        .get(
            &kronjob_apisim::Resource::leases(),
            Some("kronjob-system"),
            "kronjob-leader",
        )
        .expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    b.shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn when_the_leader_dies_the_standby_leads_after_one_lease_duration() {
    let (_sim, a, mut b, leaders) = pair().await;
    let died = Instant::now();
    a.task.abort();
    let _ = a.task.await;
    // The dead leader's work does not run on: it counts as not leading.
    leaders.store(0, Ordering::SeqCst);
    let takeover = leads(&mut b, Duration::from_secs(30)).await - died;
    eprintln!("takeover after a crash: {takeover:?}");
    // The standby waits for the Lease to stand still for 15 s from when it saw the last
    // renewal (at most one retry period before the crash), then takes it at its next try.
    assert!(
        takeover >= Duration::from_secs(13),
        "took a live lease: {takeover:?}"
    );
    assert!(
        takeover <= Duration::from_secs(17),
        "takeover took {takeover:?}"
    );
    b.shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_leader_cut_off_stops_before_the_standby_leads_and_rejoins_as_a_follower() {
    let (sim, mut a, mut b, _leaders) = pair().await;
    let cut = Instant::now();
    a.cut.send_replace(true);
    // The leader's last renewal went out at most one retry period before the cut: its
    // controllers' writes stop at that send plus the renew deadline (10 s), and its
    // controllers with them ("two replicas lead at once" otherwise).
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(!a.fence.is_open(), "fenced within 10 s of the cut");
    let takeover = leads(&mut b, Duration::from_secs(30)).await - cut;
    eprintln!("takeover after a cut: {takeover:?}");
    assert!(
        takeover >= Duration::from_secs(14),
        "took a live lease: {takeover:?}"
    );
    // The network comes back after 60 s: the cut-off replica's held requests land (its
    // renewal is refused: the Lease changed), and it follows.
    tokio::time::sleep_until(cut + Duration::from_secs(60)).await;
    a.leading_since.borrow_and_update();
    a.cut.send_replace(false);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(
        !a.leading_since.has_changed().expect("running"),
        "the replica cut off took the lease back"
    );
    assert!(!a.fence.is_open());
    let lease = sim
        .get(
            &kronjob_apisim::Resource::leases(),
            Some("kronjob-system"),
            "kronjob-leader",
        )
        .expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    b.shutdown.cancel();
    a.shutdown.cancel();
}
