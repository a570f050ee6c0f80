//! A whole manager in the test's process: `kronjob run`'s flags, its listeners on free
//! loopback ports, and waiting for it to listen, be ready and stop.

use std::net::SocketAddr;
use std::time::Duration;

use kronjob::manager::{ManagerError, RunArgs};
use kronjob::task::Tasks;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::http::{free_port, get};

#[derive(clap::Parser, Debug)]
struct Run {
    #[command(flatten)]
    args: RunArgs,
}

/// `kronjob run` with `flags` (without `run` itself).
pub fn run_args(flags: &[&str]) -> Result<RunArgs, clap::Error> {
    use clap::Parser;
    Run::try_parse_from(std::iter::once("run").chain(flags.iter().copied())).map(|r| r.args)
}

/// A client of an API server nobody listens on: watches fail and back off.
pub fn unreachable_client() -> kube::Client {
    let url = format!("http://127.0.0.1:{}", free_port());
    kube::Client::try_from(kube::Config::new(url.parse().expect("url"))).expect("client")
}

/// A manager running in this process (see [`Booted::start`]).
#[derive(Debug)]
pub struct Booted {
    /// `/healthz` and `/readyz`.
    pub health: SocketAddr,
    /// `/metrics`.
    pub metrics: SocketAddr,
    /// The admission webhook.
    pub webhook: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ManagerError>>,
}

/// The address `flag` is set to in `flags`, else a free loopback port's, added to `flags`.
fn listen_on(flags: &mut Vec<String>, flag: &str) -> SocketAddr {
    let prefix = format!("{flag}=");
    let set = flags.iter().find_map(|f| f.strip_prefix(&prefix));
    match set {
        Some(addr) => addr.parse().expect("an address"),
        None => {
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            flags.push(format!("{prefix}{addr}"));
            addr
        }
    }
}

impl Booted {
    /// Start `kronjob run` with `flags` (`--flag=value` form for the addresses) on `client`,
    /// each listener on a free loopback port unless `flags` gives its address.
    pub fn start(client: kube::Client, flags: &[&str]) -> Booted {
        Booted::start_listed(client, flags, &Tasks::default())
    }

    /// [`Booted::start`], listing every task the manager runs in `tasks`.
    pub fn start_listed(client: kube::Client, flags: &[&str], tasks: &Tasks) -> Booted {
        let mut flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        let health = listen_on(&mut flags, "--health-addr");
        let metrics = listen_on(&mut flags, "--metrics-addr");
        let webhook = listen_on(&mut flags, "--webhook-addr");
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let args = run_args(&flags).expect("flags parse");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(kronjob::manager::run_listed(
            args,
            client,
            shutdown.clone(),
            tasks.clone(),
        ));
        Booted {
            health,
            metrics,
            webhook,
            shutdown,
            task,
        }
    }

    /// Wait until `addr` accepts connections, for at most 10 s.
    pub async fn listening(&self, addr: SocketAddr) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(tokio::time::Instant::now() < deadline, "{addr} listening");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Wait until `/readyz` answers 200 and `also` holds, for at most 15 s.
    pub async fn ready_and(&self, also: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            if tokio::net::TcpStream::connect(self.health).await.is_ok()
                && get(self.health, "/readyz").await.0 == 200
                && also()
            {
                return;
            }
            assert!(tokio::time::Instant::now() < deadline, "manager ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Wait until `/readyz` answers 200, for at most 15 s.
    pub async fn ready(&self) {
        self.ready_and(|| true).await;
    }

    /// Ask it to stop (as SIGTERM does), without waiting.
    pub fn shut_down(&self) {
        self.shutdown.cancel();
    }

    /// How it ended, within `limit`.
    pub async fn ended(self, limit: Duration) -> Result<(), ManagerError> {
        tokio::time::timeout(limit, self.task)
            .await
            .expect("the manager ends in time")
            .expect("the manager's task")
    }

    /// Stop it and wait, for at most 20 s: how it ended.
    pub async fn stop(self) -> Result<(), ManagerError> {
        self.shut_down();
        self.ended(Duration::from_secs(20)).await
    }
}
