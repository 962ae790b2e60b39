//! A real `reqstate` sidecar process for integration tests: temp-dir keyring, free ports, readiness by health polling, killed on drop.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The `reqstate` binary Cargo built for the sidecar package's tests
/// (crates/reqstate-sidecar/tests/sidecar). Cargo sets no
/// `CARGO_BIN_EXE_reqstate` in other packages: the conformance tests (tests/)
/// find the binary in their own target directory ([`binary`]), and
/// benches/sidecar.rs names it with [`use_binary`].
pub const BIN: &str = match option_env!("CARGO_BIN_EXE_reqstate") {
    Some(path) => path,
    None => "",
};

static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Runs `path` instead of [`BIN`] in [`run_cli`] and [`Sidecar::start`]
/// (benches/sidecar.rs). The first call wins.
pub fn use_binary(path: PathBuf) {
    let _ = BINARY.set(path);
}

/// The binary under test: [`use_binary`]'s, else Cargo's
/// `CARGO_BIN_EXE_reqstate`, else `$REQSTATE_BIN`, else `reqstate` in the
/// target directory this test runs from (`target/<profile>/deps/<test>` →
/// `target/<profile>/reqstate`, which `cargo test --workspace` builds).
pub fn binary() -> TestResult<&'static Path> {
    if let Some(path) = BINARY.get() {
        return Ok(path);
    }
    if !BIN.is_empty() {
        return Ok(Path::new(BIN));
    }
    let found = match std::env::var_os("REQSTATE_BIN") {
        Some(path) => PathBuf::from(path),
        None => {
            let exe = std::env::current_exe()?;
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .ok_or("the test binary is not in a target/<profile>/deps directory")?;
            profile_dir.join("reqstate")
        }
    };
    if !found.is_file() {
        return Err(format!(
            "no reqstate binary at {}: build it first (`cargo build -p reqstate-sidecar --bin reqstate`, \
             or `cargo test --workspace`, which builds it), or name one with REQSTATE_BIN",
            found.display()
        )
        .into());
    }
    Ok(BINARY.get_or_init(|| found))
}

/// A 32-byte secret as base64, different per `seed`.
pub fn secret(seed: u8) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode([seed; 32])
}

/// A keyring file body: `(id, status)` pairs, XChaCha20-Poly1305 keys.
pub fn keyring_toml(keys: &[(u32, &str)]) -> String {
    let mut out = String::from("# test keyring\nversion = 1\n");
    for (id, status) in keys {
        out.push_str(&format!(
            "\n[[key]]\nid = {id}\nstatus = \"{status}\"\nsecret = \"{}\"\n",
            secret(u8::try_from(*id).unwrap_or(255))
        ));
    }
    out
}

/// Writes a file with mode 0600, replacing it atomically (as an editor or
/// `reqstate keys` does).
pub fn write_private(path: &Path, text: &str) -> TestResult {
    let tmp = path.with_extension("writing");
    std::fs::write(&tmp, text)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// A TCP port nothing listens on right now.
pub fn free_port() -> TestResult<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A command's standard output as JSON, or an error showing what it printed
/// (both streams).
pub fn stdout_json(out: &Output) -> TestResult<serde_json::Value> {
    Ok(serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })?)
}

/// Runs the binary to completion (for CLI tests).
pub fn run_cli(args: &[&str]) -> TestResult<Output> {
    Ok(Command::new(binary()?)
        .args(args)
        .env("REQSTATE_LOG", "warn")
        .stdin(Stdio::null())
        .output()?)
}

