//! A client of a running sidecar, for the commands that ask one
//! (`reqstate mint|verify|consume|seal|unseal|keys list|keys status
//! --connect`, `reqstate health`): a tonic channel over `tcp:HOST:PORT` (with
//! TLS if asked) or `unix:PATH` (the forms of `serve --listen`), and an
//! optional bearer token read from a file in the format of `serve
//! --auth-token-file`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity, Uri};

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
}

impl Target {
    /// A target with no token, no TLS and a 5-second timeout.
    pub fn new(address: impl Into<String>) -> Self {
        Target {
            address: address.into(),
            auth_token_file: None,
            connect_timeout: Duration::from_secs(5),
            tls: TlsArgs::default(),
        }
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
                .map_err(|e| format!("cannot connect: {}", error_chain(&e)))
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
                .map_err(|e| format!("cannot connect: {}", error_chain(&e)))
        }
    }
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
/// and `#` comments skipped).
pub fn read_bearer_token(path: &Path) -> Result<String, ConnectError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConnectError(format!("--auth-token-file {}: {e}", path.display())))?;
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .ok_or_else(|| {
            ConnectError(format!(
                "--auth-token-file {}: no token in the file",
                path.display()
            ))
        })
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
                let token = read_bearer_token(path)?;
                Some(
                    MetadataValue::try_from(format!("Bearer {token}")).map_err(|_| {
                        ConnectError(format!(
                            "--auth-token-file {}: the token is not a valid header value",
                            path.display()
                        ))
                    })?,
                )
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
            .map_err(|status| ConnectError(format!("ListKeys failed: {}", status_text(&status))))
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
        assert_eq!(read_bearer_token(&path)?, "abc123");
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
}
