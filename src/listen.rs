//! Listening sockets, bound the same way for every server of the process.
//!
//! The probes, the metrics and the admission webhook bind here, so a taken port fails the start
//! with the address in the message.

use std::net::SocketAddr;

/// A port could not be listened on.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}")]
pub struct BindError {
    /// The address.
    pub addr: SocketAddr,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

/// Bind `addr` for a tokio-driven server (non-blocking).
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, BindError> {
    let err = |source| BindError { addr, source };
    let listener = std::net::TcpListener::bind(addr).map_err(err)?;
    listener.set_nonblocking(true).map_err(err)?;
    Ok(listener)
}

/// Parse a listen address; `:8080` means every interface.
pub fn parse_listen_addr(text: &str) -> Result<SocketAddr, String> {
    let full = if text.starts_with(':') {
        format!("0.0.0.0{text}")
    } else {
        text.to_string()
    };
    full.parse()
        .map_err(|e| format!("invalid address {text:?} (want HOST:PORT or :PORT): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert_eq!(
            parse_listen_addr(":8080"),
            Ok("0.0.0.0:8080".parse().expect("addr"))
        );
        assert_eq!(
            parse_listen_addr("127.0.0.1:9"),
            Ok("127.0.0.1:9".parse().expect("addr"))
        );
        assert!(parse_listen_addr("8080").is_err());
        assert!(parse_listen_addr("nohost:x").is_err());
    }

    #[test]
    fn a_taken_port_names_the_address() {
        let first = bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let addr = first.local_addr().expect("addr");
        let err = bind(addr).expect_err("taken");
        assert_eq!(err.addr, addr);
        assert!(err.to_string().contains(&addr.to_string()));
    }
}
