//! SOCKS5 (RFC 1928) as far as a drop-in crawler proxy needs it: no
//! authentication or username/password (RFC 1929), `CONNECT` to a hostname or an
//! IPv4/IPv6 address. Every read has a byte cap (the protocol's own lengths) and
//! the whole handshake one deadline.

use std::net::{Ipv4Addr, Ipv6Addr};

use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const VERSION: u8 = 5;
const NO_AUTH: u8 = 0x00;
const USER_PASS: u8 = 0x02;
const NO_ACCEPTABLE: u8 = 0xFF;
const CONNECT: u8 = 0x01;

/// SOCKS5 reply codes (RFC 1928 §6).
pub mod reply {
    pub const SUCCEEDED: u8 = 0x00;
    pub const GENERAL_FAILURE: u8 = 0x01;
    pub const NOT_ALLOWED: u8 = 0x02;
    pub const HOST_UNREACHABLE: u8 = 0x04;
    pub const COMMAND_NOT_SUPPORTED: u8 = 0x07;
    pub const ADDRESS_TYPE_NOT_SUPPORTED: u8 = 0x08;
}

/// Where the client asked to go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    /// A hostname as sent, or an IP address as a URL writes it (IPv6 in
    /// brackets, so it is a valid URL host for the rest of the proxy).
    pub host: String,
    pub port: u16,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SocksError {
    #[error("not SOCKS version 5 (first byte {0:#04x})")]
    Version(u8),
    #[error("no acceptable authentication method offered")]
    NoAcceptableMethod,
    #[error("wrong username or password")]
    BadCredentials,
    #[error("too many failed logins from this client: its password was not checked")]
    Throttled,
    #[error("command {0:#04x} is not supported (only CONNECT)")]
    Command(u8),
    #[error("address type {0:#04x} is not supported")]
    AddressType(u8),
    #[error("the hostname is not UTF-8")]
    HostNotUtf8,
    #[error("connection closed during the SOCKS handshake")]
    Closed,
}

/// Username/password pairs the proxy accepts; empty: no authentication.
pub type Users = [(String, String)];

async fn read_exact<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> Result<(), SocksError> {
    r.read_exact(buf)
        .await
        .map(|_| ())
        .map_err(|_| SocksError::Closed)
}

async fn read_u8<R: AsyncRead + Unpin>(r: &mut R) -> Result<u8, SocksError> {
    let mut b = [0u8; 1];
    read_exact(r, &mut b).await?;
    Ok(b[0])
}

/// A failure reply with an unspecified bound address.
pub async fn send_reply<W: AsyncWrite + Unpin>(w: &mut W, code: u8) -> std::io::Result<()> {
    w.write_all(&[VERSION, code, 0, 1, 0, 0, 0, 0, 0, 0])
        .await?;
    w.flush().await
}

/// A client's CONNECT, and the user it authenticated as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connect {
    /// `None` without authentication.
    pub user: Option<String>,
    pub dest: Destination,
}

/// Runs the server side of the handshake up to the CONNECT request. On an error
/// the proper reply has been sent (when the protocol has one) before returning.
/// A password is looked at only if `take_check` (asked once it has been
/// read) grants a check; otherwise (the client has spent its failed logins)
/// it is answered "failure" without being looked at.
pub async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    users: &Users,
    take_check: impl FnOnce() -> bool,
) -> Result<Connect, SocksError> {
    let wanted = if users.is_empty() { NO_AUTH } else { USER_PASS };
    greeting(s, |methods| methods.contains(&wanted).then_some(wanted)).await?;
    let mut user = None;
    if wanted == USER_PASS {
        let (name, pass) = credentials(s).await?;
        if !take_check() {
            let _ = s.write_all(&[1, 1]).await;
            return Err(SocksError::Throttled);
        }
        let found = crate::access::user_of(users, &name, &pass);
        let _ = s.write_all(&[1, if found.is_some() { 0 } else { 1 }]).await;
        match found {
            Some(u) => user = Some(u.clone()),
            None => return Err(SocksError::BadCredentials),
        }
    }
    let dest = request(s).await?;
    Ok(Connect { user, dest })
}

/// The handshake for a client the proxy does not serve (its address is outside
/// `access.allow_from`): whatever method it offers is taken and its
/// credentials are not checked (they do not matter, and an outsider learns
/// nothing of them), then its CONNECT is answered `0x02`, "not allowed by
/// ruleset". Returns where it asked to go, for the log.
pub async fn turn_away<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
) -> Result<Destination, SocksError> {
    let method = greeting(s, |methods| {
        [NO_AUTH, USER_PASS]
            .into_iter()
            .find(|m| methods.contains(m))
    })
    .await?;
    if method == USER_PASS {
        credentials(s).await?;
        s.write_all(&[1, 0]).await.map_err(|_| SocksError::Closed)?;
    }
    let dest = request(s).await?;
    let _ = send_reply(s, reply::NOT_ALLOWED).await;
    Ok(dest)
}

