//! The command line: every subcommand and flag of `reqstate`, with its
//! `REQSTATE_*` variable. Parsing only; `serve`'s flags are checked into a
//! [`crate::config::ServeConfig`], the others are run by [`crate::keys`],
//! [`crate::local`] and [`crate::health`].

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use reqstate::Policy;

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
            let code = if e.use_stderr() { EXIT_BAD_CONFIG } else { 0 };
            match e.print() {
                Ok(()) => code,
                // `--help | head -c0`: the reader has gone; exit as Unix tools do.
                Err(io) if !e.use_stderr() => crate::output::write_failed(&io),
                // Standard error is gone: the exit code still says it.
                Err(_) => code,
            }
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
    /// Mint a token with a keyring file, or with a running sidecar
    /// (`--connect`); prints JSON.
    Mint(MintArgs),
    /// Verify a token with a keyring file, or with a running sidecar
    /// (`--connect`); prints JSON, exits 1 when invalid.
    Verify(VerifyArgs),
    /// Verify a single-use token and spend it: `verify --consume`. Locally it
    /// needs `--replay-store URL` (a record kept only for one run would not
    /// make the token single-use); with `--connect` the sidecar's store spends it.
    Consume(ConsumeArgs),
    /// Seal an opaque payload (FORMAT.md §6), with a keyring file or a
    /// running sidecar; prints `{"token","key_id"}`.
    Seal(SealArgs),
    /// Open a sealed token; prints `{"valid":true,"payload_hex","key_id"}`,
    /// or `{"valid":false,"reason","message"}` and exits 1.
    Unseal(UnsealArgs),
    /// Show a token's header (version, kind, key id, algorithm, size) without
    /// keys. Never decrypts or verifies anything.
    Inspect(InspectArgs),
    /// Ask a running sidecar whether it is serving (grpc.health.v1 `Check`):
    /// exit 0 and print `SERVING` if so, exit 1 otherwise. An exec probe.
    Health(HealthArgs),
}

/// The flags of `reqstate health`.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// The sidecar to ask: `unix:PATH` or `tcp:HOST:PORT`, as every other
    /// client command's `--connect` (`--listen`, its first name, still
    /// works). Default: the first address of `REQSTATE_LISTEN` (the
    /// variable `serve` reads, so a probe in the sidecar's own environment
    /// finds it), else `tcp:127.0.0.1:50051` (`serve --dev`).
    #[arg(long = "connect", visible_alias = "listen", value_name = "ADDR")]
    pub listen: Option<String>,

    /// The health service name to check: empty for the whole sidecar, or
    /// `reqstate.v1.RequestState`.
    #[arg(long, value_name = "NAME", default_value = "")]
    pub service: String,

    /// Give up after this many milliseconds (connecting included) and exit 1.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub timeout_ms: u64,

    /// TLS for a `tcp:` address.
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// The client side of TLS, for `health` and `--connect`.
#[derive(Debug, Clone, Default, Args)]
pub struct TlsArgs {
    /// TCP only: connect with TLS, trusting this CA (PEM).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,

    /// TCP only: the client certificate chain (PEM) for a sidecar that
    /// requires one (`--client-ca`).
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "tls_ca"])]
    pub tls_cert: Option<PathBuf>,

    /// TCP only: the client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// TCP only: the name to expect in the server certificate. Default: the
    /// host of the address.
    #[arg(long, value_name = "NAME", requires = "tls_ca")]
    pub tls_server_name: Option<String>,
}

impl TlsArgs {
    /// Whether any TLS flag was given.
    pub fn any(&self) -> bool {
        self.tls_ca.is_some()
            || self.tls_cert.is_some()
            || self.tls_key.is_some()
            || self.tls_server_name.is_some()
    }
}

