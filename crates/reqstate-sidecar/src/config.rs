//! The checked `serve` configuration: listen addresses, TLS material,
//! caller authentication, limits and the keyring source, validated (and the
//! files they name read) before anything binds. The flags themselves are in
//! [`crate::cli`].

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqstate::{Keyring, Policy};
use zeroize::Zeroizing;

use crate::bearer::AuthTokenFile;
use crate::cli::ServeArgs;
use crate::keyring_source::{KeyringLoadError, KeyringPermissions, load_keyring_file};
use reqstate_spent_store::StoreConfig;

/// A place to serve gRPC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// A Unix domain socket, created with mode 0600.
    Unix(PathBuf),
    /// A TCP address.
    Tcp(SocketAddr),
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Unix(path) => write!(f, "unix:{}", path.display()),
            ListenAddr::Tcp(addr) => write!(f, "tcp:{addr}"),
        }
    }
}

impl ListenAddr {
    /// Parses `unix:PATH` or `tcp:HOST:PORT` (a host name must resolve to
    /// exactly one kind of address; the first is used).
    pub fn parse(text: &str) -> Result<ListenAddr, ConfigError> {
        Self::parse_flag("--listen", text)
    }

    /// [`ListenAddr::parse`], naming `flag` in its errors (`--connect`).
    pub fn parse_flag(flag: &str, text: &str) -> Result<ListenAddr, ConfigError> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(ConfigError::new(format!(
                    "{flag} {text}: the socket path is empty"
                )));
            }
            return Ok(ListenAddr::Unix(PathBuf::from(path)));
        }
        if let Some(host_port) = text.strip_prefix("tcp:") {
            let addr = host_port
                .to_socket_addrs()
                .map_err(|e| ConfigError::new(format!("{flag} {text}: {e}")))?
                .next()
                .ok_or_else(|| {
                    ConfigError::new(format!("{flag} {text}: the host has no address"))
                })?;
            return Ok(ListenAddr::Tcp(addr));
        }
        // A bare HOST:PORT or path: say the form that would work.
        let hint = if text.starts_with('/') || text.starts_with('.') {
            format!(" (a socket path: {flag} unix:{text})")
        } else if text
            .rsplit_once(':')
            .is_some_and(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
        {
            format!(" (a TCP address: {flag} tcp:{text})")
        } else {
            String::new()
        };
        Err(ConfigError::new(format!(
            "{flag} {text}: expected unix:PATH or tcp:HOST:PORT{hint}"
        )))
    }
}

/// Where the sidecar's keys come from.
#[derive(Debug)]
pub enum KeyringSource {
    /// `serve --dev`: one key made at start, gone at exit.
    Ephemeral,
    /// A keyring file, watched and reloaded.
    File {
        /// The file as given (not canonicalized: a Kubernetes `..data`
        /// symlink must be followed afresh on every reload).
        path: PathBuf,
        /// Whether group- or other-readable files are accepted.
        permissions: KeyringPermissions,
    },
}

