//! The keyring file against the real binary: who may own and replace it (file owner, directory modes, sticky directories, the Kubernetes Secret layout), and reloads that must never hang (a FIFO in its place, directory events that never stop).
//!
//! The ownership cases chown files to uid 65534, which needs root (as CI runs).

use crate::sidecar_process;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use sidecar_process::{
    Sidecar, SidecarOptions, TestResult, eventually, keyring_toml, run_cli, write_private,
};
use tonic::transport::Channel;

/// Not root, not the test's user: the "someone else" of these tests.
const OTHER_UID: u32 = 65534;

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn chmod(path: &Path, mode: u32) -> TestResult {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// `reqstate keys list` on `path`: the exit code and stderr. It loads the
/// keyring exactly as `serve` does at start and on every reload.
fn keys_list(path: &Path, allow_insecure: bool) -> TestResult<(Option<i32>, String)> {
    let keyring = path.display().to_string();
    let mut argv = vec!["keys", "list", "--keyring", &keyring];
    if allow_insecure {
        argv.push("--allow-insecure-keyring-permissions");
    }
    let out = run_cli(&argv)?;
    Ok((
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// `reqstate serve` with this keyring: its exit code and stderr. A sidecar
/// still running after 15 s accepted the keyring: it is killed, and that is
/// an error.
fn serve_exit(keyring: &Path, socket: &Path) -> TestResult<(Option<i32>, String)> {
    let log = socket.with_extension("log");
    let mut child = std::process::Command::new(sidecar_process::BIN)
        .arg("serve")
        .arg("--keyring")
        .arg(keyring)
        .arg("--listen")
        .arg(format!("unix:{}", socket.display()))
        .env("REQSTATE_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((status.code(), std::fs::read_to_string(&log)?));
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "serve accepted the keyring and kept running: {}",
                std::fs::read_to_string(&log)?
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_loads(path: &Path, allow_insecure: bool, what: &str) -> TestResult {
    let (code, stderr) = keys_list(path, allow_insecure)?;
    assert_eq!(code, Some(0), "{what}: refused: {stderr}");
    Ok(())
}

fn assert_refused(path: &Path, allow_insecure: bool, what: &str, says: &str) -> TestResult {
    let (code, stderr) = keys_list(path, allow_insecure)?;
    assert_eq!(code, Some(64), "{what}: not refused: {stderr}");
    assert!(
        stderr.contains(says),
        "{what}: expected {says:?} in: {stderr}"
    );
    Ok(())
}

async fn generation_and_keys(
    client: &RequestStateClient<Channel>,
) -> TestResult<(u64, Vec<(u32, pb::KeyStatus)>)> {
    let listed = client
        .clone()
        .list_keys(pb::ListKeysRequest {})
        .await?
        .into_inner();
    Ok((
        listed.keyring_generation,
        listed.keys.iter().map(|k| (k.id, k.status())).collect(),
    ))
}

async fn wait_for_generation(
    client: &RequestStateClient<Channel>,
    generation: u64,
    what: &str,
) -> TestResult<Vec<(u32, pb::KeyStatus)>> {
    eventually(Duration::from_secs(10), what, || async {
        let (seen, keys) = generation_and_keys(client).await?;
        Ok((seen >= generation).then_some(keys))
    })
    .await
}

async fn wait_for_failures(sidecar: &Sidecar, at_least: f64, what: &str) -> TestResult {
    eventually(Duration::from_secs(10), what, || async {
        Ok((sidecar
            .metric("reqstate_keyring_reload_failures_total")
            .await?
            >= at_least)
            .then_some(()))
    })
    .await
}

#[test]
fn a_keyring_owned_by_another_user_is_refused_even_with_the_escape_hatch() -> TestResult {
    if !is_root() {
        println!("skipped: chown to another uid needs root");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("keyring.toml");
    write_private(&path, &keyring_toml(&[(1, "primary")]))?;
    std::os::unix::fs::chown(&path, Some(OTHER_UID), Some(OTHER_UID))?;

    // At start: exit 64 before binding anything.
    let socket = dir.path().join("r.sock");
    let (code, stderr) = serve_exit(&path, &socket)?;
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("owned by uid 65534"), "{stderr}");
    assert!(!socket.exists());
    // The escape hatch is about who may read, not who may write.
    assert_refused(&path, false, "0600, owned by 65534", "owned by uid 65534")?;
    assert_refused(
        &path,
        true,
        "0600, owned by 65534, flag",
        "owned by uid 65534",
    )?;

    // Owned by root (the test's own uid here): accepted.
    std::os::unix::fs::chown(&path, Some(0), Some(0))?;
    assert_loads(&path, false, "0600, owned by root")?;
    Ok(())
}

#[test]
fn writable_keyring_directories_are_refused_sticky_ones_are_not() -> TestResult {
    let dir = tempfile::tempdir()?;
    let volume = dir.path().join("volume");
    std::fs::create_dir(&volume)?;
    let path = volume.join("keyring.toml");
    write_private(&path, &keyring_toml(&[(1, "primary")]))?;
    assert_loads(&path, false, "0700 directory")?;

    for mode in [0o777, 0o770, 0o722, 0o757] {
        chmod(&volume, mode)?;
        let what = format!("directory mode {mode:o}");
        assert_refused(&path, false, &what, "chmod go-w")?;
        assert_refused(&path, true, &what, "chmod go-w")?;
    }
    // Sticky (as /tmp, or a Kubernetes Secret volume's tmpfs): others may
    // add entries but not replace ours.
    chmod(&volume, 0o1777)?;
    assert_loads(&path, false, "sticky 1777 directory")?;

    // The directory of the resolved file counts, not only the link's.
    chmod(&volume, 0o700)?;
    let real = dir.path().join("real");
    std::fs::create_dir(&real)?;
    write_private(&real.join("keyring.toml"), &keyring_toml(&[(1, "primary")]))?;
    let link = volume.join("linked.toml");
    symlink(real.join("keyring.toml"), &link)?;
    assert_loads(&link, false, "link into a private directory")?;
    chmod(&real, 0o775)?;
    assert_refused(
        &link,
        false,
        "link into a group-writable directory",
        "chmod go-w",
    )?;
    chmod(&real, 0o700)?;

    if is_root() {
        // A directory owned by someone else: its owner can replace the file.
        std::os::unix::fs::chown(&volume, Some(OTHER_UID), None)?;
        assert_refused(
            &path,
            true,
            "directory owned by 65534",
            "owned by uid 65534",
        )?;
        std::os::unix::fs::chown(&volume, Some(0), None)?;
        // In a sticky directory, a link that belongs to someone else is
        // theirs to repoint.
        chmod(&volume, 0o1777)?;
        std::os::unix::fs::lchown(&link, Some(OTHER_UID), None)?;
        assert_refused(
            &link,
            false,
            "someone else's link in a sticky directory",
            "sticky",
        )?;
        std::os::unix::fs::lchown(&link, Some(0), None)?;
        assert_loads(&link, false, "root's link in a sticky directory")?;
    }
    Ok(())
}

/// The layout kubelet makes for a Secret volume: root-owned files, mode
/// 0644 unless `defaultMode` says otherwise, in a timestamped directory
/// (0755) reached through `..data`, in a sticky tmpfs.
fn kubernetes_volume(root: &Path, file_mode: u32) -> TestResult<PathBuf> {
    let volume = root.join("secret");
    let first = volume.join("..2026_11_30_a");
    std::fs::create_dir_all(&first)?;
    write_private(
        &first.join("keyring.toml"),
        &keyring_toml(&[(1, "primary")]),
    )?;
    chmod(&first.join("keyring.toml"), file_mode)?;
    chmod(&first, 0o755)?;
    symlink("..2026_11_30_a", volume.join("..data"))?;
    symlink("..data/keyring.toml", volume.join("keyring.toml"))?;
    chmod(&volume, 0o1777)?;
    Ok(volume.join("keyring.toml"))
}

/// kubelet's update: a new timestamped directory, renamed in through `..data`.
fn kubernetes_update(volume: &Path, name: &str, dir_mode: u32, text: &str) -> TestResult {
    let next = volume.join(name);
    std::fs::create_dir_all(&next)?;
    write_private(&next.join("keyring.toml"), text)?;
    chmod(&next.join("keyring.toml"), 0o644)?;
    chmod(&next, dir_mode)?;
    symlink(name, volume.join("..data_tmp"))?;
    std::fs::rename(volume.join("..data_tmp"), volume.join("..data"))?;
    Ok(())
}

#[tokio::test]
async fn the_kubernetes_secret_layout_loads_and_a_writable_update_is_refused() -> TestResult {
    // Default mode 0644: readable by others, so only with the escape hatch.
    let dir = tempfile::tempdir()?;
    let path = kubernetes_volume(dir.path(), 0o644)?;
    assert_refused(&path, false, "0644 Secret", "chmod 600")?;
    assert_loads(&path, true, "0644 Secret, flag")?;
    // defaultMode: 0400 needs no flag.
    let dir = tempfile::tempdir()?;
    let path = kubernetes_volume(dir.path(), 0o400)?;
    assert_loads(&path, false, "0400 Secret")?;

    let sidecar = Sidecar::start(SidecarOptions {
        prepare: Some(Box::new(|dir: &Path| kubernetes_volume(dir, 0o644))),
        ..SidecarOptions::new(String::new()).arg("--allow-insecure-keyring-permissions")
    })
    .await?;
    let client = sidecar.unix_client().await?;
    let volume = sidecar.dir.path().join("secret");
    kubernetes_update(
        &volume,
        "..2026_11_30_b",
        0o755,
        &keyring_toml(&[(1, "primary"), (2, "active")]),
    )?;
    let keys = wait_for_generation(&client, 2, "the Secret update").await?;
    assert_eq!(
        keys,
        vec![(1, pb::KeyStatus::Primary), (2, pb::KeyStatus::Active)]
    );

    // An update whose directory anyone may write is refused, flag or not.
    kubernetes_update(
        &volume,
        "..2026_11_30_c",
        0o777,
        &keyring_toml(&[(1, "active"), (9, "primary")]),
    )?;
    wait_for_failures(&sidecar, 1.0, "the refused update").await?;
    let (generation, keys) = generation_and_keys(&client).await?;
    assert_eq!(generation, 2);
    assert_eq!(
        keys,
        vec![(1, pb::KeyStatus::Primary), (2, pb::KeyStatus::Active)]
    );
    let log = sidecar.log();
    assert!(log.contains("..2026_11_30_c"), "{log}");
    assert!(log.contains("chmod go-w"), "{log}");
    Ok(())
}

/// The review's scenario: the watched directory becomes writable by others,
/// and someone else drops a keyring with their own primary key in it.
#[tokio::test]
async fn keys_injected_through_a_writable_directory_are_refused_on_reload() -> TestResult {
    let sidecar = Sidecar::start(SidecarOptions::new(keyring_toml(&[(1, "primary")]))).await?;
    let client = sidecar.unix_client().await?;
    let dir = sidecar.dir.path();
    chmod(dir, 0o777)?;

    let injected = keyring_toml(&[(1, "active"), (9, "primary")]);
    let mut failures = 0.0;
    if is_root() {
        // Written by another user: the file is theirs.
        let theirs = dir.join("injected.toml");
        write_private(&theirs, &injected)?;
        std::os::unix::fs::chown(&theirs, Some(OTHER_UID), Some(OTHER_UID))?;
        std::fs::rename(&theirs, &sidecar.keyring)?;
        failures += 1.0;
        wait_for_failures(&sidecar, failures, "the refused injection").await?;
        assert!(
            sidecar.log().contains("owned by uid 65534"),
            "{}",
            sidecar.log()
        );
    }
    // Even a file of the right owner is not trusted in such a directory.
    write_private(&sidecar.keyring, &injected)?;
    failures += 1.0;
    wait_for_failures(&sidecar, failures, "the refused file in a 0777 directory").await?;
    let (generation, keys) = generation_and_keys(&client).await?;
    assert_eq!(generation, 1, "an injected keyring was loaded");
    assert_eq!(keys, vec![(1, pb::KeyStatus::Primary)]);
    assert!(sidecar.log().contains("chmod go-w"), "{}", sidecar.log());

    // Made private again, the next change is loaded.
    chmod(dir, 0o700)?;
    write_private(
        &sidecar.keyring,
        &keyring_toml(&[(1, "primary"), (2, "active")]),
    )?;
    let keys = wait_for_generation(&client, 2, "the reload once the directory is private").await?;
    assert_eq!(
        keys,
        vec![(1, pb::KeyStatus::Primary), (2, pb::KeyStatus::Active)]
    );
    Ok(())
}

/// Opening a FIFO for reading blocks until a writer comes. One renamed over
/// the keyring must be refused at once, and later reloads must still run.
#[tokio::test]
async fn a_fifo_in_place_of_the_keyring_does_not_stop_reloading() -> TestResult {
    let sidecar = Sidecar::start(SidecarOptions::new(keyring_toml(&[(1, "primary")]))).await?;
    let client = sidecar.unix_client().await?;
    let fifo = sidecar.dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg("-m")
        .arg("600")
        .arg(&fifo)
        .status()?;
    assert!(made.success());
    std::fs::rename(&fifo, &sidecar.keyring)?;
    wait_for_failures(&sidecar, 1.0, "the refused FIFO").await?;
    assert!(
        sidecar.log().contains("not a regular file"),
        "{}",
        sidecar.log()
    );

    // Later reloads, by directory change and by SIGHUP, still apply.
    write_private(
        &sidecar.keyring,
        &keyring_toml(&[(1, "primary"), (2, "active")]),
    )?;
    wait_for_generation(&client, 2, "the reload after the FIFO").await?;
    write_private(
        &sidecar.keyring,
        &keyring_toml(&[(1, "retired"), (2, "primary")]),
    )?;
    sidecar.signal(nix::sys::signal::Signal::SIGHUP)?;
    let keys = wait_for_generation(&client, 3, "the retirement after the FIFO").await?;
    assert_eq!(
        keys,
        vec![(1, pb::KeyStatus::Retired), (2, pb::KeyStatus::Primary)]
    );
    Ok(())
}

/// Something keeps writing in the keyring's directory (here every 5 ms,
/// well under the 50 ms debounce): a changed keyring is still loaded.
#[tokio::test]
async fn continuous_directory_events_do_not_postpone_a_reload_for_ever() -> TestResult {
    let sidecar = Sidecar::start(SidecarOptions::new(keyring_toml(&[(1, "primary")]))).await?;
    let client = sidecar.unix_client().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let noise = {
        let (stop, path) = (stop.clone(), sidecar.dir.path().join("noise"));
        std::thread::spawn(move || {
            let mut writes = 0u64;
            while !stop.load(Ordering::SeqCst) {
                if std::fs::write(&path, writes.to_string()).is_ok() {
                    writes += 1;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            writes
        })
    };
    write_private(
        &sidecar.keyring,
        &keyring_toml(&[(1, "primary"), (2, "active")]),
    )?;
    let reloaded = wait_for_generation(&client, 2, "a reload despite the noise").await;
    stop.store(true, Ordering::SeqCst);
    let writes = noise.join().map_err(|_| "the noise thread panicked")?;
    let keys = reloaded?;
    assert_eq!(
        keys,
        vec![(1, pb::KeyStatus::Primary), (2, pb::KeyStatus::Active)]
    );
    println!("reloaded while {writes} writes kept the directory busy");
    Ok(())
}