/// How to reach a running sidecar instead of reading a keyring file
/// (docs/CLI.md, "Against a running sidecar").
#[derive(Debug, Clone, Default, Args)]
pub struct RemoteArgs {
    /// Ask the running sidecar at this address instead of reading a keyring
    /// file: `tcp:HOST:PORT` or `unix:PATH` (the forms of `serve --listen`).
    /// The output is the same JSON as the local command's.
    #[arg(long, env = "REQSTATE_CONNECT", value_name = "ADDR")]
    pub connect: Option<String>,
    /// With --connect: send the first token of this file (the sidecar's
    /// --auth-token-file format) as `authorization: Bearer`.
    #[arg(long, value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,
    /// With --connect and --auth-token-file: send the bearer token over
    /// plaintext TCP (no --tls-ca) to an address that is not loopback, where
    /// anyone on the path can read it. Refused without this flag (exit 64).
    /// No variable sets it: a `REQSTATE_CONNECT` pointing at another host
    /// must not be enough to send the token there.
    #[arg(long, requires = "auth_token_file")]
    pub insecure_send_token: bool,
    /// With --connect: TLS for a `tcp:` address.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// With --connect: give up after this many milliseconds (connecting
    /// included); exit 69.
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
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
    /// checks, with one of the file's tokens: one per line (blank lines and
    /// `#` comments skipped), so a new token can be added before the old one
    /// goes; reloaded with the keyring. A non-loopback listener needs it or
    /// --client-ca.
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
    /// TCP has no peer credentials: beside a TCP listener this is refused
    /// (exit 64) unless TCP callers authenticate (--auth-token-file or
    /// --client-ca).
    #[arg(
        long = "allow-uid",
        env = "REQSTATE_ALLOW_UIDS",
        value_name = "UID",
        value_delimiter = ','
    )]
    pub allow_uids: Vec<u32>,

    /// Give the Unix sockets to this group (a name or a numeric gid) with
    /// mode 0660 instead of 0600, so that MCP servers running as other users
    /// in that group can connect (connecting needs write permission on the
    /// socket itself). Narrow further with --allow-uid. The sidecar's user
    /// must be a member of the group (or root).
    #[arg(long, env = "REQSTATE_SOCKET_GROUP", value_name = "GROUP")]
    pub socket_group: Option<String>,

    /// Lifetime of tokens minted with `ttl_seconds = 0`, in seconds.
    /// Default: 600, or --max-ttl when that is shorter.
    #[arg(long, env = "REQSTATE_DEFAULT_TTL", value_name = "SECONDS",
          allow_hyphen_values = true, value_parser = seconds)]
    pub default_ttl: Option<u64>,

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

    /// Where consumed single-use tokens are recorded (docs/SINGLE_USE.md):
    /// `memory` (this process only), or a Redis URL shared by the fleet:
    /// `redis://[user:password@]host:port[/db]`, `rediss://…` (TLS),
    /// `unix:///path/redis.sock`. With --replay-cluster, a comma-separated
    /// list of seed nodes of a Redis Cluster. The URL may hold a password:
    /// prefer the environment variable to the command line.
    #[arg(
        long,
        env = "REQSTATE_REPLAY_STORE",
        default_value = "memory",
        value_name = "memory|URL"
    )]
    pub replay_store: String,

    /// --replay-store names the seed nodes of a Redis Cluster.
    #[arg(long, env = "REQSTATE_REPLAY_CLUSTER")]
    pub replay_cluster: bool,

    /// Prefix of every record name in Redis, one per deployment sharing a
    /// server (records are `<prefix>spent:v1:<key id>:<token id>`).
    #[arg(long, env = "REQSTATE_REPLAY_KEY_PREFIX", default_value = reqstate_spent_store::DEFAULT_KEY_PREFIX)]
    pub replay_key_prefix: String,

    /// Deadline of one replay store call, in milliseconds; a consume whose
    /// store does not answer in time is refused (fail closed).
    #[arg(long, env = "REQSTATE_REPLAY_TIMEOUT_MS", default_value_t = 250)]
    pub replay_timeout_ms: u64,

    /// How far, in milliseconds, any verifier's clock may be from Redis's:
    /// records are kept that much longer (twice), and consumes are refused
    /// while this sidecar's clock is further than that from Redis `TIME`
    /// (docs/SINGLE_USE.md). Every replica sharing the store needs the same
    /// value.
    #[arg(long, env = "REQSTATE_REPLAY_MAX_SKEW_MS", default_value_t = 2000)]
    pub replay_max_skew_ms: u64,

    /// Live records the memory store holds at most; when it is full of live
    /// records, consumes are refused (REASON_REPLAY_STORE_FULL) rather than
    /// any record forgotten.
    #[arg(long, env = "REQSTATE_REPLAY_CAPACITY", default_value_t = reqstate_spent_store::DEFAULT_MEMORY_CAPACITY)]
    pub replay_capacity: usize,

    /// Deadline of every call, in milliseconds (a shorter client
    /// `grpc-timeout` wins); a call still running then ends with
    /// DEADLINE_EXCEEDED.
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
    /// Schedule a key to mint from now (or `--at`): sets its `mint_from`.
    /// Refused (exit 64, unless --force) when the key was created less than
    /// --propagation before that instant: replicas that have not loaded it
    /// yet would refuse its tokens as `unknown_key`.
    Promote {
        /// The keyring file.
        #[arg(long, env = "REQSTATE_KEYRING", value_name = "FILE")]
        keyring: PathBuf,
        /// The key to promote.
        id: u32,
        /// When the key starts minting: RFC 3339 (`2026-12-01T12:05:00Z`)
        /// or unix seconds. Default: now.
        #[arg(long, value_name = "INSTANT")]
        at: Option<String>,
        /// How long the file needs to reach every replica, plus the clocks'
        /// disagreement (`90s`, `5m`, `2h`, `30d` or seconds).
        #[arg(long, value_name = "DURATION", default_value = "5m")]
        propagation: String,
        /// Promote even if the key may not have reached every replica.
        #[arg(long)]
        force: bool,
        /// The clock reading to use (RFC 3339 or unix seconds). Default: the
        /// system clock.
        #[arg(long, value_name = "INSTANT")]
        now: Option<String>,
        /// The fleet's policy, to check the resulting schedule with.
        #[command(flatten)]
        policy: FleetPolicyArgs,
    },
    /// Retire a key: schedule its `retire_at` (now or `--at`) when no live
    /// token needs it, or cut it off now with --force (`status = "retired"`).
    Retire {
        /// The keyring file.
        #[arg(long, env = "REQSTATE_KEYRING", value_name = "FILE")]
        keyring: PathBuf,
        /// The key to retire (not the one minting now).
        id: u32,
        /// When its tokens start being refused: RFC 3339 or unix seconds.
        /// Default: now.
        #[arg(long, value_name = "INSTANT", conflicts_with = "force")]
        at: Option<String>,
        /// Cut the key off now, whatever tokens it still has alive (a leaked
        /// key): its status becomes `retired`.
        #[arg(long)]
        force: bool,
        /// The clock reading to use (RFC 3339 or unix seconds). Default: the
        /// system clock.
        #[arg(long, value_name = "INSTANT")]
        now: Option<String>,
        /// The fleet's policy: how long a token stays acceptable.
        #[command(flatten)]
        policy: FleetPolicyArgs,
    },
    /// Schedule the next rotation in one file: a new key minting from now +
    /// --propagation, the minting key retiring at the earliest safe instant,
    /// keys retired for longer than --grace dropped. Idempotent: while a
    /// rotation is in progress it changes nothing. Prints the timeline.
    Rotate {
        /// The keyring file.
        #[arg(long, env = "REQSTATE_KEYRING", value_name = "FILE")]
        keyring: PathBuf,
        /// How long the file needs to reach every replica, plus the clocks'
        /// disagreement (`90s`, `5m`, `2h`, `30d` or seconds).
        #[arg(long, value_name = "DURATION", default_value = "5m")]
        propagation: String,
        /// Rotate only when the minting key has minted for at least this
        /// long (`30d`); without it, rotate on every run that finds no
        /// rotation in progress.
        #[arg(long, value_name = "DURATION")]
        every: Option<String>,
        /// Drop keys whose `retire_at` passed more than this long ago.
        #[arg(long, value_name = "DURATION", default_value = "7d")]
        grace: String,
        /// The new key's algorithm. Default: the minting key's.
        #[arg(long, value_enum)]
        algorithm: Option<AlgorithmArg>,
        /// The clock reading to use (RFC 3339 or unix seconds). Default: the
        /// system clock.
        #[arg(long, value_name = "INSTANT")]
        now: Option<String>,
        /// The fleet's policy: how long a token stays acceptable.
        #[command(flatten)]
        policy: FleetPolicyArgs,
    },
    /// Print the keys' timeline and the next transition: of a keyring file,
    /// or of a running sidecar (`--connect`, over ListKeys).
    Status {
        /// The keyring file.
        #[arg(
            long,
            env = "REQSTATE_KEYRING",
            value_name = "FILE",
            required_unless_present = "connect"
        )]
        keyring: Option<PathBuf>,
        /// Ask a running sidecar instead (its own clock and keys).
        #[command(flatten)]
        remote: RemoteArgs,
        /// The clock reading to use for a file (RFC 3339 or unix seconds).
        /// Default: the system clock. A sidecar answers with its own.
        #[arg(long, value_name = "INSTANT", conflicts_with = "connect")]
        now: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Read a keyring file that group or others may read.
        #[arg(long, env = "REQSTATE_ALLOW_INSECURE_KEYRING_PERMISSIONS")]
        allow_insecure_keyring_permissions: bool,
    },
    /// List the keys (never their secrets): what each does now, and its
    /// schedule; of a keyring file, or of a running sidecar (`--connect`,
    /// over ListKeys: the confirmation step of a rotation on each replica).
    List {
        /// The keyring file.
        #[arg(
            long,
            env = "REQSTATE_KEYRING",
            value_name = "FILE",
            required_unless_present = "connect"
        )]
        keyring: Option<PathBuf>,
        /// Ask a running sidecar instead.
        #[command(flatten)]
        remote: RemoteArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Read a keyring file that group or others may read.
        #[arg(long, env = "REQSTATE_ALLOW_INSECURE_KEYRING_PERMISSIONS")]
        allow_insecure_keyring_permissions: bool,
    },
}