/// TLS for the TCP listeners, files already read.
#[derive(Clone)]
pub struct TlsConfig {
    /// PEM certificate chain.
    pub cert_pem: Vec<u8>,
    /// PEM private key.
    pub key_pem: Vec<u8>,
    /// PEM CA certificate(s) that client certificates must chain to.
    pub client_ca_pem: Option<Vec<u8>>,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The private key is never printed.
        f.debug_struct("TlsConfig")
            .field("client_ca", &self.client_ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// The limits the service enforces.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Lifetime of tokens minted with `ttl_seconds = 0`.
    pub default_ttl: Duration,
    /// Largest request message, in bytes.
    pub max_request_bytes: usize,
    /// Most items in a batch call.
    pub max_batch_items: usize,
    /// Deadline of every call.
    pub call_timeout: Duration,
    /// Most calls in progress at once.
    pub max_concurrent_calls: usize,
    /// Most health calls in progress at once.
    pub max_health_calls: usize,
}

/// A checked `serve` configuration: everything a running sidecar needs,
/// files read and values in range.
#[derive(Debug)]
pub struct ServeConfig {
    /// Where the keys come from.
    pub keyring: KeyringSource,
    /// The keyring loaded at start (validated; the first generation).
    pub initial_keyring: Keyring,
    /// The keyring file's bytes as loaded at start (empty for `--dev`), so
    /// a reload can tell a real change from a touch.
    pub initial_contents: Zeroizing<Vec<u8>>,
    /// The codec policy (token length, leeway, lifetime).
    pub policy: Policy,
    /// The gRPC listeners.
    pub listen: Vec<ListenAddr>,
    /// The metrics and readiness listener.
    pub metrics: Option<SocketAddr>,
    /// The bearer tokens callers must present (one of), and the file they
    /// reload from.
    pub bearer_token: Option<AuthTokenFile>,
    /// TLS for TCP listeners.
    pub tls: Option<TlsConfig>,
    /// Peer uids allowed on Unix sockets; empty means any.
    pub allow_uids: Vec<u32>,
    /// The group given the Unix sockets (mode 0660); `None`: owner only (0600).
    pub socket_group: Option<u32>,
    /// Limits.
    pub limits: Limits,
    /// How long draining may take.
    pub drain_timeout: Duration,
    /// Quiet time before a file change is reloaded.
    pub reload_debounce: Duration,
    /// Where consumed single-use tokens are recorded.
    pub replay: StoreConfig,
    /// `--dev`: print the warning and the example call.
    pub dev: bool,
}

/// A configuration error: the process exits with [`crate::EXIT_BAD_CONFIG`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(String);

impl ConfigError {
    /// A configuration error with a message for the operator.
    pub fn new(message: impl Into<String>) -> Self {
        ConfigError(message.into())
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl From<KeyringLoadError> for ConfigError {
    fn from(e: KeyringLoadError) -> Self {
        ConfigError(e.to_string())
    }
}

/// `--socket-group`: a group name, or a numeric gid.
fn resolve_group(text: &str) -> Result<u32, ConfigError> {
    if let Ok(gid) = text.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(text) {
        Ok(Some(group)) => Ok(group.gid.as_raw()),
        Ok(None) => Err(ConfigError::new(format!(
            "--socket-group {text}: no such group"
        ))),
        Err(e) => Err(ConfigError::new(format!(
            "--socket-group {text}: cannot look the group up: {e}"
        ))),
    }
}

/// The lifetime of a token minted with `ttl_seconds = 0` when
/// `--default-ttl` is not given (or `--max-ttl`, if shorter), in seconds.
pub const DEFAULT_TTL: u64 = 600;

/// The `serve --dev` listen address.
pub const DEV_LISTEN: &str = "127.0.0.1:50051";

fn read_file(flag: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| ConfigError::new(format!("{flag} {}: {e}", path.display())))
}

/// Refuses, unless `--insecure`, whatever would let the network reach the
/// sidecar without authenticating callers: a gRPC listener on a non-loopback
/// address needs TLS (`--tls-cert`) *and* authenticated callers (client
/// certificates from `--client-ca`, or the `--auth-token-file` bearer
/// token); the metrics listener, which has no authentication and lists the
/// keyring's key ids, statuses and algorithms, must be on loopback.
fn check_network_exposure(
    listen: &[ListenAddr],
    metrics: Option<SocketAddr>,
    tls: Option<&TlsConfig>,
    bearer_token: bool,
) -> Result<(), ConfigError> {
    let client_certificates = tls.is_some_and(|tls| tls.client_ca_pem.is_some());
    for addr in listen {
        let ListenAddr::Tcp(sock) = addr else {
            continue;
        };
        if sock.ip().is_loopback() {
            continue;
        }
        if tls.is_none() {
            return Err(ConfigError::new(format!(
                "--listen {addr} is not a loopback address: a sidecar reachable from the \
                 network is a signing oracle. Give --tls-cert and --tls-key, with \
                 --client-ca or --auth-token-file to authenticate callers, or --insecure \
                 if the network is trusted entirely"
            )));
        }
        if !client_certificates && !bearer_token {
            return Err(ConfigError::new(format!(
                "--listen {addr} is not a loopback address and callers are not \
                 authenticated: with a server certificate alone anyone who reaches the \
                 port can mint (a signing oracle). Give --client-ca or --auth-token-file \
                 as well, or --insecure if the network is trusted entirely"
            )));
        }
    }
    if let Some(addr) = metrics
        && !addr.ip().is_loopback()
    {
        return Err(ConfigError::new(format!(
            "--metrics {addr} is not a loopback address: the metrics page has no \
             authentication and lists the keyring's key ids, statuses and algorithms. \
             Serve it on loopback (e.g. 127.0.0.1:9464) and scrape through a proxy, \
             or give --insecure if the network is trusted entirely"
        )));
    }
    Ok(())
}

/// Refuses `--allow-uid` beside a TCP listener that has no caller
/// authentication of its own: the allow-list reads a Unix socket's peer
/// credentials, which TCP does not carry, so every local process would be
/// served over loopback TCP while the flags say only the listed uids are.
/// With a bearer token or client certificates the TCP listener has its own
/// authentication, and the start log says which applies where
/// ([`ListenerAuth::describe`]).
fn check_allow_uids(
    listen: &[ListenAddr],
    allow_uids: &[u32],
    tls: Option<&TlsConfig>,
    bearer_token: bool,
) -> Result<(), ConfigError> {
    if allow_uids.is_empty() {
        return Ok(());
    }
    let client_certificates = tls.is_some_and(|tls| tls.client_ca_pem.is_some());
    if bearer_token || client_certificates {
        return Ok(());
    }
    match listen
        .iter()
        .find(|addr| matches!(addr, ListenAddr::Tcp(_)))
    {
        None => Ok(()),
        Some(addr) => Err(ConfigError::new(format!(
            "--allow-uid applies only to Unix sockets (it reads the socket's peer \
             credentials), and --listen {addr} would serve every process that can reach it. \
             Authenticate TCP callers with --auth-token-file FILE or with client \
             certificates (--tls-cert, --tls-key and --client-ca), or serve on Unix sockets \
             only"
        ))),
    }
}

/// The caller authentication a sidecar was started with, as
/// [`ListenerAuth::describe`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerAuth {
    /// `--allow-uid` was given (Unix sockets only).
    pub allow_uids: bool,
    /// `--auth-token-file` was given (every listener).
    pub bearer_token: bool,
    /// `--client-ca` was given (TLS listeners only).
    pub client_certificates: bool,
}

/// The kind of a listener, for [`ListenerAuth::describe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerKind {
    /// A Unix socket: peer credentials are known.
    Unix,
    /// TCP: no peer credentials.
    Tcp,
}

