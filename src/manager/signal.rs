//! SIGTERM and SIGINT: the first starts a graceful shutdown, a second exits at once.

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// A token cancelled on the first SIGTERM or SIGINT. A second signal exits at once.
pub fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        info!("shutdown requested; draining");
        cancel.cancel();
        wait_for_signal().await;
        warn!("second signal; exiting now");
        std::process::exit(130);
    });
    token
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
