//! The command line and the typed configuration it is checked into: every flag, its `REQSTATE_*` variable, and the validation that runs before anything binds.

use std::ffi::OsString;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use reqstate::{Keyring, Policy};
use zeroize::Zeroizing;

use crate::keyring_source::{KeyringLoadError, KeyringPermissions, load_keyring_file};

/// `EX_USAGE` from sysexits.h: the command line or configuration is wrong.
/// Nothing was bound or started.
pub const EXIT_BAD_CONFIG: u8 = 64;

/// The `reqstate` command line.
#[derive(Debug, Parser)]
#[command(
    name = "reqstate",
    version,
    about = "Mint and verify MCP requestState tokens: a gRPC sidecar and its key tooling",
    propagate_version = true
)]
pub struct Cli {
    /// Log filter: off, error, warn, info, debug or trace, optionally per
    /// target (`info,reqstate_sidecar=debug`). Logs go to standard error.
    #[arg(long, global = true, env = "REQSTATE_LOG", default_value = "info")]
    pub log: String,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses a command line. On `--help` or `--version` the text is printed
    /// and `Err(0)` returned; on a usage error the message is printed and
    /// `Err(EXIT_BAD_CONFIG)` returned, so the caller only has to exit.
    pub fn parse_args<I, T>(args: I) -> Result<Cli, u8>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Cli::try_parse_from(args).map_err(|e| {
            // Printing can only fail if stderr/stdout is gone; the exit code still says it.
            let _ = e.print();
            if e.use_stderr() { EXIT_BAD_CONFIG } else { 0 }
        })
    }
}

/// The subcommands of `reqstate`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gRPC sidecar.
    Serve(ServeArgs),
    /// Create, promote, retire and list the keys of a keyring file.
    Keys {
        /// Which key operation.
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Mint a token locally with a keyring file; prints JSON.
    Mint(MintArgs),
    /// Verify a token locally with a keyring file; prints JSON, exits 1 when invalid.
    Verify(VerifyArgs),
    /// Show a token's header (version, kind, key id, algorithm, size) without
    /// keys. Never decrypts or verifies anything.
    Inspect(InspectArgs),
}

