//! Serves an empty simulator over HTTP and prints a kubeconfig for it.
//!
//! `cargo run -p kronjob-apisim --example serve -- [ADDR] [measured|free]` (default
//! `127.0.0.1:8001`, measured costs), then `kubectl --kubeconfig FILE get jobs -A`.

use kronjob_apisim::{ApiSim, CostModel};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8001".into());
    let cost = match args.next().as_deref() {
        Some("free") => CostModel::free(),
        _ => CostModel::measured(),
    };
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let server = format!("http://{}", listener.local_addr()?);
    println!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: apisim\n  cluster:\n    server: {server}\n\
         contexts:\n- name: apisim\n  context:\n    cluster: apisim\n    user: apisim\n    namespace: default\n\
         current-context: apisim\nusers:\n- name: apisim\n  user: {{}}"
    );
    ApiSim::new(cost)
        .serve_http(listener, std::future::pending())
        .await
}