/// `reqstate keys ARGS --keyring KEYRING`: its standard output, or an error
/// with its standard error when it exits non-zero.
pub fn keys_cli(args: &[&str], keyring: &Path) -> TestResult<String> {
    let keyring = keyring.display().to_string();
    let mut argv = vec!["keys"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["--keyring", &keyring]);
    let out = run_cli(&argv)?;
    if !out.status.success() {
        return Err(format!(
            "reqstate {argv:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A running sidecar. Killed and reaped on drop.
pub struct Sidecar {
    child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub keyring: PathBuf,
    pub unix: PathBuf,
    pub tcp: SocketAddr,
    pub metrics: SocketAddr,
    stderr: PathBuf,
}

/// Lays out the keyring under the sidecar's temp dir; returns its path.
pub type PrepareKeyring = dyn FnOnce(&Path) -> TestResult<PathBuf>;

/// How to start a sidecar.
pub struct SidecarOptions {
    /// The keyring file's content.
    pub keyring: String,
    pub extra_args: Vec<String>,
    /// Require this bearer token (written to `<dir>/auth-token`).
    pub auth_token: Option<String>,
    /// Write the keyring at `keyring_path` instead of `<dir>/keyring.toml`
    /// (the directory is created by the caller's `prepare`).
    pub prepare: Option<Box<PrepareKeyring>>,
    /// Environment variables for the sidecar process.
    pub env: Vec<(String, String)>,
}

impl SidecarOptions {
    pub fn new(keyring: String) -> Self {
        SidecarOptions {
            keyring,
            extra_args: Vec::new(),
            auth_token: None,
            prepare: None,
            env: Vec::new(),
        }
    }

    pub fn env(mut self, name: &str, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    pub fn auth_token(mut self, token: &str) -> Self {
        self.auth_token = Some(token.into());
        self
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_args.push(arg.into());
        self
    }
}

impl Sidecar {
    /// Starts a sidecar on a fresh temp dir, listening on a Unix socket and
    /// a free loopback TCP port, with metrics, and waits until health says
    /// SERVING.
    pub async fn start(options: SidecarOptions) -> TestResult<Sidecar> {
        let dir = tempfile::tempdir()?;
        let keyring = match options.prepare {
            Some(prepare) => prepare(dir.path())?,
            None => {
                let path = dir.path().join("keyring.toml");
                write_private(&path, &options.keyring)?;
                path
            }
        };
        let unix = dir.path().join("reqstate.sock");
        let tcp: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
        let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
        let stderr = dir.path().join("stderr.log");
        let mut command = Command::new(binary()?);
        command.arg("serve");
        if let Some(token) = &options.auth_token {
            let path = dir.path().join("auth-token");
            write_private(&path, &format!("{token}\n"))?;
            command.arg("--auth-token-file").arg(path);
        }
        let child = command
            .arg("--keyring")
            .arg(&keyring)
            .arg("--listen")
            .arg(format!("unix:{}", unix.display()))
            .arg("--listen")
            .arg(format!("tcp:{tcp}"))
            .arg("--metrics")
            .arg(metrics.to_string())
            .arg("--reload-debounce-ms")
            .arg("50")
            .args(&options.extra_args)
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .env("REQSTATE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()?;
        let mut sidecar = Sidecar {
            child: Some(child),
            dir,
            keyring,
            unix,
            tcp,
            metrics,
            stderr,
        };
        sidecar.wait_until_serving(Duration::from_secs(30)).await?;
        Ok(sidecar)
    }

    pub fn pid(&self) -> TestResult<nix::unistd::Pid> {
        let child = self
            .child
            .as_ref()
            .ok_or("the sidecar was already reaped")?;
        Ok(nix::unistd::Pid::from_raw(i32::try_from(child.id())?))
    }

    pub fn signal(&self, signal: nix::sys::signal::Signal) -> TestResult {
        nix::sys::signal::kill(self.pid()?, signal)?;
        Ok(())
    }

    /// The sidecar's log so far, for assertion messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits for the process to exit, up to `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> TestResult<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self
            .child
            .as_mut()
            .ok_or("the sidecar was already reaped")?;
        loop {
            if let Some(status) = child.try_wait()? {
                self.child = None;
                return Ok(status);
            }
            if Instant::now() > deadline {
                return Err("the sidecar did not exit in time".into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_until_serving(&mut self, timeout: Duration) -> TestResult {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                self.child = None;
                return Err(format!("sidecar exited early: {status}\n{}", self.log()).into());
            }
            // Over the Unix socket, which every test sidecar has and which
            // never uses TLS.
            if let Ok(channel) = unix_channel(&self.unix).await {
                let status = HealthClient::new(channel)
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await;
                if let Ok(response) = status
                    && response.get_ref().status == ServingStatus::Serving as i32
                {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!("sidecar not serving in time\n{}", self.log()).into());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub async fn tcp_client(&self) -> TestResult<RequestStateClient<Channel>> {
        Ok(RequestStateClient::new(tcp_channel(self.tcp).await?))
    }

    pub async fn unix_client(&self) -> TestResult<RequestStateClient<Channel>> {
        Ok(RequestStateClient::new(unix_channel(&self.unix).await?))
    }

    /// `ListKeys` over the Unix socket, without a bearer token.
    pub async fn list_keys(&self) -> TestResult<reqstate_proto::v1::ListKeysResponse> {
        Ok(self
            .unix_client()
            .await?
            .list_keys(reqstate_proto::v1::ListKeysRequest {})
            .await?
            .into_inner())
    }

    /// The Prometheus text from the metrics listener.
    pub async fn metrics_text(&self) -> TestResult<String> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut stream = tokio::net::TcpStream::connect(self.metrics).await?;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await?;
        let mut out = String::new();
        stream.read_to_string(&mut out).await?;
        Ok(out)
    }

    /// The value of one metric series (exact line prefix), or 0 if absent.
    pub async fn metric(&self, series: &str) -> TestResult<f64> {
        let text = self.metrics_text().await?;
        for line in text.lines() {
            if let Some(value) = line
                .strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
            {
                return Ok(value.trim().parse()?);
            }
        }
        Ok(0.0)
    }

    /// Waits until one metric series (as [`Sidecar::metric`]) is at least
    /// `at_least`, up to `timeout`.
    pub async fn metric_reaches(
        &self,
        series: &str,
        at_least: f64,
        timeout: Duration,
    ) -> TestResult {
        let what = format!("{series} >= {at_least}");
        eventually(timeout, &what, || async {
            Ok((self.metric(series).await? >= at_least).then_some(()))
        })
        .await
    }
}

/// A child process killed and reaped when dropped, so a failing test never
/// leaves a sidecar running.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub async fn tcp_channel(addr: SocketAddr) -> TestResult<Channel> {
    Ok(Endpoint::from_shared(format!("http://{addr}"))?
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await?)
}

pub async fn unix_channel(path: &Path) -> TestResult<Channel> {
    let path = path.to_path_buf();
    // The URI gives only the `:authority` sent (localhost: well-formed, so
    // nothing relies on vendor/h2's patch); the connector dials the socket.
    Ok(Endpoint::try_from("http://localhost")?
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?))
            }
        }))
        .await?)
}

/// A request carrying `authorization: Bearer <token>`.
pub fn with_bearer<T>(message: T, token: &str) -> TestResult<tonic::Request<T>> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse()?);
    Ok(request)
}

/// Polls `check` every 20 ms until it returns `Some`, up to `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> TestResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = TestResult<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