/// The policy a fleet serves, as `reqstate keys` needs it to place and
/// check a schedule. These must be the values every sidecar of the fleet
/// serves (`serve --max-ttl`, `--clock-leeway`): a retirement computed with
/// a shorter lifetime than the fleet's refuses live tokens, and the
/// sidecars refuse to load such a file.
#[derive(Debug, Clone, Copy, Args)]
pub struct FleetPolicyArgs {
    /// Longest token lifetime the fleet serves, in seconds (`serve
    /// --max-ttl`; must be what the fleet serves).
    #[arg(long, env = "REQSTATE_MAX_TTL", value_name = "SECONDS", default_value_t = Policy::DEFAULT_MAX_LIFETIME)]
    pub max_ttl: u64,
    /// Clock leeway the fleet serves, in seconds (`serve --clock-leeway`;
    /// must be what the fleet serves).
    #[arg(long = "leeway", visible_alias = "clock-leeway", env = "REQSTATE_CLOCK_LEEWAY", value_name = "SECONDS", default_value_t = Policy::DEFAULT_CLOCK_LEEWAY)]
    pub clock_leeway: u64,
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

/// Where the keys of `mint`, `verify`, `consume`, `seal` and `unseal` come
/// from: a keyring file, or a running sidecar.
#[derive(Debug, Args)]
pub struct LocalKeyringArgs {
    /// The keyring file (not with --connect).
    #[arg(
        long,
        env = "REQSTATE_KEYRING",
        value_name = "FILE",
        required_unless_present = "connect"
    )]
    pub keyring: Option<PathBuf>,
    /// Or a running sidecar.
    #[command(flatten)]
    pub remote: RemoteArgs,
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
    #[arg(long, allow_hyphen_values = true)]
    pub tool: String,
    /// Context bound into the token: its UTF-8 bytes. Default: empty.
    #[arg(
        long,
        value_name = "TEXT",
        group = "context_source",
        allow_hyphen_values = true
    )]
    pub context: Option<String>,
    /// Context bound into the token, as hex (even length, either case).
    #[arg(
        long,
        value_name = "HEX",
        group = "context_source",
        allow_hyphen_values = true
    )]
    pub context_hex: Option<String>,
    /// Context bound into the token: the bytes of this file, as they are.
    #[arg(long, value_name = "FILE", group = "context_source")]
    pub context_file: Option<PathBuf>,
    /// The policy and clock of a local run.
    #[command(flatten)]
    pub policy: LocalPolicyArgs,
}