impl ListenerAuth {
    /// Which caller authentication applies to a listener of this kind, for
    /// the start log: on a Unix socket the uid allow-list and the bearer
    /// token; on TCP client certificates and the bearer token.
    pub fn describe(&self, kind: ListenerKind) -> String {
        let mut parts = Vec::new();
        match kind {
            ListenerKind::Unix if self.allow_uids => parts.push("peer uid in --allow-uid"),
            ListenerKind::Tcp if self.client_certificates => {
                parts.push("client certificate (--client-ca)");
            }
            _ => {}
        }
        if self.bearer_token {
            parts.push("bearer token (--auth-token-file)");
        }
        if parts.is_empty() {
            "none".to_owned()
        } else {
            parts.join(" and ")
        }
    }
}

impl ServeConfig {
    /// The caller authentication this configuration applies.
    pub fn listener_auth(&self) -> ListenerAuth {
        ListenerAuth {
            allow_uids: !self.allow_uids.is_empty(),
            bearer_token: self.bearer_token.is_some(),
            client_certificates: self
                .tls
                .as_ref()
                .is_some_and(|tls| tls.client_ca_pem.is_some()),
        }
    }

    /// Checks `serve` flags and reads every file they name: the keyring (with
    /// its permission check), the bearer token and the TLS material. Binds
    /// nothing.
    pub fn from_args(args: ServeArgs) -> Result<ServeConfig, ConfigError> {
        let keyring = match (&args.keyring, args.dev) {
            (Some(path), false) => KeyringSource::File {
                path: path.clone(),
                permissions: if args.allow_insecure_keyring_permissions {
                    KeyringPermissions::AllowGroupOrOtherReadable
                } else {
                    KeyringPermissions::OwnerOnly
                },
            },
            (None, true) => KeyringSource::Ephemeral,
            (None, false) => {
                return Err(ConfigError::new(
                    "serve needs --keyring FILE (or --dev for a throwaway in-memory key)",
                ));
            }
            (Some(_), true) => {
                return Err(ConfigError::new("--dev and --keyring exclude each other"));
            }
        };

        // The keyring file first: a missing or refused file is the first
        // thing to fix, whatever else the command line lacks.
        let (initial_keyring, initial_contents) = match &keyring {
            KeyringSource::Ephemeral => (
                Keyring::ephemeral(reqstate::Algorithm::DEFAULT, &reqstate::OsRandom::new())
                    .map_err(|e| ConfigError::new(format!("cannot make a dev key: {e}")))?,
                Zeroizing::new(Vec::new()),
            ),
            KeyringSource::File { path, permissions } => {
                let loaded = load_keyring_file(path, *permissions)?;
                (loaded.keyring, loaded.contents)
            }
        };

        let policy = Policy::new()
            .with_max_token_len(args.max_token_len)
            .and_then(|p| p.with_clock_leeway(Duration::from_secs(args.clock_leeway)))
            .and_then(|p| p.with_max_lifetime(Duration::from_secs(args.max_ttl)))
            .map_err(|e| ConfigError::new(e.to_string()))?;
        // Not given: 600 s, or --max-ttl when that is shorter.
        let default_ttl = match args.default_ttl {
            None => DEFAULT_TTL.min(policy.max_lifetime()),
            Some(ttl) if ttl == 0 || ttl > policy.max_lifetime() => {
                return Err(ConfigError::new(format!(
                    "--default-ttl {ttl}: must be in 1..={} (--max-ttl)",
                    policy.max_lifetime()
                )));
            }
            Some(ttl) => ttl,
        };
        if args.max_request_bytes < 1024 {
            return Err(ConfigError::new(
                "--max-request-bytes must be at least 1024",
            ));
        }
        if args.max_batch_items == 0 {
            return Err(ConfigError::new("--max-batch-items must be at least 1"));
        }
        let replay = replay_store_config(&args)?;
        if args.max_concurrent_calls == 0 {
            return Err(ConfigError::new(
                "--max-concurrent-calls must be at least 1",
            ));
        }
        if args.max_health_calls < crate::call_gate::MIN_HEALTH_CALLS {
            return Err(ConfigError::new(format!(
                "--max-health-calls must be at least {} (one Watch stream and one Check)",
                crate::call_gate::MIN_HEALTH_CALLS
            )));
        }
        if args.call_timeout_ms == 0 {
            return Err(ConfigError::new("--call-timeout-ms must be at least 1"));
        }

        let socket_group = args
            .socket_group
            .as_deref()
            .map(resolve_group)
            .transpose()?;
        let mut listen = args
            .listen
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| ListenAddr::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        if listen.is_empty() {
            if args.dev {
                listen.push(ListenAddr::parse(&format!("tcp:{DEV_LISTEN}"))?);
            } else {
                return Err(ConfigError::new(
                    "serve needs at least one --listen unix:PATH or --listen tcp:HOST:PORT",
                ));
            }
        }

        let tls = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(TlsConfig {
                cert_pem: read_file("--tls-cert", cert)?,
                key_pem: read_file("--tls-key", key)?,
                client_ca_pem: args
                    .client_ca
                    .as_deref()
                    .map(|ca| read_file("--client-ca", ca))
                    .transpose()?,
            }),
            _ => None,
        };
        let metrics = args
            .metrics
            .as_deref()
            .map(|text| {
                text.to_socket_addrs()
                    .map_err(|e| ConfigError::new(format!("--metrics {text}: {e}")))?
                    .next()
                    .ok_or_else(|| {
                        ConfigError::new(format!("--metrics {text}: the host has no address"))
                    })
            })
            .transpose()?;