/// The flags of `reqstate serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// First-run mode: an ephemeral in-memory key (tokens die with the
    /// process), listening on 127.0.0.1:50051 unless --listen says otherwise.
    #[arg(long, env = "REQSTATE_DEV", conflicts_with = "keyring")]
    pub dev: bool,

    /// The keyring file (TOML, see docs/KEYRING.md). Reloaded on SIGHUP and
    /// when it changes.
    #[arg(long, env = "REQSTATE_KEYRING", value_name = "FILE")]
    pub keyring: Option<PathBuf>,

    /// Where to serve gRPC: `unix:PATH` or `tcp:HOST:PORT`. Repeatable; the
    /// variable takes a comma-separated list.
    #[arg(
        long,
        env = "REQSTATE_LISTEN",
        value_name = "ADDR",
        value_delimiter = ','
    )]
    pub listen: Vec<String>,

    /// Serve Prometheus metrics (`/metrics`) and readiness (`/ready`) on this
    /// address, apart from the gRPC listeners. Unauthenticated: a
    /// non-loopback address is refused without --insecure.
    #[arg(long, env = "REQSTATE_METRICS", value_name = "HOST:PORT")]
    pub metrics: Option<String>,

    /// Require `authorization: Bearer <token>` on every call except health
    /// checks; the token is the file's content, surrounding whitespace removed.
    /// A non-loopback listener needs it or --client-ca.
    #[arg(long, env = "REQSTATE_AUTH_TOKEN_FILE", value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,

    /// TLS certificate chain (PEM) for the TCP listeners.
    #[arg(
        long,
        env = "REQSTATE_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// TLS private key (PEM) for the TCP listeners.
    #[arg(
        long,
        env = "REQSTATE_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,

    /// Require TCP clients to present a certificate signed by this CA (PEM).
    #[arg(
        long,
        env = "REQSTATE_CLIENT_CA",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub client_ca: Option<PathBuf>,

    /// Allow a non-loopback TCP listener without TLS or without caller
    /// authentication (--client-ca or --auth-token-file), and a non-loopback
    /// --metrics address. Anyone who can reach such a listener can mint: use
    /// only on a network you trust entirely.
    #[arg(long, env = "REQSTATE_INSECURE")]
    pub insecure: bool,

    /// Load a keyring file that group or others may read (refused by
    /// default, as ssh refuses such private keys).
    #[arg(long, env = "REQSTATE_ALLOW_INSECURE_KEYRING_PERMISSIONS")]
    pub allow_insecure_keyring_permissions: bool,

    /// Only these uids may call over Unix sockets (checked with the socket's
    /// peer credentials). Repeatable; the variable takes a comma-separated list.
    #[arg(
        long = "allow-uid",
        env = "REQSTATE_ALLOW_UIDS",
        value_name = "UID",
        value_delimiter = ','
    )]
    pub allow_uids: Vec<u32>,

    /// Lifetime of tokens minted with `ttl_seconds = 0`, in seconds.
    #[arg(long, env = "REQSTATE_DEFAULT_TTL", default_value_t = 600)]
    pub default_ttl: u64,

    /// Longest lifetime minted or accepted, in seconds (at most 30 days).
    #[arg(long, env = "REQSTATE_MAX_TTL", default_value_t = Policy::DEFAULT_MAX_LIFETIME)]
    pub max_ttl: u64,

    /// Clock leeway for issue and expiry times, in seconds (at most 600).
    #[arg(long, env = "REQSTATE_CLOCK_LEEWAY", default_value_t = Policy::DEFAULT_CLOCK_LEEWAY)]
    pub clock_leeway: u64,

    /// Longest token minted or accepted, in characters.
    #[arg(long, env = "REQSTATE_MAX_TOKEN_LEN", default_value_t = Policy::DEFAULT_MAX_TOKEN_LEN)]
    pub max_token_len: usize,

    /// Largest request message accepted, in bytes; larger ones fail with
    /// OUT_OF_RANGE and the sidecar keeps serving.
    #[arg(long, env = "REQSTATE_MAX_REQUEST_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_request_bytes: usize,

    /// Most items in one MintBatch or VerifyBatch call.
    #[arg(long, env = "REQSTATE_MAX_BATCH_ITEMS", default_value_t = 1000)]
    pub max_batch_items: usize,

    /// Deadline of every call, in milliseconds (a shorter client
    /// `grpc-timeout` wins).
    #[arg(long, env = "REQSTATE_CALL_TIMEOUT_MS", default_value_t = 5000)]
    pub call_timeout_ms: u64,

    /// Most calls in progress at once across all listeners; calls beyond it
    /// are shed at once with RESOURCE_EXHAUSTED.
    #[arg(long, env = "REQSTATE_MAX_CONCURRENT_CALLS", default_value_t = 1024)]
    pub max_concurrent_calls: usize,

    /// Most health calls (Check and Watch, which need no token) in progress
    /// at once, apart from --max-concurrent-calls; half of them may be Watch
    /// streams. Calls beyond it are shed with RESOURCE_EXHAUSTED.
    #[arg(long, env = "REQSTATE_MAX_HEALTH_CALLS", default_value_t = crate::call_gate::DEFAULT_MAX_HEALTH_CALLS)]
    pub max_health_calls: usize,

    /// On SIGTERM or SIGINT, how long in-flight calls may take to finish
    /// before the sidecar exits anyway, in milliseconds.
    #[arg(long, env = "REQSTATE_DRAIN_TIMEOUT_MS", default_value_t = 10_000)]
    pub drain_timeout_ms: u64,

    /// How long the keyring's directory must be quiet after a change before
    /// the keyring is reloaded, in milliseconds.
    #[arg(long, env = "REQSTATE_RELOAD_DEBOUNCE_MS", default_value_t = 200)]
    pub reload_debounce_ms: u64,
}

/// `reqstate keys …`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Add a fresh random key: `active`, or `primary` when the file has none
    /// (a missing file is created).
    New {
        /// The keyring file.
        #[arg(long, env = "REQSTATE_KEYRING", value_name = "FILE")]
        keyring: PathBuf,
        /// The new key's algorithm.
        #[arg(long, value_enum, default_value_t = AlgorithmArg::Xchacha20Poly1305)]
        algorithm: AlgorithmArg,
        /// The new key's id; one more than the highest id by default.
        #[arg(long)]
        id: Option<u32>,
    },
    /// Make a key the primary; the old primary becomes `active`.
    Promote {
        /// The keyring file.
        #[arg(long, env = "REQSTATE_KEYRING", value_name = "FILE")]
        keyring: PathBuf,
        /// The key to promote.
        id: u32,
    },
    /// Retire a key: its tokens are refused from the next reload on.
    Retire {
        /// The keyring file.
        #[arg(long, env = "REQSTATE_KEYRING", value_name = "FILE")]
        keyring: PathBuf,
        /// The key to retire (not the primary).
        id: u32,
    },
    /// List the keys (never their secrets).
    List {
        /// The keyring file.
        #[arg(long, env = "REQSTATE_KEYRING", value_name = "FILE")]
        keyring: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Read a keyring file that group or others may read.
        #[arg(long, env = "REQSTATE_ALLOW_INSECURE_KEYRING_PERMISSIONS")]
        allow_insecure_keyring_permissions: bool,
    },
}