/// The clock and policy of a local run (a sidecar has its own: these are
/// refused with --connect).
#[derive(Debug, Args)]
pub struct LocalPolicyArgs {
    /// The clock reading to use, in unix seconds. Default: the system clock.
    #[arg(long, value_name = "UNIX_SECONDS")]
    pub now: Option<u64>,
    /// Longest token minted or accepted, in characters. Default: 8192.
    #[arg(long, value_name = "CHARS")]
    pub max_token_len: Option<usize>,
    /// Clock leeway for issue and expiry times, in seconds (at most 600).
    /// Default: 60.
    #[arg(long, value_name = "SECONDS")]
    pub clock_leeway: Option<u64>,
    /// Longest lifetime minted or accepted, in seconds (at most 30 days).
    /// Default: 86400.
    #[arg(long, value_name = "SECONDS")]
    pub max_lifetime: Option<u64>,
}

impl LocalPolicyArgs {
    /// The first flag given, by name (they have no meaning with --connect).
    pub fn first_given(&self) -> Option<&'static str> {
        [
            (self.now.is_some(), "--now"),
            (self.max_token_len.is_some(), "--max-token-len"),
            (self.clock_leeway.is_some(), "--clock-leeway"),
            (self.max_lifetime.is_some(), "--max-lifetime"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

/// `reqstate mint`.
#[derive(Debug, Args)]
pub struct MintArgs {
    /// Keys, tool, context, clock and policy.
    #[command(flatten)]
    pub codec: LocalCodecArgs,
    /// The step the token is for.
    #[arg(long, allow_hyphen_values = true)]
    pub step: String,
    /// The state, as JSON text (docs/CLI.md gives its CBOR form). Default: null.
    #[arg(
        long,
        value_name = "JSON",
        conflicts_with = "state_cbor_hex",
        allow_hyphen_values = true
    )]
    pub state_json: Option<String>,
    /// The state, as one CBOR data item in hex, embedded as given (it must be
    /// in preferred serialization).
    #[arg(long, value_name = "HEX", allow_hyphen_values = true)]
    pub state_cbor_hex: Option<String>,
    /// Lifetime in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600,
          allow_hyphen_values = true, value_parser = seconds)]
    pub ttl: u64,
    /// Mint a single-use token (FORMAT.md §5.1): accepted once, by a
    /// verifier that consumes it.
    #[arg(long)]
    pub single_use: bool,
}

