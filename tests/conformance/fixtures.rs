//! What every test reads: the shared vectors (tests/vectors/v1.json), the
//! keyrings written for a run (the vectors' keys, and the table's "main"
//! with its neighbours), and the argument helpers.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use crate::sidecar_process::TestResult;

/// The fixed clock (`--now`) of the table and of the mint refusals:
/// 2025-11-30T00:00:00Z.
pub(crate) const NOW: u64 = 1_764_460_800;

/// One run's keyring files (in a temporary directory, mode 0600) by name,
/// and the parsed tests/vectors/v1.json.
pub(crate) struct Fixtures {
    pub(crate) dir: tempfile::TempDir,
    keyrings: BTreeMap<&'static str, String>,
    pub(crate) vectors: Value,
}

fn secret(seed: u8) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode([seed; 32])
}

fn key_toml(id: u64, algorithm: &str, status: &str, secret: &str) -> String {
    format!(
        "\n[[key]]\nid = {id}\nalgorithm = \"{algorithm}\"\nstatus = \"{status}\"\nsecret = \"{secret}\"\n"
    )
}

/// Writes the keyrings and reads the vectors: "vectors" (every vector key),
/// "only-ID" (one vector key as the primary), "main", "main-hmac", "old",
/// "stranger", "impostor", "invalid", and "missing" (a path with no file).
pub(crate) fn fixtures() -> TestResult<Fixtures> {
    let dir = tempfile::tempdir()?;
    let vectors: Value = serde_json::from_str(&std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors/v1.json"),
    )?)?;
    let mut texts: BTreeMap<&'static str, String> = BTreeMap::new();

    // The vectors' keyring, and each vector key alone as the primary.
    let mut all = String::from("version = 1\n");
    for key in vectors["keys"].as_array().ok_or("no keys")? {
        let id = key["id"].as_u64().ok_or("key id")?;
        let algorithm = key["algorithm"].as_str().ok_or("algorithm")?;
        let secret = key["secret"].as_str().ok_or("secret")?;
        all.push_str(&key_toml(
            id,
            algorithm,
            key["status"].as_str().ok_or("status")?,
            secret,
        ));
        let name: &'static str = Box::leak(format!("only-{id}").into_boxed_str());
        texts.insert(name, key_toml(id, algorithm, "primary", secret));
    }
    texts.insert("vectors", all);

    // The table's keyrings: id 1 HMAC, 2 XChaCha, 3 retired in "main".
    let (s1, s2, s3, s9) = (secret(1), secret(2), secret(3), secret(9));
    let hmac = "hmac-sha256";
    let xchacha = "xchacha20-poly1305";
    let ring = |keys: &[(u64, &str, &str, &str)]| -> String {
        keys.iter()
            .map(|(id, alg, status, secret)| key_toml(*id, alg, status, secret))
            .collect()
    };
    texts.insert(
        "main",
        ring(&[
            (1, hmac, "active", &s1),
            (2, xchacha, "primary", &s2),
            (3, hmac, "retired", &s3),
        ]),
    );
    texts.insert(
        "main-hmac",
        ring(&[
            (1, hmac, "primary", &s1),
            (2, xchacha, "active", &s2),
            (3, hmac, "retired", &s3),
        ]),
    );
    // Key 3 while it was still in use.
    texts.insert("old", ring(&[(3, hmac, "primary", &s3)]));
    // A key "main" has never heard of.
    texts.insert("stranger", ring(&[(9, hmac, "primary", &s9)]));
    // Id 2 under the other algorithm.
    texts.insert("impostor", ring(&[(2, hmac, "primary", &s2)]));
    texts.insert(
        "invalid",
        "[[key]]\nid = 1\nstatus = \"active\"\nsecret = \"AAAA\"\n".into(),
    );

    let mut keyrings = BTreeMap::new();
    for (name, text) in texts {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        keyrings.insert(name, path.display().to_string());
    }
    keyrings.insert(
        "missing",
        dir.path().join("missing.toml").display().to_string(),
    );
    Ok(Fixtures {
        dir,
        keyrings,
        vectors,
    })
}

impl Fixtures {
    /// The path of the keyring file `name`.
    pub(crate) fn keyring(&self, name: &str) -> TestResult<String> {
        Ok(self
            .keyrings
            .get(name)
            .ok_or_else(|| format!("no keyring {name}"))?
            .clone())
    }

    /// `--context-hex HEX`, or `--context-file` for a context too long for
    /// one argument (Linux allows 128 KiB).
    pub(crate) fn context_args(&self, hex: &str) -> TestResult<Vec<String>> {
        if hex.len() <= 16 * 1024 {
            return Ok(strings(&["--context-hex", hex]));
        }
        let path = self.dir.path().join(format!("context-{}.bin", hex.len()));
        std::fs::write(&path, hex::decode(hex)?)?;
        Ok(vec!["--context-file".into(), path.display().to_string()])
    }

    /// `command --keyring PATH` followed by `rest`.
    pub(crate) fn args(
        &self,
        command: &str,
        keyring: &str,
        rest: &[String],
    ) -> TestResult<Vec<String>> {
        let mut args = vec![
            command.to_string(),
            "--keyring".into(),
            self.keyring(keyring)?,
        ];
        args.extend_from_slice(rest);
        Ok(args)
    }
}

/// Owned copies of `args`.
pub(crate) fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// `--now AT`.
pub(crate) fn now(at: u64) -> [String; 2] {
    ["--now".into(), at.to_string()]
}

/// Fails on a field of `object` that is not in `known`: a vector field this
/// harness does not know is never ignored.
pub(crate) fn check_fields(name: &str, object: &Value, known: &[&str]) -> TestResult {
    for key in object.as_object().ok_or("not an object")?.keys() {
        if !known.contains(&key.as_str()) {
            return Err(format!(
                "vector {name:?}: field {key:?} unknown to this harness: handle it here"
            )
            .into());
        }
    }
    Ok(())
}
