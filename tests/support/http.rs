//! Plain HTTP against a local server, for tests of the whole manager: its probes and metrics.

use std::net::SocketAddr;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// `GET path` on `addr`: the status, the content type and the body.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let request = hyper::Request::get(path)
        .header("host", "localhost")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        content_type,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// A port nothing listens on now, outside the range outgoing connections take theirs from
/// ([`kronjob_envtest::free_port`]).
pub fn free_port() -> u16 {
    kronjob_envtest::free_port().expect("free port")
}