/// Greeting: VER NMETHODS METHODS…, answered with the method `choose` picks.
async fn greeting<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    choose: impl Fn(&[u8]) -> Option<u8>,
) -> Result<u8, SocksError> {
    let version = read_u8(s).await?;
    if version != VERSION {
        return Err(SocksError::Version(version));
    }
    let n = read_u8(s).await? as usize;
    let mut methods = vec![0u8; n];
    read_exact(s, &mut methods).await?;
    let Some(method) = choose(&methods) else {
        let _ = s.write_all(&[VERSION, NO_ACCEPTABLE]).await;
        return Err(SocksError::NoAcceptableMethod);
    };
    s.write_all(&[VERSION, method])
        .await
        .map_err(|_| SocksError::Closed)?;
    Ok(method)
}

/// RFC 1929: VER(1) ULEN UNAME PLEN PASSWD, not yet answered.
async fn credentials<S: AsyncRead + Unpin>(s: &mut S) -> Result<(Vec<u8>, Vec<u8>), SocksError> {
    let _sub_version = read_u8(s).await?;
    let ulen = read_u8(s).await? as usize;
    let mut user = vec![0u8; ulen];
    read_exact(s, &mut user).await?;
    let plen = read_u8(s).await? as usize;
    let mut pass = vec![0u8; plen];
    read_exact(s, &mut pass).await?;
    Ok((user, pass))
}

