//! A real `redis-server` for tests (the Debian package; scripts/test.sh
//! installs it): standalone on loopback TCP and a Unix socket in a temp dir,
//! optionally with append-only persistence, or a three-master Redis Cluster
//! on loopback ports. Killed on drop.

#![allow(dead_code, unreachable_pub)] // Each test file uses a part of it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::sidecar_process::{KillOnDrop, TestResult, free_port};

/// One redis-server process.
pub struct RedisServer {
    process: Option<KillOnDrop>,
    pub dir: PathBuf,
    pub port: u16,
    pub socket: PathBuf,
    appendonly: bool,
    cluster: bool,
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a standalone server in `dir`, persisting every write to an
    /// append-only file if `appendonly`.
    pub fn start(dir: &Path, appendonly: bool) -> TestResult<RedisServer> {
        Self::start_on(dir, free_port()?, appendonly, false)
    }

    /// Starts a server whose TCP port speaks only TLS (`rediss://`), with
    /// this certificate and key; clients are not asked for certificates.
    pub fn start_tls(dir: &Path, cert: &Path, key: &Path, ca: &Path) -> TestResult<RedisServer> {
        let port = free_port()?;
        let extra = [
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--tls-cert-file",
            &cert.display().to_string(),
            "--tls-key-file",
            &key.display().to_string(),
            "--tls-ca-cert-file",
            &ca.display().to_string(),
            "--tls-auth-clients",
            "no",
        ]
        .map(String::from)
        .to_vec();
        Self::start_with(dir, port, false, false, extra)
    }

    fn start_on(dir: &Path, port: u16, appendonly: bool, cluster: bool) -> TestResult<RedisServer> {
        Self::start_with(dir, port, appendonly, cluster, Vec::new())
    }

    fn start_with(
        dir: &Path,
        port: u16,
        appendonly: bool,
        cluster: bool,
        extra: Vec<String>,
    ) -> TestResult<RedisServer> {
        std::fs::create_dir_all(dir)?;
        let mut server = RedisServer {
            process: None,
            dir: dir.to_path_buf(),
            port,
            socket: dir.join("redis.sock"),
            appendonly,
            cluster,
            extra,
        };
        server.launch()?;
        Ok(server)
    }

    fn launch(&mut self) -> TestResult {
        let mut command = Command::new("redis-server");
        command
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--unixsocket")
            .arg(&self.socket)
            .arg("--unixsocketperm")
            .arg("700")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--save")
            .arg("")
            .arg("--protected-mode")
            .arg("no")
            .arg("--logfile")
            .arg(self.dir.join("redis.log"));
        if self.appendonly {
            command
                .arg("--appendonly")
                .arg("yes")
                .arg("--appendfsync")
                .arg("always");
        }
        // Later flags win: a TLS server replaces `--port`.
        command.args(&self.extra);
        if self.cluster {
            command
                .arg("--cluster-enabled")
                .arg("yes")
                .arg("--cluster-config-file")
                .arg(self.dir.join("nodes.conf"));
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!("cannot start redis-server (apt-get install redis-server): {e}")
            })?;
        self.process = Some(KillOnDrop(child));
        self.wait_for_ping(Duration::from_secs(10))
    }

    fn wait_for_ping(&self, timeout: Duration) -> TestResult {
        let deadline = Instant::now() + timeout;
        loop {
            if self
                .cli(&["PING"])
                .map(|o| o.trim() == "PONG")
                .unwrap_or(false)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("redis-server on port {} did not answer", self.port).into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs redis-cli against this server (on its Unix socket, which
    /// never needs TLS); its standard output.
    pub fn cli(&self, args: &[&str]) -> TestResult<String> {
        let out = Command::new("redis-cli")
            .arg("-s")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
        }
        Ok(String::from_utf8(out.stdout)?)
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn tcp_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `unix://<socket>`.
    pub fn unix_url(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Kills the server at once (SIGKILL): no shutdown, no final save.
    pub fn kill(&mut self) {
        self.process = None;
        // The socket file stays behind after SIGKILL; a restart replaces it.
    }

    /// Starts it again on the same port, socket and directory (so an
    /// append-only file is read back).
    pub fn restart(&mut self) -> TestResult {
        self.kill();
        self.launch()
    }

    /// Keys whose name starts with `prefix`.
    pub fn count_keys(&self, prefix: &str) -> TestResult<usize> {
        let out = self.cli(&["--scan", "--pattern", &format!("{prefix}*")])?;
        Ok(out.lines().filter(|l| !l.is_empty()).count())
    }
}

/// A Redis Cluster of three masters (no replicas) on loopback ports.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start(dir: &Path) -> TestResult<RedisCluster> {
        let mut nodes = Vec::new();
        for i in 0..3 {
            nodes.push(RedisServer::start_on(
                &dir.join(format!("node{i}")),
                free_port()?,
                false,
                true,
            )?);
        }
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .arg("--cluster-replicas")
            .arg("0")
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&out.stdout)
            )
            .into());
        }
        let cluster = RedisCluster { nodes };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !cluster.nodes.iter().all(|n| {
            n.cli(&["CLUSTER", "INFO"])
                .is_ok_and(|i| i.contains("cluster_state:ok"))
        }) {
            if Instant::now() > deadline {
                return Err("the cluster did not reach cluster_state:ok".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(cluster)
    }

    /// The nodes' URLs, comma-separated, for `--replay-store`.
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(RedisServer::tcp_url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Keys with `prefix` on every node together.
    pub fn count_keys(&self, prefix: &str) -> TestResult<usize> {
        let mut total = 0;
        for node in &self.nodes {
            total += node.count_keys(prefix)?;
        }
        Ok(total)
    }
}
