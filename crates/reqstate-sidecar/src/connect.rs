//! A client of a running sidecar, for the commands that ask one
//! (`reqstate mint|verify|consume|seal|unseal|keys list|keys status
//! --connect`, `reqstate health`): a tonic channel over `tcp:HOST:PORT` (with
//! TLS if asked) or `unix:PATH` (the forms of `serve --listen`), and an
//! optional bearer token read from a file in the format of `serve
//! --auth-token-file`.
//!
//! The token is the fleet's caller credential, and with it a signing
//! oracle: it is never sent in plaintext to another host (a `tcp:` address
//! without `--tls-ca` must resolve to loopback addresses only, unless
//! `--insecure-send-token`), its header is marked sensitive (never
//! HPACK-indexed, hidden from `Debug`), and its file is read with the
//! server's guards (no FIFO waited on, no endless file read).

use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity, Uri};
use zeroize::Zeroizing;

use crate::cli::TlsArgs;
use crate::config::ListenAddr;

/// Why a sidecar could not be reached or asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectError(String);

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConnectError {}

impl ConnectError {
    /// An error with this message (one line for people; one that names a
    /// flag first, `--tls-ca FILE: …`, is an error in the flags).
    pub fn new(message: impl Into<String>) -> Self {
        ConnectError(message.into())
    }

    /// Whether the error is in the flags (a bad address, an unreadable
    /// token or TLS file), not in reaching or asking the sidecar.
    pub fn is_usage(&self) -> bool {
        self.0.starts_with("--")
    }
}

/// Where and how to reach a sidecar.
#[derive(Debug, Clone)]
pub struct Target {
    /// `unix:PATH` or `tcp:HOST:PORT`.
    pub address: String,
    /// A file whose first token (blank lines and `#` comments skipped) is
    /// sent as `authorization: Bearer <token>`.
    pub auth_token_file: Option<PathBuf>,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// TLS for a `tcp:` address (`--tls-ca` …); none: plain HTTP/2.
    pub tls: TlsArgs,
    /// `--insecure-send-token`: send the bearer token over plaintext TCP to
    /// a host that is not loopback (refused otherwise).
    pub insecure_send_token: bool,
}

impl Target {
    /// A target with no token, no TLS and a 5-second timeout.
    pub fn new(address: impl Into<String>) -> Self {
        Target {
            address: address.into(),
            auth_token_file: None,
            connect_timeout: Duration::from_secs(5),
            tls: TlsArgs::default(),
            insecure_send_token: false,
        }
    }

    /// Sends the bearer token over plaintext TCP to a host that is not
    /// loopback too (`--insecure-send-token`).
    pub fn insecure_send_token(mut self, allowed: bool) -> Self {
        self.insecure_send_token = allowed;
        self
    }

    /// Connects with these TLS settings.
    pub fn tls(mut self, tls: TlsArgs) -> Self {
        self.tls = tls;
        self
    }

    /// Gives up connecting after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sends the first token of this file on every call.
    pub fn auth_token_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.auth_token_file = Some(path.into());
        self
    }
}

/// A connected sidecar: its client and the bearer token to send.
#[derive(Debug, Clone)]
pub struct Connection {
    client: RequestStateClient<Channel>,
    authorization: Option<MetadataValue<Ascii>>,
}

/// The endpoint URI of a Unix-socket channel. The connector dials the
/// socket; the URI only gives the HTTP/2 `:authority` sent, `localhost`, a
/// well-formed one, so that a client never depends on the vendored h2's
/// tolerance of malformed authorities (vendor/h2/PATCH.md) and works
/// against an unpatched server.
const UNIX_ENDPOINT: &str = "http://localhost";

/// A channel to a gRPC server on the Unix socket at `path` (for
/// `--connect unix:…` and `reqstate health`).
pub(crate) async fn unix_channel(path: PathBuf) -> Result<Channel, tonic::transport::Error> {
    Endpoint::from_static(UNIX_ENDPOINT)
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?))
            }
        }))
        .await
}

fn read(flag: &str, path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
}

/// The TLS settings of a TCP client, if any (`host`: the address's host,
/// the server name expected by default).
fn tls_config(args: &TlsArgs, host: &str) -> Result<Option<ClientTlsConfig>, String> {
    let Some(ca) = &args.tls_ca else {
        return Ok(None);
    };
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read("--tls-ca", ca)?))
        .domain_name(args.tls_server_name.clone().unwrap_or_else(|| {
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned()
        }));
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        tls = tls.identity(Identity::from_pem(
            read("--tls-cert", cert)?,
            read("--tls-key", key)?,
        ));
    }
    Ok(Some(tls))
}