/// Request: VER CMD RSV ATYP DST.ADDR DST.PORT; only CONNECT is served.
async fn request<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> Result<Destination, SocksError> {
    let mut head = [0u8; 4];
    read_exact(s, &mut head).await?;
    if head[0] != VERSION {
        return Err(SocksError::Version(head[0]));
    }
    let host = match head[3] {
        1 => {
            let mut a = [0u8; 4];
            read_exact(s, &mut a).await?;
            Ipv4Addr::from(a).to_string()
        }
        3 => {
            let len = read_u8(s).await? as usize;
            let mut name = vec![0u8; len];
            read_exact(s, &mut name).await?;
            match String::from_utf8(name) {
                Ok(n) => n,
                Err(_) => {
                    let _ = send_reply(s, reply::GENERAL_FAILURE).await;
                    return Err(SocksError::HostNotUtf8);
                }
            }
        }
        4 => {
            let mut a = [0u8; 16];
            read_exact(s, &mut a).await?;
            format!("[{}]", Ipv6Addr::from(a))
        }
        other => {
            let _ = send_reply(s, reply::ADDRESS_TYPE_NOT_SUPPORTED).await;
            return Err(SocksError::AddressType(other));
        }
    };
    let mut port = [0u8; 2];
    read_exact(s, &mut port).await?;
    if head[1] != CONNECT {
        let _ = send_reply(s, reply::COMMAND_NOT_SUPPORTED).await;
        return Err(SocksError::Command(head[1]));
    }
    Ok(Destination {
        host,
        port: u16::from_be_bytes(port),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the server side against `client_bytes`; returns the result and what
    /// the server wrote.
    async fn run(client_bytes: &[u8], users: &Users) -> (Result<Destination, SocksError>, Vec<u8>) {
        let (result, out) = run_connect(client_bytes, users).await;
        (result.map(|c| c.dest), out)
    }

    async fn run_connect(
        client_bytes: &[u8],
        users: &Users,
    ) -> (Result<Connect, SocksError>, Vec<u8>) {
        let (mut client, mut server) = tokio::io::duplex(1024);
        client.write_all(client_bytes).await.unwrap();
        drop(client.shutdown().await);
        let result = handshake(&mut server, users, || true).await;
        drop(server);
        let mut written = Vec::new();
        client.read_to_end(&mut written).await.unwrap();
        (result, written)
    }

    fn connect_domain(name: &str, port: u16) -> Vec<u8> {
        let mut v = vec![5, 1, 0, 3, name.len() as u8];
        v.extend_from_slice(name.as_bytes());
        v.extend_from_slice(&port.to_be_bytes());
        v
    }

    #[tokio::test]
    async fn connect_by_name_v4_and_v6() {
        let mut msg = vec![5, 1, 0];
        msg.extend(connect_domain("example.org", 1965));
        let (r, out) = run(&msg, &[]).await;
        assert_eq!(
            r,
            Ok(Destination {
                host: "example.org".into(),
                port: 1965
            })
        );
        assert_eq!(out, [5, 0]);

        let (r, _) = run(&[5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 70], &[]).await;
        assert_eq!(
            r,
            Ok(Destination {
                host: "127.0.0.1".into(),
                port: 70
            })
        );

        let mut v6 = vec![5, 1, 0, 5, 1, 0, 4];
        v6.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
        v6.extend_from_slice(&7070u16.to_be_bytes());
        let (r, _) = run(&v6, &[]).await;
        assert_eq!(
            r,
            Ok(Destination {
                host: "[::1]".into(),
                port: 7070
            })
        );
    }

    #[tokio::test]
    async fn username_and_password() {
        let users = [("bot".to_string(), "s3cret".to_string())];
        let mut msg = vec![5, 2, 0, 2, 1, 3];
        msg.extend_from_slice(b"bot");
        msg.push(6);
        msg.extend_from_slice(b"s3cret");
        msg.extend(connect_domain("h", 70));
        let (r, out) = run_connect(&msg, &users).await;
        let connect = r.unwrap();
        assert_eq!(connect.dest.host, "h");
        assert_eq!(connect.user.as_deref(), Some("bot"));
        assert_eq!(out, [5, 2, 1, 0]);

        let mut wrong = vec![5, 1, 2, 1, 3];
        wrong.extend_from_slice(b"bot");
        wrong.push(5);
        wrong.extend_from_slice(b"wrong");
        let (r, out) = run(&wrong, &users).await;
        assert_eq!(r, Err(SocksError::BadCredentials));
        assert_eq!(out, [5, 2, 1, 1]);

        // Offering only no-auth when a password is required.
        let (r, out) = run(&[5, 1, 0], &users).await;
        assert_eq!(r, Err(SocksError::NoAcceptableMethod));
        assert_eq!(out, [5, 0xFF]);
    }

    #[tokio::test]
    async fn bad_greetings_and_requests_are_answered() {
        let (r, out) = run(&[4, 1, 0], &[]).await;
        assert_eq!(r, Err(SocksError::Version(4)));
        assert!(out.is_empty(), "SOCKS4 has no SOCKS5 reply");

        let (r, out) = run(&[5, 1, 2], &[]).await;
        assert_eq!(r, Err(SocksError::NoAcceptableMethod));
        assert_eq!(out, [5, 0xFF]);

        // BIND and UDP ASSOCIATE: command not supported.
        for cmd in [2u8, 3] {
            let (r, out) = run(&[5, 1, 0, 5, cmd, 0, 1, 127, 0, 0, 1, 0, 70], &[]).await;
            assert_eq!(r, Err(SocksError::Command(cmd)));
            assert_eq!(out[2..4], [5, reply::COMMAND_NOT_SUPPORTED]);
        }
        let (r, out) = run(&[5, 1, 0, 5, 1, 0, 9], &[]).await;
        assert_eq!(r, Err(SocksError::AddressType(9)));
        assert_eq!(out[2..4], [5, reply::ADDRESS_TYPE_NOT_SUPPORTED]);

        let (r, _) = run(&[5, 1], &[]).await;
        assert_eq!(r, Err(SocksError::Closed));
    }

    /// An outsider is told "not allowed by ruleset" whatever it offers, and
    /// its password is never checked.
    #[tokio::test]
    async fn outsiders_get_not_allowed() {
        async fn away(bytes: &[u8]) -> (Result<Destination, SocksError>, Vec<u8>) {
            let (mut client, mut server) = tokio::io::duplex(1024);
            client.write_all(bytes).await.unwrap();
            drop(client.shutdown().await);
            let result = turn_away(&mut server).await;
            drop(server);
            let mut written = Vec::new();
            client.read_to_end(&mut written).await.unwrap();
            (result, written)
        }
        let mut no_auth = vec![5, 1, 0];
        no_auth.extend(connect_domain("h", 70));
        let (r, out) = away(&no_auth).await;
        assert_eq!(r.map(|d| d.host), Ok("h".into()));
        assert_eq!(out[..2], [5, 0]);
        assert_eq!(out[2..4], [5, reply::NOT_ALLOWED]);

        let mut password = vec![5, 1, 2, 1, 1, b'x', 1, b'y'];
        password.extend(connect_domain("h", 70));
        let (r, out) = away(&password).await;
        assert!(r.is_ok());
        assert_eq!(out[..4], [5, 2, 1, 0]);
        assert_eq!(out[4..6], [5, reply::NOT_ALLOWED]);

        let (r, out) = away(&[5, 1, 0x80]).await;
        assert_eq!(r, Err(SocksError::NoAcceptableMethod));
        assert_eq!(out, [5, 0xFF]);
    }
}