        let bearer_token = args
            .auth_token_file
            .as_deref()
            .map(|path| {
                let permissions = if args.allow_insecure_keyring_permissions {
                    KeyringPermissions::AllowGroupOrOtherReadable
                } else {
                    KeyringPermissions::OwnerOnly
                };
                AuthTokenFile::load(path, permissions).map_err(|e| {
                    ConfigError::new(format!("--auth-token-file {}: {e}", path.display()))
                })
            })
            .transpose()?;

        // Not waived by --insecure: the flags contradict each other, whatever
        // the network.
        check_allow_uids(
            &listen,
            &args.allow_uids,
            tls.as_ref(),
            bearer_token.is_some(),
        )?;
        if !args.insecure {
            check_network_exposure(&listen, metrics, tls.as_ref(), bearer_token.is_some())?;
        }

        Ok(ServeConfig {
            keyring,
            initial_keyring,
            initial_contents,
            policy,
            listen,
            metrics,
            bearer_token,
            tls,
            allow_uids: args.allow_uids,
            socket_group,
            limits: Limits {
                default_ttl: Duration::from_secs(default_ttl),
                max_request_bytes: args.max_request_bytes,
                max_batch_items: args.max_batch_items,
                call_timeout: Duration::from_millis(args.call_timeout_ms),
                max_concurrent_calls: args.max_concurrent_calls,
                max_health_calls: args.max_health_calls,
            },
            drain_timeout: Duration::from_millis(args.drain_timeout_ms),
            reload_debounce: Duration::from_millis(args.reload_debounce_ms),
            replay,
            dev: args.dev,
        })
    }
}