/// The host part of `tcp:HOST:PORT`, as written (the TLS server name by
/// default).
pub(crate) fn tcp_host(text: &str) -> &str {
    let host_port = text.strip_prefix("tcp:").unwrap_or(text);
    host_port
        .rsplit_once(':')
        .map_or(host_port, |(host, _)| host)
}

/// A channel to `target` (written `text`), over TLS when `tls` says so
/// (`tcp:` only). The error is one line for people.
pub(crate) async fn channel(
    target: &ListenAddr,
    text: &str,
    tls: &TlsArgs,
) -> Result<Channel, String> {
    match target {
        ListenAddr::Unix(path) => {
            if tls.any() {
                return Err(
                "--tls-ca, --tls-cert, --tls-key and --tls-server-name apply to tcp: addresses only"
                    .into(),
            );
            }
            unix_channel(path.clone())
                .await
                .map_err(|e| cannot_connect(&e, text))
        }
        ListenAddr::Tcp(addr) => {
            let tls = tls_config(tls, tcp_host(text))?;
            let scheme = if tls.is_some() { "https" } else { "http" };
            let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
                .map_err(|e| format!("{text}: {e}"))?;
            if let Some(tls) = tls {
                endpoint = endpoint
                    .tls_config(tls)
                    .map_err(|e| format!("TLS settings: {}", error_chain(&e)))?;
            }
            endpoint
                .connect()
                .await
                .map_err(|e| cannot_connect(&e, text))
        }
    }
}

/// Why a connection failed, with the next step where the OS's error says
/// nobody is there (issue 40 item 9).
fn cannot_connect(e: &(dyn std::error::Error + 'static), text: &str) -> String {
    let mut source = Some(e);
    while let Some(error) = source {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            let nobody = match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused",
                std::io::ErrorKind::NotFound => "there is no socket at that path",
                _ => break,
            };
            return format!(
                "cannot connect: {nobody}: no sidecar is listening at {text} (start one with \
                 `reqstate serve --dev --listen {text}`, or give the address it listens on with \
                 --connect or REQSTATE_CONNECT)"
            );
        }
        source = error.source();
    }
    format!("cannot connect: {}", error_chain(e))
}

/// A failed call, one line for people: the code's name as gRPC spells it
/// (`UNAUTHENTICATED`) and the server's message.
pub fn status_text(status: &tonic::Status) -> String {
    let code = match status.code() {
        tonic::Code::Ok => "OK",
        tonic::Code::Cancelled => "CANCELLED",
        tonic::Code::Unknown => "UNKNOWN",
        tonic::Code::InvalidArgument => "INVALID_ARGUMENT",
        tonic::Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        tonic::Code::NotFound => "NOT_FOUND",
        tonic::Code::AlreadyExists => "ALREADY_EXISTS",
        tonic::Code::PermissionDenied => "PERMISSION_DENIED",
        tonic::Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        tonic::Code::FailedPrecondition => "FAILED_PRECONDITION",
        tonic::Code::Aborted => "ABORTED",
        tonic::Code::OutOfRange => "OUT_OF_RANGE",
        tonic::Code::Unimplemented => "UNIMPLEMENTED",
        tonic::Code::Internal => "INTERNAL",
        tonic::Code::Unavailable => "UNAVAILABLE",
        tonic::Code::DataLoss => "DATA_LOSS",
        tonic::Code::Unauthenticated => "UNAUTHENTICATED",
    };
    if status.message().is_empty() {
        code.to_owned()
    } else {
        format!("{code}: {}", status.message())
    }
}

/// Reads the first token of a bearer-token file (one per line, blank lines
/// and `#` comments skipped), with the guards the server applies to its own
/// token file ([`reqstate_keyring_file::read_protected_file`]): opened
/// without blocking (a FIFO is refused, not waited on past `--timeout-ms`), a
/// regular file of at most [`crate::bearer::MAX_FILE_LEN`] bytes (never
/// `/dev/zero` read until memory runs out), owned by this user or root,
/// writable by no one else, on a path no other user can replace. Group or
/// others may read it: a token shared with the callers' group (a Kubernetes
/// Secret mounted 0440) is how a client gets the fleet's token, and the
/// client has no `--allow-insecure-keyring-permissions` to say so.
pub fn read_bearer_token(path: &Path) -> Result<Zeroizing<String>, ConnectError> {
    let refused = |what: String| {
        ConnectError(format!(
            "--auth-token-file {}: {what}; give a regular file of at most {} bytes holding \
             the token (the format of `serve --auth-token-file`)",
            path.display(),
            crate::bearer::MAX_FILE_LEN
        ))
    };
    let bytes = reqstate_keyring_file::read_protected_file(
        path,
        reqstate_keyring_file::KeyringPermissions::AllowGroupOrOtherReadable,
        crate::bearer::MAX_FILE_LEN,
    )
    .map_err(|e| match e {
        reqstate_keyring_file::KeyringLoadError::NotAKeyringFile {
            what: "larger than its limit",
            ..
        } => refused(format!("larger than {} bytes", crate::bearer::MAX_FILE_LEN)),
        e => refused(e.describe_as("bearer token file")),
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|_| refused("not UTF-8 text".into()))?;
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|token| Zeroizing::new(token.to_owned()))
        .ok_or_else(|| {
            ConnectError(format!(
                "--auth-token-file {}: no token in the file",
                path.display()
            ))
        })
}