/// `reqstate verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Keys, tool, context, clock and policy.
    #[command(flatten)]
    pub codec: LocalCodecArgs,
    /// The step the token must be for, if any. (`--step` is a deprecated
    /// alias.)
    #[arg(long, alias = "step", value_name = "STEP", allow_hyphen_values = true)]
    pub expected_step: Option<String>,
    /// The token.
    #[command(flatten)]
    pub token: TokenArgs,
    /// Check a single-use token as a consuming verifier does (FORMAT.md §8
    /// step 15). The spent-token record lives only for this run unless
    /// `--replay-store` names a Redis: then the token is spent there, for
    /// every verifier sharing it. With --connect, the sidecar's store spends
    /// it (`reqstate consume`).
    #[arg(long)]
    pub consume: bool,
    /// The shared spent-token store.
    #[command(flatten)]
    pub replay: ReplayArgs,
}

/// `reqstate consume`: `verify --consume`.
#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// Keys, tool, context, clock and policy.
    #[command(flatten)]
    pub codec: LocalCodecArgs,
    /// The step the token must be for, if any.
    #[arg(long, value_name = "STEP", allow_hyphen_values = true)]
    pub expected_step: Option<String>,
    /// The token.
    #[command(flatten)]
    pub token: TokenArgs,
    /// The shared spent-token store (needed without --connect).
    #[command(flatten)]
    pub replay: ReplayArgs,
}

impl From<ConsumeArgs> for VerifyArgs {
    fn from(args: ConsumeArgs) -> Self {
        VerifyArgs {
            codec: args.codec,
            expected_step: args.expected_step,
            token: args.token,
            consume: true,
            replay: args.replay,
        }
    }
}

