//! A client of a running sidecar, for the commands that ask one
//! (`reqstate keys status --connect`, and any other that needs the
//! `reqstate.v1.RequestState` service): a tonic channel over `tcp:HOST:PORT`
//! or `unix:PATH` (the forms of `serve --listen`), and an optional bearer
//! token read from a file in the format of `serve --auth-token-file`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint, Uri};

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
}

impl Target {
    /// A target with no token and a 5-second connect timeout.
    pub fn new(address: impl Into<String>) -> Self {
        Target {
            address: address.into(),
            auth_token_file: None,
            connect_timeout: Duration::from_secs(5),
        }
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
        let parsed = ListenAddr::parse(address)
            .map_err(|e| ConnectError(format!("--connect: {e}").replace("--listen ", "")))?;
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
        let cannot = |e: tonic::transport::Error| {
            ConnectError(format!("{address}: cannot connect: {}", error_chain(&e)))
        };
        let connecting = async {
            match parsed {
                ListenAddr::Unix(path) => unix_channel(path).await.map_err(cannot),
                ListenAddr::Tcp(addr) => Endpoint::from_shared(format!("http://{addr}"))
                    .map_err(|e| ConnectError(format!("{address}: {e}")))?
                    .connect()
                    .await
                    .map_err(cannot),
            }
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
                ConnectError(format!(
                    "ListKeys failed: {:?}: {}",
                    status.code(),
                    status.message()
                ))
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
    runtime.block_on(async {
        let connection = Connection::open(target).await?;
        ask(connection).await
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