/// The `authorization` value of `token`, marked sensitive: h2 never adds
/// it to the HPACK table (where a later header could probe it by
/// compression) and `Debug` prints `Sensitive`, not the token.
fn authorization_value(token: &str) -> Option<MetadataValue<Ascii>> {
    let header = Zeroizing::new(format!("Bearer {token}"));
    let mut value = MetadataValue::try_from(header.as_str()).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Whether `ip` is a loopback address (`::ffff:127.0.0.1` included).
fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// Refuses to send a bearer token in plaintext to a host that is not
/// loopback: `connected` is the address the channel dials, and every
/// address `text`'s host resolves to must be loopback too (`localhost` may
/// resolve to another host on a misconfigured machine).
fn check_plaintext_token(text: &str, connected: SocketAddr) -> Result<(), ConnectError> {
    let host_port = text.strip_prefix("tcp:").unwrap_or(text);
    let resolved: Vec<SocketAddr> = host_port
        .to_socket_addrs()
        .map(Iterator::collect)
        .unwrap_or_default();
    let outside = std::iter::once(connected)
        .chain(resolved)
        .find(|addr| !is_loopback(addr.ip()));
    match outside {
        None => Ok(()),
        Some(addr) => Err(ConnectError(format!(
            "--auth-token-file with --connect {text}: {} is not a loopback address and the \
             connection is plaintext, so the bearer token would cross the network readable \
             by anyone on the path. Give --tls-ca FILE (TLS), connect over a Unix socket \
             (--connect unix:PATH), or give --insecure-send-token if the network is trusted \
             entirely",
            addr.ip()
        ))),
    }
}

/// An error and its sources, one line (`reqstate health` uses it too).
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Layers often repeat their inner error's message word for word.
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

impl Connection {
    /// Connects to `target` (within its timeout) and reads its token file.
    pub async fn open(target: &Target) -> Result<Connection, ConnectError> {
        let address = &target.address;
        let parsed = ListenAddr::parse_flag("--connect", address)
            .map_err(|e| ConnectError(e.to_string()))?;
        let authorization = match &target.auth_token_file {
            Some(path) => {
                // Before the file is read and before anything connects: a
                // refused target never sees a byte.
                if let ListenAddr::Tcp(connected) = &parsed
                    && target.tls.tls_ca.is_none()
                    && !target.insecure_send_token
                {
                    check_plaintext_token(address, *connected)?;
                }
                let token = read_bearer_token(path)?;
                Some(authorization_value(&token).ok_or_else(|| {
                    ConnectError(format!(
                        "--auth-token-file {}: the token is not a valid header value \
                         (visible ASCII without spaces)",
                        path.display()
                    ))
                })?)
            }
            None => None,
        };
        let connecting = async {
            channel(&parsed, address, &target.tls).await.map_err(|e| {
                if e.starts_with("--") {
                    ConnectError(e)
                } else {
                    ConnectError(format!("{address}: {e}"))
                }
            })
        };
        let channel = tokio::time::timeout(target.connect_timeout, connecting)
            .await
            .map_err(|_| {
                ConnectError(format!(
                    "{address}: no connection within {} ms",
                    target.connect_timeout.as_millis()
                ))
            })??;
        Ok(Connection {
            client: RequestStateClient::new(channel),
            authorization,
        })
    }

    /// A request carrying the bearer token, if any.
    pub fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(value) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        request
    }

    /// The client (cheap to clone; calls share the connection).
    pub fn client(&self) -> RequestStateClient<Channel> {
        self.client.clone()
    }

    /// Calls `ListKeys`.
    pub async fn list_keys(&self) -> Result<reqstate_proto::v1::ListKeysResponse, ConnectError> {
        self.client()
            .list_keys(self.request(reqstate_proto::v1::ListKeysRequest {}))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| {
                // As the other client commands say it (issue 40 item 12).
                let hint = if status.code() == tonic::Code::Unauthenticated
                    && self.authorization.is_none()
                {
                    " (the sidecar needs its bearer token: --auth-token-file FILE)"
                } else {
                    ""
                };
                ConnectError(format!("ListKeys failed: {}{hint}", status_text(&status)))
            })
    }
}