/// The replay store flags, checked: a known URL scheme, a timeout and a
/// capacity in range. Messages never repeat a URL's password.
fn replay_store_config(args: &ServeArgs) -> Result<StoreConfig, ConfigError> {
    let store = args.replay_store.trim();
    if store == "memory" {
        if args.replay_cluster {
            return Err(ConfigError::new(
                "--replay-cluster needs --replay-store with the cluster's node URLs",
            ));
        }
        if args.replay_capacity < 64 {
            return Err(ConfigError::new("--replay-capacity must be at least 64"));
        }
        return Ok(StoreConfig::Memory {
            capacity: args.replay_capacity,
        });
    }
    shared_store_config(
        store,
        args.replay_cluster,
        &args.replay_key_prefix,
        args.replay_timeout_ms,
        args.replay_max_skew_ms,
    )
}

/// A Redis (or Redis Cluster) store's flags, checked: what `serve` and
/// `verify --consume --replay-store` share.
pub fn shared_store_config(
    store: &str,
    cluster: bool,
    prefix: &str,
    timeout_ms: u64,
    max_skew_ms: u64,
) -> Result<StoreConfig, ConfigError> {
    if !(1..=60_000).contains(&timeout_ms) {
        return Err(ConfigError::new("--replay-timeout-ms must be in 1..=60000"));
    }
    if !(1..=60_000).contains(&max_skew_ms) {
        return Err(ConfigError::new(
            "--replay-max-skew-ms must be in 1..=60000",
        ));
    }
    let timeout = Duration::from_millis(timeout_ms);
    let max_skew = Duration::from_millis(max_skew_ms);
    let prefix = prefix.to_string();
    let urls: Vec<String> = store
        .split(',')
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())
        .collect();
    for url in &urls {
        let known = ["redis://", "rediss://", "unix://", "redis+unix://"]
            .iter()
            .any(|scheme| url.starts_with(scheme));
        if !known {
            return Err(ConfigError::new(format!(
                "--replay-store {}: expected a redis://, rediss:// or unix:// URL",
                reqstate_spent_store::redacted(url)
            )));
        }
    }
    match (urls.len(), cluster) {
        (0, _) => Err(ConfigError::new("--replay-store is empty")),
        (1, false) => Ok(StoreConfig::Redis {
            url: urls[0].clone(),
            prefix,
            timeout,
            max_skew,
        }),
        (_, false) => Err(ConfigError::new(
            "--replay-store lists several URLs: add --replay-cluster for a Redis Cluster",
        )),
        (_, true) => {
            if urls.iter().any(|u| u.contains("unix://")) {
                return Err(ConfigError::new(
                    "--replay-cluster nodes are redis:// or rediss:// URLs, not Unix sockets",
                ));
            }
            Ok(StoreConfig::Cluster {
                urls,
                prefix,
                timeout,
                max_skew,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser as _;

    fn serve_args(extra: &[&str]) -> Result<ServeArgs, clap::Error> {
        let mut argv = vec!["reqstate", "serve"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv)?.command {
            Command::Serve(args) => Ok(args),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn dev_mode_listens_on_loopback_50051_by_default() -> Result<(), Box<dyn std::error::Error>> {
        let config = ServeConfig::from_args(serve_args(&["--dev"])?)?;
        assert_eq!(config.listen, vec![ListenAddr::Tcp(DEV_LISTEN.parse()?)]);
        assert!(matches!(config.keyring, KeyringSource::Ephemeral));
        Ok(())
    }

    #[test]
    fn non_loopback_tcp_without_tls_is_refused() -> Result<(), Box<dyn std::error::Error>> {
        let err = ServeConfig::from_args(serve_args(&["--dev", "--listen", "tcp:0.0.0.0:0"])?)
            .err()
            .ok_or("accepted a plaintext non-loopback listener")?;
        assert!(err.to_string().contains("signing oracle"), "{err}");
        ServeConfig::from_args(serve_args(&[
            "--dev",
            "--insecure",
            "--listen",
            "tcp:0.0.0.0:0",
        ])?)?;
        Ok(())
    }

    #[test]
    fn non_loopback_listener_needs_tls_and_authenticated_callers_unless_insecure()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        // The files are only read here; the TLS material is parsed at serve.
        let file = |name: &str| -> Result<String, Box<dyn std::error::Error>> {
            let path = dir.path().join(name);
            std::fs::write(&path, name)?;
            // The token file gets the keyring file's checks: owner-only.
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
            Ok(path.display().to_string())
        };
        let (cert, key, ca, token) = (file("cert")?, file("key")?, file("ca")?, file("token")?);
        let tls = ["--tls-cert", cert.as_str(), "--tls-key", key.as_str()];
        let network = ["--dev", "--listen", "tcp:0.0.0.0:0"];
        let with = |extra: &[&str]| -> Result<Result<ServeConfig, ConfigError>, clap::Error> {
            let mut args = network.to_vec();
            args.extend_from_slice(extra);
            Ok(ServeConfig::from_args(serve_args(&args)?))
        };
        let refused = |extra: &[&str], expected: &str| -> Result<(), Box<dyn std::error::Error>> {
            let err = with(extra)?
                .err()
                .ok_or_else(|| format!("accepted {extra:?}"))?;
            assert!(err.to_string().contains(expected), "{extra:?}: {err}");
            assert!(err.to_string().contains("--insecure"), "{extra:?}: {err}");
            Ok(())
        };
        // Plaintext, with or without the token (it would cross in clear).
        refused(&[], "signing oracle")?;
        refused(&["--auth-token-file", &token], "signing oracle")?;
        // A server certificate alone: encrypted, but anyone may call.
        refused(&tls, "callers are not authenticated")?;
        // TLS with client certificates, or with the bearer token, is enough.
        with(&[&tls[..], &["--client-ca", &ca]].concat())??;
        with(&[&tls[..], &["--auth-token-file", &token]].concat())??;
        // --insecure is the only override, for each of them.
        with(&["--insecure"])??;
        with(&[&tls[..], &["--insecure"]].concat())??;
        // Loopback needs neither.
        ServeConfig::from_args(serve_args(&["--dev", "--listen", "tcp:127.0.0.1:0"])?)?;
        ServeConfig::from_args(serve_args(&[&tls[..], &["--dev"]].concat())?)?;
        Ok(())
    }

    #[test]
    fn non_loopback_metrics_address_is_refused_unless_insecure()
    -> Result<(), Box<dyn std::error::Error>> {
        let err = ServeConfig::from_args(serve_args(&["--dev", "--metrics", "0.0.0.0:9464"])?)
            .err()
            .ok_or("accepted a non-loopback metrics address")?;
        assert!(err.to_string().contains("--metrics 0.0.0.0:9464"), "{err}");
        assert!(err.to_string().contains("key ids"), "{err}");
        ServeConfig::from_args(serve_args(&[
            "--dev",
            "--insecure",
            "--metrics",
            "0.0.0.0:9464",
        ])?)?;
        ServeConfig::from_args(serve_args(&["--dev", "--metrics", "[::1]:9464"])?)?;
        Ok(())
    }

    #[test]
    fn listen_addresses_need_a_scheme() {
        assert!(ListenAddr::parse("127.0.0.1:1").is_err());
        assert!(ListenAddr::parse("unix:").is_err());
        assert_eq!(
            ListenAddr::parse("unix:/run/r.sock").ok(),
            Some(ListenAddr::Unix("/run/r.sock".into()))
        );
    }

    #[test]
    fn serve_without_keyring_or_dev_is_a_config_error() -> Result<(), clap::Error> {
        let err = ServeConfig::from_args(serve_args(&["--listen", "tcp:127.0.0.1:0"])?);
        assert!(err.is_err());
        Ok(())
    }

    #[test]
    fn default_ttl_above_max_ttl_is_refused() -> Result<(), clap::Error> {
        let err = ServeConfig::from_args(serve_args(&[
            "--dev",
            "--max-ttl",
            "60",
            "--default-ttl",
            "600",
        ])?);
        assert!(err.is_err());
        Ok(())
    }

    #[test]
    fn health_limit_must_leave_room_for_a_watch_and_a_check() -> Result<(), clap::Error> {
        let err = ServeConfig::from_args(serve_args(&["--dev", "--max-health-calls", "1"])?)
            .expect_err("a health limit of 1 was accepted");
        assert!(err.to_string().contains("--max-health-calls"), "{err}");
        let config = ServeConfig::from_args(serve_args(&["--dev", "--max-health-calls", "2"])?)
            .expect("a health limit of 2 is accepted");
        assert_eq!(config.limits.max_health_calls, 2);
        let default = ServeConfig::from_args(serve_args(&["--dev"])?).expect("dev config");
        assert_eq!(
            default.limits.max_health_calls,
            crate::call_gate::DEFAULT_MAX_HEALTH_CALLS
        );
        Ok(())
    }
}