/// A key algorithm as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AlgorithmArg {
    /// XChaCha20-Poly1305: confidential state (the default).
    #[value(name = "xchacha20-poly1305")]
    Xchacha20Poly1305,
    /// HMAC-SHA256: integrity only, the client can read the state.
    #[value(name = "hmac-sha256")]
    HmacSha256,
}

impl From<AlgorithmArg> for reqstate::Algorithm {
    fn from(a: AlgorithmArg) -> Self {
        match a {
            AlgorithmArg::Xchacha20Poly1305 => reqstate::Algorithm::XChaCha20Poly1305,
            AlgorithmArg::HmacSha256 => reqstate::Algorithm::HmacSha256,
        }
    }
}

/// Flags shared by the local `mint` and `verify` commands.
#[derive(Debug, Args)]
pub struct LocalKeyringArgs {
    /// The keyring file.
    #[arg(long, env = "REQSTATE_KEYRING", value_name = "FILE")]
    pub keyring: PathBuf,
    /// Read a keyring file that group or others may read.
    #[arg(long, env = "REQSTATE_ALLOW_INSECURE_KEYRING_PERMISSIONS")]
    pub allow_insecure_keyring_permissions: bool,
}

/// Flags shared by the local `mint` and `verify` commands (docs/CLI.md): the
/// tool, the context, the clock and the policy.
#[derive(Debug, Args)]
pub struct LocalCodecArgs {
    /// Where the keys come from.
    #[command(flatten)]
    pub keys: LocalKeyringArgs,
    /// The tool the token is for.
    #[arg(long)]
    pub tool: String,
    /// Context bound into the token: its UTF-8 bytes. Default: empty.
    #[arg(long, value_name = "TEXT", group = "context_source")]
    pub context: Option<String>,
    /// Context bound into the token, as hex (even length, either case).
    #[arg(long, value_name = "HEX", group = "context_source")]
    pub context_hex: Option<String>,
    /// Context bound into the token: the bytes of this file, as they are.
    #[arg(long, value_name = "FILE", group = "context_source")]
    pub context_file: Option<PathBuf>,
    /// The clock reading to use, in unix seconds. Default: the system clock.
    #[arg(long, value_name = "UNIX_SECONDS")]
    pub now: Option<u64>,
    /// Longest token minted or accepted, in characters.
    #[arg(long, value_name = "CHARS", default_value_t = Policy::DEFAULT_MAX_TOKEN_LEN)]
    pub max_token_len: usize,
    /// Clock leeway for issue and expiry times, in seconds (at most 600).
    #[arg(long, value_name = "SECONDS", default_value_t = Policy::DEFAULT_CLOCK_LEEWAY)]
    pub clock_leeway: u64,
    /// Longest lifetime minted or accepted, in seconds (at most 30 days).
    #[arg(long, value_name = "SECONDS", default_value_t = Policy::DEFAULT_MAX_LIFETIME)]
    pub max_lifetime: u64,
}

/// `reqstate mint`.
#[derive(Debug, Args)]
pub struct MintArgs {
    /// Keys, tool, context, clock and policy.
    #[command(flatten)]
    pub codec: LocalCodecArgs,
    /// The step the token is for.
    #[arg(long)]
    pub step: String,
    /// The state, as JSON text (docs/CLI.md gives its CBOR form). Default: null.
    #[arg(long, value_name = "JSON", conflicts_with = "state_cbor_hex")]
    pub state_json: Option<String>,
    /// The state, as one CBOR data item in hex, embedded as given (it must be
    /// in preferred serialization).
    #[arg(long, value_name = "HEX")]
    pub state_cbor_hex: Option<String>,
    /// Lifetime in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub ttl: u64,
}

