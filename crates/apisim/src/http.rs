//! The HTTP/1 front end, for the real binary and kubectl (`server: http://127.0.0.1:PORT`).

use std::future::Future;
use std::io;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::ApiSim;

impl ApiSim {
    /// Serves the simulator over plain HTTP/1.1 on `listener` until `shutdown` completes, then
    /// closes every connection (open watches included). Watch bodies are streamed (chunked).
    pub async fn serve_http(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> io::Result<()> {
        let mut connections = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(accepted) => accepted,
                        Err(e) => {
                            tracing::warn!(error = %e, "apisim: accept failed");
                            continue;
                        }
                    };
                    let sim = self.clone();
                    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                        let sim = sim.clone();
                        async move {
                            let (parts, body) = request.into_parts();
                            let body = body.collect().await.map_err(io::Error::other)?.to_bytes();
                            sim.handle(parts, body).await
                        }
                    });
                    connections.spawn(async move {
                        let connection = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service);
                        if let Err(e) = connection.await {
                            tracing::debug!(%peer, error = %e, "apisim: connection ended");
                        }
                    });
                }
            }
        }
        connections.shutdown().await;
        Ok(())
    }
}
