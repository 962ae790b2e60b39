//! One refused reload per change of the file, against the real binary. The
//! sidecar's log is written in the keyring's own directory (the harness's
//! `stderr.log`, as an operator's `2>>/etc/reqstate/reqstate.log`): each
//! ERROR line is a directory event. Before the fix a bad line appended to
//! the keyring was refused about five times a second, each refusal's own log
//! line triggering the next.

use crate::sidecar_process;

use std::io::Write as _;
use std::time::Duration;

use sidecar_process::{Sidecar, SidecarOptions, TestResult, keyring_toml, write_private};

fn append(path: &std::path::Path, text: &str) -> TestResult {
    let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
    file.write_all(text.as_bytes())?;
    Ok(())
}

fn count(log: &str, needle: &str) -> usize {
    log.lines().filter(|l| l.contains(needle)).count()
}

/// Waits for the first refusal counted in `failures`, then 3 s more (the
/// sidecar's own log file is in the watched directory: every line it writes
/// is a directory event): still exactly one refusal, one `logged` line, one
/// ERROR.
async fn refused_once(sidecar: &Sidecar, failures: &str, logged: &str) -> TestResult {
    sidecar
        .metric_reaches(failures, 1.0, Duration::from_secs(10))
        .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let log = sidecar.log();
    assert_eq!(sidecar.metric(failures).await?, 1.0, "{log}");
    assert_eq!(count(&log, logged), 1, "{log}");
    assert_eq!(count(&log, " ERROR "), 1, "{log}");
    Ok(())
}

#[tokio::test]
async fn a_bad_keyring_is_refused_once_until_it_changes() -> TestResult {
    let text = keyring_toml(&[(1, "primary")]);
    let sidecar = Sidecar::start(SidecarOptions::new(text.clone())).await?;
    append(&sidecar.keyring, "this is not toml\n")?;
    refused_once(
        &sidecar,
        "reqstate_keyring_reload_failures_total",
        "keyring reload refused",
    )
    .await?;

    // A SIGHUP always reloads and reports, even the same bytes.
    sidecar.signal(nix::sys::signal::Signal::SIGHUP)?;
    sidecar
        .metric_reaches(
            "reqstate_keyring_reload_failures_total",
            2.0,
            Duration::from_secs(10),
        )
        .await?;

    // Fixed (a comment where the bad line was): one success, no failure more.
    write_private(&sidecar.keyring, &format!("{text}# fixed\n"))?;
    sidecar
        .metric_reaches(
            "reqstate_keyring_reloads_total",
            1.0,
            Duration::from_secs(10),
        )
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let log = sidecar.log();
    assert_eq!(
        sidecar.metric("reqstate_keyring_reloads_total").await?,
        1.0,
        "{log}"
    );
    assert_eq!(
        sidecar
            .metric("reqstate_keyring_reload_failures_total")
            .await?,
        2.0,
        "{log}"
    );
    assert_eq!(count(&log, " ERROR "), 2, "{log}");
    assert_eq!(count(&log, "keyring reloaded"), 1, "{log}");

    // The same bad line again is a new version of the file: reported again.
    append(&sidecar.keyring, "this is not toml\n")?;
    sidecar
        .metric_reaches(
            "reqstate_keyring_reload_failures_total",
            3.0,
            Duration::from_secs(10),
        )
        .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        sidecar
            .metric("reqstate_keyring_reload_failures_total")
            .await?,
        3.0,
        "{}",
        sidecar.log()
    );
    Ok(())
}

#[tokio::test]
async fn a_bad_token_file_is_refused_once_until_it_changes() -> TestResult {
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")])).auth_token("first-token"),
    )
    .await?;
    let file = sidecar.dir.path().join("auth-token");
    append(&file, "a token with spaces\n")?;
    refused_once(
        &sidecar,
        "reqstate_auth_token_reload_failures_total",
        "bearer token reload refused",
    )
    .await?;

    write_private(&file, "first-token\nsecond-token\n")?;
    sidecar
        .metric_reaches(
            "reqstate_auth_token_reloads_total",
            1.0,
            Duration::from_secs(10),
        )
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let log = sidecar.log();
    assert_eq!(
        sidecar.metric("reqstate_auth_token_reloads_total").await?,
        1.0,
        "{log}"
    );
    assert_eq!(
        sidecar
            .metric("reqstate_auth_token_reload_failures_total")
            .await?,
        1.0,
        "{log}"
    );
    assert_eq!(count(&log, " ERROR "), 1, "{log}");
    Ok(())
}