/// `reqstate verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Keys, tool, context, clock and policy.
    #[command(flatten)]
    pub codec: LocalCodecArgs,
    /// The step the token must be for, if any. (`--step` is a deprecated
    /// alias.)
    #[arg(long, alias = "step", value_name = "STEP")]
    pub expected_step: Option<String>,
    /// The token, or `-` to read it from standard input.
    #[arg(long = "token", value_name = "TOKEN", conflicts_with = "token")]
    pub token_flag: Option<String>,
    /// The token, or `-` to read it from standard input.
    #[arg(required_unless_present = "token_flag")]
    pub token: Option<String>,
}

/// `reqstate inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The token, or `-` to read it from standard input.
    pub token: String,
}

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
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(ConfigError::new(format!(
                    "--listen {text}: the socket path is empty"
                )));
            }
            return Ok(ListenAddr::Unix(PathBuf::from(path)));
        }
        if let Some(host_port) = text.strip_prefix("tcp:") {
            let addr = host_port
                .to_socket_addrs()
                .map_err(|e| ConfigError::new(format!("--listen {text}: {e}")))?
                .next()
                .ok_or_else(|| {
                    ConfigError::new(format!("--listen {text}: the host has no address"))
                })?;
            return Ok(ListenAddr::Tcp(addr));
        }
        Err(ConfigError::new(format!(
            "--listen {text}: expected unix:PATH or tcp:HOST:PORT"
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

/// The caller token of `--auth-token-file`.
#[derive(Clone)]
pub struct BearerToken(Vec<u8>);

impl BearerToken {
    /// Wraps the expected token bytes.
    pub fn new(token: Vec<u8>) -> Self {
        BearerToken(token)
    }

    /// The expected token bytes.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
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
    /// The bearer token callers must present.
    pub bearer_token: Option<BearerToken>,
    /// TLS for TCP listeners.
    pub tls: Option<TlsConfig>,
    /// Peer uids allowed on Unix sockets; empty means any.
    pub allow_uids: Vec<u32>,
    /// Limits.
    pub limits: Limits,
    /// How long draining may take.
    pub drain_timeout: Duration,
    /// Quiet time before a file change is reloaded.
    pub reload_debounce: Duration,
    /// `--dev`: print the warning and the example call.
    pub dev: bool,
}

/// A configuration error: the process exits with [`EXIT_BAD_CONFIG`].
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

impl ServeConfig {
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

        let policy = Policy::new()
            .with_max_token_len(args.max_token_len)
            .and_then(|p| p.with_clock_leeway(Duration::from_secs(args.clock_leeway)))
            .and_then(|p| p.with_max_lifetime(Duration::from_secs(args.max_ttl)))
            .map_err(|e| ConfigError::new(e.to_string()))?;
        if args.default_ttl == 0 || args.default_ttl > policy.max_lifetime() {
            return Err(ConfigError::new(format!(
                "--default-ttl must be in 1..={} (--max-ttl)",
                policy.max_lifetime()
            )));
        }
        if args.max_request_bytes < 1024 {
            return Err(ConfigError::new(
                "--max-request-bytes must be at least 1024",
            ));
        }
        if args.max_batch_items == 0 {
            return Err(ConfigError::new("--max-batch-items must be at least 1"));
        }
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
                let bytes = read_file("--auth-token-file", path)?;
                let text = std::str::from_utf8(&bytes).map_err(|_| {
                    ConfigError::new(format!(
                        "--auth-token-file {}: not UTF-8 text",
                        path.display()
                    ))
                })?;
                let token = text.trim();
                if token.is_empty() {
                    return Err(ConfigError::new(format!(
                        "--auth-token-file {}: the file is empty",
                        path.display()
                    )));
                }
                Ok(BearerToken::new(token.as_bytes().to_vec()))
            })
            .transpose()?;

        if !args.insecure {
            check_network_exposure(&listen, metrics, tls.as_ref(), bearer_token.is_some())?;
        }

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
            limits: Limits {
                default_ttl: Duration::from_secs(args.default_ttl),
                max_request_bytes: args.max_request_bytes,
                max_batch_items: args.max_batch_items,
                call_timeout: Duration::from_millis(args.call_timeout_ms),
                max_concurrent_calls: args.max_concurrent_calls,
                max_health_calls: args.max_health_calls,
            },
            drain_timeout: Duration::from_millis(args.drain_timeout_ms),
            reload_debounce: Duration::from_millis(args.reload_debounce_ms),
            dev: args.dev,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
