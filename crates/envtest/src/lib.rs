//! A real Kubernetes control plane for tests: etcd, kube-apiserver and, optionally,
//! kube-controller-manager, started from the folder named by `KUBEBUILDER_ASSETS` (the layout
//! of controller-runtime's envtest: `setup-envtest use 1.34.x -p path` prints one) on free
//! loopback ports, and stopped when dropped.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kronjob_envtest::Error> {
//! let Some(assets) = kronjob_envtest::Assets::from_env()? else { return Ok(()) };
//! let cluster = kronjob_envtest::ControlPlane::start(&assets, Default::default()).await?;
//! let client = cluster.client().await?;
//! # Ok(()) }
//! ```
//!
//! The API server authenticates a static admin token (`system:masters`) and authorizes with
//! RBAC, so tests can also act as a ServiceAccount through a token from the TokenRequest API.
//! There is no scheduler and no kubelet: Pods stay Pending unless a test sets their phase, and
//! with the Job controller on, a Job whose Pods a test marks `Succeeded` or `Failed` finishes
//! with its real conditions.

pub mod process;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};

pub use process::Proc;

/// The environment variable naming the folder with the binaries.
pub const ASSETS_VAR: &str = "KUBEBUILDER_ASSETS";

/// The controllers of kube-controller-manager that tests get by default: garbage collection
/// (owner references), namespace deletion, ServiceAccounts and their tokens, and Jobs.
pub const DEFAULT_CONTROLLERS: &[&str] = &[
    "garbagecollector",
    "namespace",
    "serviceaccount",
    "serviceaccount-token",
    "job",
];