/// Runs `ask` against `target` on a runtime of its own, for the synchronous
/// commands.
pub fn block_on<T, F, Fut>(target: &Target, ask: F) -> Result<T, ConnectError>
where
    F: FnOnce(Connection) -> Fut,
    Fut: std::future::Future<Output = Result<T, ConnectError>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ConnectError(format!("cannot start a runtime: {e}")))?;
    let timeout = target.connect_timeout;
    runtime.block_on(async {
        // The whole exchange, connecting included, within the timeout.
        tokio::time::timeout(timeout, async {
            let connection = Connection::open(target).await?;
            ask(connection).await
        })
        .await
        .unwrap_or_else(|_| {
            Err(ConnectError(format!(
                "{}: no answer within {} ms",
                target.address,
                timeout.as_millis()
            )))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_token_of_the_file_is_sent() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("token");
        std::fs::write(&path, "# the fleet's token\n\n  abc123  \nold\n")?;
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        assert_eq!(read_bearer_token(&path)?.as_str(), "abc123");
        std::fs::write(&path, "# nothing\n\n")?;
        assert!(read_bearer_token(&path).is_err());
        Ok(())
    }

    #[test]
    fn a_bad_address_is_a_clear_error() {
        let e = block_on(&Target::new("http://x"), |c| async move {
            c.list_keys().await.map(|_| ())
        });
        assert!(
            e.as_ref().is_err_and(
                |e| e.to_string().contains("unix:PATH") || e.to_string().contains("tcp:")
            ),
            "{e:?}"
        );
        let e = block_on(
            &Target::new("unix:/nonexistent/reqstate.sock"),
            |c| async move { c.list_keys().await.map(|_| ()) },
        );
        assert!(
            e.as_ref()
                .is_err_and(|e| e.to_string().contains("cannot connect")),
            "{e:?}"
        );
    }

    /// Security review round 4, finding 2: the header is never
    /// HPACK-indexed and `Debug` does not show the token.
    #[test]
    fn the_authorization_value_is_sensitive() {
        let value = authorization_value("s3cret-token").expect("a valid header value");
        assert!(value.is_sensitive());
        assert_eq!(value.to_str().ok(), Some("Bearer s3cret-token"));
        assert!(!format!("{value:?}").contains("s3cret"), "{value:?}");
        assert!(authorization_value("two words\n").is_none());
    }

    /// Security review round 4, finding 2: a plaintext token goes to
    /// loopback only, whatever the host resolves to.
    #[test]
    fn a_plaintext_token_goes_to_loopback_only() {
        let v4: SocketAddr = "127.0.0.1:50051".parse().expect("addr");
        let v6: SocketAddr = "[::1]:50051".parse().expect("addr");
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:50051".parse().expect("addr");
        let outside: SocketAddr = "192.0.2.1:50051".parse().expect("addr");
        assert!(check_plaintext_token("tcp:127.0.0.1:50051", v4).is_ok());
        assert!(check_plaintext_token("tcp:[::1]:50051", v6).is_ok());
        assert!(check_plaintext_token("tcp:[::ffff:127.0.0.1]:50051", mapped).is_ok());
        let e = check_plaintext_token("tcp:192.0.2.1:50051", outside).expect_err("refused");
        assert!(e.is_usage(), "{e}");
        for hint in [
            "192.0.2.1",
            "--tls-ca",
            "unix:PATH",
            "--insecure-send-token",
        ] {
            assert!(e.to_string().contains(hint), "{hint}: {e}");
        }
        // The address dialled counts even if the name resolves elsewhere.
        assert!(check_plaintext_token("tcp:127.0.0.1:50051", outside).is_err());
        assert!(
            check_plaintext_token("tcp:0.0.0.0:50051", "0.0.0.0:50051".parse().expect("addr"))
                .is_err()
        );
    }

    /// Security review round 4: the client reads its token file with the
    /// server's guards, promptly.
    #[test]
    fn a_token_file_that_is_not_a_small_regular_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success(), "mkfifo");
        let e = read_bearer_token(&fifo).expect_err("a FIFO");
        assert!(
            e.is_usage() && e.to_string().contains("not a regular file"),
            "{e}"
        );
        let e = read_bearer_token(Path::new("/dev/zero")).expect_err("/dev/zero");
        assert!(
            e.is_usage() && e.to_string().contains("not a regular file"),
            "{e}"
        );
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; crate::bearer::MAX_FILE_LEN as usize + 1]).expect("write");
        std::fs::set_permissions(&big, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("chmod");
        let e = read_bearer_token(&big).expect_err("too big");
        assert!(e.to_string().contains("larger than 65536 bytes"), "{e}");
    }
}