/// A token argument: positional or `--token`, `-` for standard input.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The token, or `-` to read it from standard input (the token itself,
    /// or the JSON that `mint` or `seal` prints: its `token` is taken).
    #[arg(
        long = "token",
        value_name = "TOKEN",
        conflicts_with = "token",
        allow_hyphen_values = true
    )]
    pub token_flag: Option<String>,
    /// The token, or `-` to read it from standard input (the token itself,
    /// or the JSON that `mint` or `seal` prints: its `token` is taken).
    #[arg(required_unless_present = "token_flag")]
    pub token: Option<String>,
}

/// The shared spent-token store of a local `verify --consume` / `consume`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// With `--consume`: record the token in this Redis
    /// (`redis://[user:password@]host:port[/db]`, `rediss://…`,
    /// `unix:///path`), by the rule every implementation follows
    /// (docs/SINGLE_USE.md).
    #[arg(long, value_name = "URL")]
    pub replay_store: Option<String>,
    /// With `--replay-store`: prefix of the record names.
    #[arg(long, value_name = "PREFIX", requires = "replay_store",
          default_value = reqstate_spent_store::DEFAULT_KEY_PREFIX)]
    pub replay_key_prefix: String,
    /// With `--replay-store`: deadline of the store call, in milliseconds.
    #[arg(
        long,
        value_name = "MS",
        requires = "replay_store",
        default_value_t = 1000
    )]
    pub replay_timeout_ms: u64,
    /// With `--replay-store`: how far this clock may be from Redis's, in
    /// milliseconds.
    #[arg(
        long,
        value_name = "MS",
        requires = "replay_store",
        default_value_t = 2000
    )]
    pub replay_max_skew_ms: u64,
}

/// Associated data of `seal` and `unseal` (empty by default).
#[derive(Debug, Args)]
pub struct AadArgs {
    /// Associated data bound into the sealed token: its UTF-8 bytes.
    #[arg(
        long,
        value_name = "TEXT",
        group = "aad_source",
        allow_hyphen_values = true
    )]
    pub aad: Option<String>,
    /// Associated data, as hex.
    #[arg(
        long,
        value_name = "HEX",
        group = "aad_source",
        allow_hyphen_values = true
    )]
    pub aad_hex: Option<String>,
}

/// `reqstate seal`.
#[derive(Debug, Args)]
pub struct SealArgs {
    /// Where the keys come from.
    #[command(flatten)]
    pub keys: LocalKeyringArgs,
    /// The policy and clock of a local run.
    #[command(flatten)]
    pub policy: LocalPolicyArgs,
    /// The payload: its UTF-8 bytes.
    #[arg(
        long,
        value_name = "TEXT",
        group = "payload_source",
        allow_hyphen_values = true
    )]
    pub payload: Option<String>,
    /// The payload, as hex.
    #[arg(
        long,
        value_name = "HEX",
        group = "payload_source",
        allow_hyphen_values = true
    )]
    pub payload_hex: Option<String>,
    /// The payload: the bytes of this file, as they are.
    #[arg(long, value_name = "FILE", group = "payload_source")]
    pub payload_file: Option<PathBuf>,
    /// Associated data.
    #[command(flatten)]
    pub aad: AadArgs,
}

/// `reqstate unseal`.
#[derive(Debug, Args)]
pub struct UnsealArgs {
    /// Where the keys come from.
    #[command(flatten)]
    pub keys: LocalKeyringArgs,
    /// The policy and clock of a local run.
    #[command(flatten)]
    pub policy: LocalPolicyArgs,
    /// Associated data.
    #[command(flatten)]
    pub aad: AadArgs,
    /// The token.
    #[command(flatten)]
    pub token: TokenArgs,
}

/// A number of seconds: a clear message for `-1`, `1.5` or `ten`, where
/// clap would take `-1` for a flag.
fn seconds(text: &str) -> Result<u64, String> {
    text.parse::<u64>().map_err(|_| {
        format!("expected a whole number of seconds (0 to 18446744073709551615), not `{text}`")
    })
}

/// `reqstate inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The token, or `-` to read it from standard input.
    pub token: String,
}