/// Why the control plane could not be started or used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `KUBEBUILDER_ASSETS` names a folder without one of the binaries.
    #[error("{ASSETS_VAR}={dir}: no executable {binary} there")]
    MissingBinary {
        /// The folder.
        dir: String,
        /// The binary that is missing.
        binary: &'static str,
    },
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A component did not become ready in time.
    #[error("{component} not ready within {limit:?}; last log lines:\n{log}")]
    NotReady {
        /// Which component.
        component: &'static str,
        /// How long it was given.
        limit: Duration,
        /// The end of its log.
        log: String,
    },
    /// The client could not be built.
    #[error("cannot build a client: {0}")]
    Client(String),
    /// A key could not be generated.
    #[error("cannot generate a key: {0}")]
    Key(#[from] rcgen::Error),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// The folder with `etcd`, `kube-apiserver` and `kube-controller-manager`.
#[derive(Debug, Clone)]
pub struct Assets {
    dir: PathBuf,
}

impl Assets {
    /// The folder `KUBEBUILDER_ASSETS` names; `Ok(None)` when the variable is unset or empty,
    /// an error when the folder lacks a binary.
    pub fn from_env() -> Result<Option<Assets>, Error> {
        match std::env::var_os(ASSETS_VAR) {
            Some(dir) if !dir.is_empty() => Assets::at(PathBuf::from(dir)).map(Some),
            _ => Ok(None),
        }
    }

    /// The binaries in `dir` (`etcd` and `kube-apiserver` are required; a missing
    /// `kube-controller-manager` fails only the control planes that ask for controllers).
    pub fn at(dir: PathBuf) -> Result<Assets, Error> {
        for binary in ["etcd", "kube-apiserver"] {
            if !is_executable(&dir.join(binary)) {
                return Err(Error::MissingBinary {
                    dir: dir.display().to_string(),
                    binary,
                });
            }
        }
        Ok(Assets { dir })
    }

    /// The path of `binary` in the folder.
    pub fn binary(&self, binary: &str) -> PathBuf {
        self.dir.join(binary)
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What to start.
#[derive(Debug, Clone)]
pub struct Options {
    /// kube-controller-manager's `--controllers`; empty: no controller manager.
    pub controllers: Vec<String>,
    /// Extra kube-apiserver flags.
    pub apiserver_args: Vec<String>,
    /// How long each component may take to become ready.
    pub ready_within: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            controllers: DEFAULT_CONTROLLERS.iter().map(|c| c.to_string()).collect(),
            apiserver_args: Vec::new(),
            ready_within: Duration::from_secs(90),
        }
    }
}

/// A running etcd, kube-apiserver and (with controllers) kube-controller-manager, in a
/// scratch folder that is removed when dropped (kept, and printed, when the thread is
/// panicking or `ENVTEST_KEEP` is set).
#[derive(Debug)]
pub struct ControlPlane {
    assets: Assets,
    options: Options,
    dir: PathBuf,
    api_port: u16,
    etcd_url: String,
    etcd_peer_port: u16,
    token: String,
    kubeconfig: PathBuf,
    // Stopped in reverse order of start: controllers, API server, etcd.
    controllers: Option<Proc>,
    apiserver: Option<Proc>,
    etcd: Option<Proc>,
}

impl ControlPlane {
    /// Start etcd, then the API server (waiting for `/readyz`), then the controller manager.
    pub async fn start(assets: &Assets, options: Options) -> Result<ControlPlane, Error> {
        let dir = scratch_dir()?;
        let key = rcgen::KeyPair::generate()?;
        std::fs::write(dir.join("sa.key"), key.serialize_pem()).map_err(io("write sa.key"))?;
        std::fs::write(dir.join("sa.pub"), key.public_key_pem()).map_err(io("write sa.pub"))?;
        let token = format!("admin-{}", random_suffix());
        std::fs::write(
            dir.join("tokens.csv"),
            format!("{token},admin,1,\"system:masters\"\n"),
        )
        .map_err(io("write tokens.csv"))?;
        let (etcd_port, peer_port, api_port) = (free_port()?, free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let mut plane = ControlPlane {
            assets: assets.clone(),
            options,
            kubeconfig: dir.join("kubeconfig"),
            dir,
            api_port,
            etcd_url,
            etcd_peer_port: peer_port,
            token,
            controllers: None,
            apiserver: None,
            etcd: None,
        };
        plane.start_etcd().await?;
        plane.start_apiserver().await?;
        if !plane.options.controllers.is_empty() {
            plane.start_controllers()?;
        }
        Ok(plane)
    }

    /// Start etcd (again, after [`ControlPlane::kill_etcd`]) on the same ports with the same data,
    /// and wait until it accepts connections.
    pub async fn start_etcd(&mut self) -> Result<(), Error> {
        let peer = format!("http://127.0.0.1:{}", self.etcd_peer_port);
        let args = vec![
            format!("--data-dir={}", self.dir.join("etcd").display()),
            format!("--listen-client-urls={}", self.etcd_url),
            format!("--advertise-client-urls={}", self.etcd_url),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster=default={peer}"),
            // Tests make many objects: compact old revisions instead of filling the backend.
            "--auto-compaction-mode=revision".into(),
            "--auto-compaction-retention=10000".into(),
            "--quota-backend-bytes=8589934592".into(),
        ];
        let log = self.dir.join("etcd.log");
        let proc = Proc::start("etcd", &self.assets.binary("etcd"), &args, &log)
            .map_err(io("start etcd"))?;
        let port = self
            .etcd_url
            .rsplit(':')
            .next()
            .unwrap_or_default()
            .to_string();
        self.etcd = Some(proc);
        let limit = self.options.ready_within;
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(Error::NotReady {
            component: "etcd",
            limit,
            log: process::tail(&log, 20),
        })
    }

    /// Start the API server (again, after [`ControlPlane::stop_apiserver`]) on the same port
    /// with the same certificates and etcd, and wait until it answers `/readyz`.
    pub async fn start_apiserver(&mut self) -> Result<(), Error> {
        let dir = &self.dir;
        let mut args = vec![
            format!("--etcd-servers={}", self.etcd_url),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", self.api_port),
            format!("--cert-dir={}", dir.join("certs").display()),
            format!("--token-auth-file={}", dir.join("tokens.csv").display()),
            "--authorization-mode=Node,RBAC".into(),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            format!("--service-account-key-file={}", dir.join("sa.pub").display()),
            format!(
                "--service-account-signing-key-file={}",
                dir.join("sa.key").display()
            ),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            "--enable-admission-plugins=NamespaceLifecycle,ServiceAccount,MutatingAdmissionWebhook,ValidatingAdmissionWebhook".into(),
        ];
        args.extend(self.options.apiserver_args.iter().cloned());
        let log = dir.join("kube-apiserver.log");
        let proc = Proc::start(
            "kube-apiserver",
            &self.assets.binary("kube-apiserver"),
            &args,
            &log,
        )
        .map_err(io("start kube-apiserver"))?;
        self.apiserver = Some(proc);
        self.wait_apiserver_ready().await
    }

    async fn wait_apiserver_ready(&mut self) -> Result<(), Error> {
        let limit = self.options.ready_within;
        let deadline = Instant::now() + limit;
        let cert = self.dir.join("certs").join("apiserver.crt");
        while Instant::now() < deadline {
            if cert.exists() {
                self.write_admin_kubeconfig()?;
                if let Ok(client) = self.client().await {
                    let ready = http::Request::get("/readyz")
                        .body(Vec::new())
                        .map_err(|e| Error::Client(e.to_string()))?;
                    if client.request_text(ready).await.is_ok_and(|t| t == "ok") {
                        return Ok(());
                    }
                }
            }
            if self.apiserver.as_mut().is_some_and(|p| !p.running()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(Error::NotReady {
            component: "kube-apiserver",
            limit,
            log: process::tail(&self.dir.join("kube-apiserver.log"), 20),
        })
    }

    fn start_controllers(&mut self) -> Result<(), Error> {
        let binary = self.assets.binary("kube-controller-manager");
        if !is_executable(&binary) {
            return Err(Error::MissingBinary {
                dir: self.assets.dir.display().to_string(),
                binary: "kube-controller-manager",
            });
        }
        let kubeconfig = self.kubeconfig.display().to_string();
        let args = vec![
            format!("--kubeconfig={kubeconfig}"),
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
            format!("--controllers={}", self.options.controllers.join(",")),
            format!(
                "--service-account-private-key-file={}",
                self.dir.join("sa.key").display()
            ),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()?),
            "--leader-elect=false".into(),
            // Finished Jobs' Pods are deleted by the garbage collector with their Job; Jobs are
            // synced as fast as tests create them.
            "--concurrent-job-syncs=20".into(),
        ];
        let log = self.dir.join("kube-controller-manager.log");
        let proc = Proc::start("kube-controller-manager", &binary, &args, &log)
            .map_err(io("start kube-controller-manager"))?;
        self.controllers = Some(proc);
        Ok(())
    }

    /// Kill the API server (SIGKILL, as a crash); etcd and the controller manager keep running.
    pub fn kill_apiserver(&mut self) {
        if let Some(mut p) = self.apiserver.take() {
            p.kill();
        }
    }

    /// Stop the API server as a rollout does: SIGTERM, then wait up to `limit` for it to exit
    /// (it is killed after that). Started with `--shutdown-delay-duration` it first keeps
    /// serving while `/readyz` fails, and with `--shutdown-send-retry-after=true` it then
    /// answers new requests 429 with `Retry-After: 5` until its in-flight requests are done.
    /// The exit status, `None` if it had to be killed.
    pub async fn stop_apiserver(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let mut proc = self.apiserver.take()?;
        process::signal(proc.pid(), libc::SIGTERM);
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = proc.exited() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        proc.kill();
        None
    }

    /// Kill etcd (SIGKILL, as a crash); its data stays for [`ControlPlane::start_etcd`]. The API
    /// server keeps running: its requests fail, its watch caches go stale, and once etcd is
    /// back it relists them.
    pub fn kill_etcd(&mut self) {
        if let Some(mut p) = self.etcd.take() {
            p.kill();
        }
    }

    /// The API server's process, while it runs.
    pub fn apiserver(&mut self) -> Option<&mut Proc> {
        self.apiserver.as_mut()
    }

    /// The admin kubeconfig (a static token in `system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `https://127.0.0.1:PORT`.
    pub fn server(&self) -> String {
        format!("https://127.0.0.1:{}", self.api_port)
    }

    /// The PEM bundle that verifies the API server's certificate.
    pub fn ca_pem(&self) -> Result<String, Error> {
        std::fs::read_to_string(self.dir.join("certs").join("apiserver.crt"))
            .map_err(io("read the API server's certificate"))
    }

    /// The scratch folder (logs, kubeconfig, etcd data).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A client with the admin kubeconfig.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        client_from(&self.kubeconfig).await
    }

    fn write_admin_kubeconfig(&self) -> Result<(), Error> {
        self.write_kubeconfig(&self.kubeconfig, &self.token, "default")
    }

    /// Write a kubeconfig at `path` for this API server, authenticating with `token` (e.g. a
    /// ServiceAccount's, from the TokenRequest API), with `namespace` as its default.
    pub fn write_kubeconfig(&self, path: &Path, token: &str, namespace: &str) -> Result<(), Error> {
        use std::io::Write;
        let ca = self.dir.join("certs").join("apiserver.crt");
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "envtest", "cluster": {
                "server": self.server(),
                "certificate-authority": ca,
            }}],
            "users": [{"name": "user", "user": {"token": token}}],
            "contexts": [{"name": "envtest", "context": {
                "cluster": "envtest", "user": "user", "namespace": namespace,
            }}],
            "current-context": "envtest",
        });
        // Write then rename: a reader never sees half a file.
        let tmp = path.with_extension("tmp");
        let mut file = std::fs::File::create(&tmp).map_err(io("write a kubeconfig"))?;
        file.write_all(config.to_string().as_bytes())
            .map_err(io("write a kubeconfig"))?;
        std::fs::rename(&tmp, path).map_err(io("write a kubeconfig"))
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for proc in [&mut self.controllers, &mut self.apiserver, &mut self.etcd] {
            if let Some(mut p) = proc.take() {
                p.stop(Duration::from_secs(5));
            }
        }
        if std::thread::panicking() || std::env::var_os("ENVTEST_KEEP").is_some() {
            eprintln!("envtest: logs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A client for the kubeconfig at `path`.
pub async fn client_from(path: &Path) -> Result<kube::Client, Error> {
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| Error::Client(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Client(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| Error::Client(e.to_string()))
}

/// A scratch folder in memory when `/dev/shm` exists (etcd syncs every write), else in the
/// system's temporary folder.
fn scratch_dir() -> Result<PathBuf, Error> {
    static N: AtomicU32 = AtomicU32::new(0);
    let base = Path::new("/dev/shm");
    let base = if base.is_dir() {
        base.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!(
        "kronjob-envtest-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(dir.join("certs")).map_err(io("create the scratch folder"))?;
    Ok(dir)
}

/// How many ports below the kernel's ephemeral range [`free_port`] hands out.
const PORTS: u16 = 12_000;

/// A loopback port nobody listens on, not among the last 12,000 this process handed out.
///
/// A port the kernel picks for `127.0.0.1:0` comes from its ephemeral range, the same range every
/// outgoing connection takes its local port from: between this call and the server binding it,
/// one of the many connections a test run opens (to the API server, to etcd, between them) can
/// take it, and the bind fails with "Address already in use". So the port comes from just below
/// that range (`net.ipv4.ip_local_port_range`), which connections never use, starting at a
/// place that differs between processes and moving on each call.
pub fn free_port() -> Result<u16, Error> {
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let below = ephemeral_low().clamp(PORTS + 1024, u16::MAX);
    let first = below - PORTS;
    let start = u32::from_str_radix(&random_suffix(), 16).unwrap_or_default() % u32::from(PORTS);
    let _ = NEXT.compare_exchange(u32::MAX, start, Ordering::Relaxed, Ordering::Relaxed);
    for _ in 0..PORTS {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed) % u32::from(PORTS);
        let port = first + u16::try_from(offset).unwrap_or_default();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io("find a free port"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(io("find a free port"))
}

/// The first port of the kernel's ephemeral range (32768 when it cannot be read).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// A short, practically unique suffix for names.
pub fn random_suffix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let mixed = nanos
        ^ std::process::id().rotate_left(16)
        ^ N.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9);
    format!("{mixed:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_below_the_ephemeral_range_and_never_repeat() {
        let low = ephemeral_low();
        let ports: Vec<u16> = (0..200).map(|_| free_port().expect("a port")).collect();
        let mut seen = std::collections::HashSet::new();
        for port in &ports {
            assert!(
                *port < low && *port >= low.saturating_sub(PORTS),
                "{port} (range from {low})"
            );
            assert!(seen.insert(*port), "{port} handed out twice");
        }
        // Taken by a listener: the next ports go around it.
        let held = TcpListener::bind(("127.0.0.1", ports[199] + 1));
        let next = free_port().expect("a port");
        if held.is_ok() {
            assert_ne!(next, ports[199] + 1);
        }
        assert!(
            TcpListener::bind(("127.0.0.1", next)).is_ok(),
            "{next} binds"
        );
    }

    #[test]
    fn assets_without_binaries_name_the_missing_one() {
        let dir = std::env::temp_dir().join(format!("envtest-empty-{}", random_suffix()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let err = Assets::at(dir.clone()).expect_err("no binaries");
        assert!(err.to_string().contains("no executable etcd"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
