//! Randomness and nonces: distinct output from the sources, no repeats across
//! `fork`, and XChaCha20-Poly1305 nonces that stay distinct for distinct
//! messages even when the random source repeats itself (a process cloned in a
//! new PID namespace, by a VM snapshot, or a broken generator).

// fork(2) is unsafe to call from a multi-threaded process in general; the child
// here only draws random bytes, writes them to a pipe and exits at once.
#![allow(unsafe_code)]

use std::io::{Read, Write};

use std::time::Duration;

use base64::Engine as _;
use reqstate::{
    Aad, Algorithm, Binding, BufferedRandom, Codec, FixedClock, KeyId, KeySpec, KeyStatus, Keyring,
    OsRandom, Policy, RandomnessUnavailable, Secret, SecureRandom,
};

fn draw(source: &dyn SecureRandom) -> [u8; 24] {
    let mut out = [0u8; 24];
    source.fill(&mut out).expect("random");
    out
}

/// 24 bytes through the nonce-hedge path (the pool, with no pid check).
fn draw_hedge(source: &dyn SecureRandom) -> [u8; 24] {
    let mut out = [0u8; 24];
    source.fill_hedge(&mut out).expect("random");
    out
}

#[test]
fn sources_never_repeat_a_nonce() {
    for source in [&BufferedRandom as &dyn SecureRandom, &OsRandom::new()] {
        let mut seen = std::collections::HashSet::new();
        // Enough draws to cross several pool refills.
        for _ in 0..2000 {
            assert!(seen.insert(draw(source)), "repeated nonce");
        }
    }
}

#[test]
fn large_requests_are_filled_completely() {
    let mut key = [0u8; 200];
    BufferedRandom.fill(&mut key).expect("random");
    assert!(key.iter().filter(|b| **b == 0).count() < 20, "not filled");
}

#[test]
fn forked_child_never_repeats_the_parents_random_bytes() {
    // Prime this thread's pool so the parent has unused bytes buffered.
    let _ = draw(&BufferedRandom);
    let (mut reader, mut writer) = std::io::pipe().expect("pipe");
    // SAFETY: the child calls only async-signal-tolerant work (drawing random
    // bytes from its own copy of this thread's pool, a write) and then _exit.
    match unsafe { nix::unistd::fork() }.expect("fork") {
        nix::unistd::ForkResult::Child => {
            let bytes = draw(&BufferedRandom);
            let _ = writer.write_all(&bytes);
            // SAFETY: exits without running the parent's test harness teardown.
            unsafe { nix::libc::_exit(0) };
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(writer);
            let parent = draw(&BufferedRandom);
            let mut from_child = [0u8; 24];
            reader
                .read_exact(&mut from_child)
                .expect("child wrote its bytes");
            nix::sys::wait::waitpid(child, None).expect("waitpid");
            assert_ne!(
                parent, from_child,
                "the child handed out the parent's buffered bytes"
            );
        }
    }
}

/// A broken generator: the same bytes on every draw, as a cloned process
/// replaying its parent's pool would give.
struct Stuck(u8);

impl SecureRandom for Stuck {
    fn fill(&self, dest: &mut [u8]) -> Result<(), RandomnessUnavailable> {
        dest.fill(self.0);
        Ok(())
    }
}

fn xchacha_keyring() -> Keyring {
    Keyring::new([KeySpec::new(
        KeyId::new(7),
        Algorithm::XChaCha20Poly1305,
        KeyStatus::Primary,
        Secret::new(vec![0x42; 32]),
    )])
    .expect("keyring")
}

/// The binding of `tool` to `context` bytes.
fn bind<'a>(tool: &'a str, context: &'a [u8]) -> Binding<'a> {
    Binding::with_context_bytes(tool, context).expect("binding")
}

/// Associated data for a sealed payload.
fn aad(bytes: &[u8]) -> Aad<'_> {
    Aad::new(bytes).expect("aad")
}

/// The 24-byte nonce of an XChaCha20-Poly1305 token under key id 7 (a
/// one-byte id): bytes 2..26 (FORMAT.md §3).
fn nonce_of(token: &str) -> [u8; 24] {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .expect("base64url");
    raw[2..26].try_into().expect("24 bytes")
}

#[test]
fn identical_random_draws_still_give_distinct_nonces_for_distinct_messages() {
    let codec = Codec::with_parts(
        xchacha_keyring(),
        Policy::new(),
        FixedClock(1_800_000_000),
        Stuck(0),
    );
    let ttl = Duration::from_secs(600);
    let ctx = [1u8; 32];
    let base = codec
        .mint(bind("t", &ctx), "s", &1u32, ttl)
        .expect("mint")
        .token;
    // Each differs from `base` in one input: state, step, tool, context.
    let others = [
        codec
            .mint(bind("t", &ctx), "s", &2u32, ttl)
            .expect("mint")
            .token,
        codec
            .mint(bind("t", &ctx), "s2", &1u32, ttl)
            .expect("mint")
            .token,
        codec
            .mint(bind("t2", &ctx), "s", &1u32, ttl)
            .expect("mint")
            .token,
        codec
            .mint(bind("t", &[2u8; 32]), "s", &1u32, ttl)
            .expect("mint")
            .token,
    ];
    let mut nonces = std::collections::HashSet::new();
    assert!(nonces.insert(nonce_of(&base)));
    for token in &others {
        assert!(
            nonces.insert(nonce_of(token)),
            "two different messages drawn with the same random bytes share a nonce"
        );
    }
    // Sealed payloads too.
    let a = codec.seal(b"payload a", aad(b"aad")).expect("seal").token;
    let b = codec.seal(b"payload b", aad(b"aad")).expect("seal").token;
    let c = codec
        .seal(b"payload a", aad(b"other aad"))
        .expect("seal")
        .token;
    for token in [&a, &b, &c] {
        assert!(
            nonces.insert(nonce_of(token)),
            "sealed payloads share a nonce"
        );
    }
    // The same whole input with the same random bytes is the same token: a
    // repeat reveals only that the message repeated.
    assert_eq!(
        codec
            .mint(bind("t", &ctx), "s", &1u32, ttl)
            .expect("mint")
            .token,
        base
    );
    // Every one of them verifies.
    assert_eq!(
        codec
            .verify::<u32>(&others[0], bind("t", &ctx).any_step())
            .expect("verify")
            .state,
        2
    );
    assert_eq!(
        codec.unseal(&c, aad(b"other aad")).expect("unseal").payload,
        b"payload a"
    );
    // And a different random draw gives a different nonce for the same message.
    let other_draw = Codec::with_parts(
        xchacha_keyring(),
        Policy::new(),
        FixedClock(1_800_000_000),
        Stuck(1),
    );
    assert_ne!(
        nonce_of(
            &other_draw
                .mint(bind("t", &ctx), "s", &1u32, ttl)
                .expect("mint")
                .token
        ),
        nonce_of(&base)
    );
}

/// Set in the helper process that [`clone_in_a_new_pid_namespace_never_shares_a_nonce`]
/// starts as pid 1 of a new PID namespace.
const PIDNS_HELPER: &str = "REQSTATE_TEST_PIDNS_HELPER";

/// The review's reproduction: a process that is pid 1 of its PID namespace
/// warms its random pool, then forks a child into a new PID namespace, where
/// the child is pid 1 again. A pid check cannot tell them apart, so both draw
/// the same pool bytes for their nonce hedges; their tokens must still have
/// different nonces, and what `fill` draws (single-use token ids, keys) must
/// not repeat at all: two single-use tokens with one id would share one
/// spent-token record (security review round 3, finding 7).
#[test]
fn clone_in_a_new_pid_namespace_never_shares_a_nonce() {
    if std::env::var_os(PIDNS_HELPER).is_some() {
        pid_namespace_helper();
        return;
    }
    let probe = std::process::Command::new("unshare")
        .args(["-Urpf", "--mount-proc", "true"])
        .output();
    match probe {
        Ok(out) if out.status.success() => {}
        // Not skipped: a machine that cannot make the namespaces cannot
        // show that a cloned process never repeats a nonce.
        Ok(out) => panic!(
            "user and PID namespaces are unavailable here (unshare: {}); this test needs them",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!("unshare (util-linux) must be installed: {e}"),
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new("unshare")
        .args(["-Urpf", "--mount-proc"])
        .arg(exe)
        .args([
            "--exact",
            "random::clone_in_a_new_pid_namespace_never_shares_a_nonce",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PIDNS_HELPER, "1")
        .output()
        .expect("start the helper");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "helper failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.find("PIDNS ").map(|at| &l[at..]))
        .expect("the helper reports its result");
    // "PIDNS parent_pid=1 child_pid=1 pool_repeated=true nonces_differ=true"
    assert!(line.contains("parent_pid=1 child_pid=1"), "{line}");
    assert!(
        line.contains("pool_repeated=true"),
        "the clone did not repeat the pool: {line}"
    );
    assert!(line.contains("nonces_differ=true"), "{line}");
    assert!(
        line.contains("fill_repeated=false"),
        "fill repeated the parent's bytes in the clone: {line}"
    );
    assert!(
        line.contains("token_ids_differ=true"),
        "parent and child minted single-use tokens with one id: {line}"
    );
}

fn pid_namespace_helper() {
    use nix::sched::{CloneFlags, unshare};
    use nix::unistd::{ForkResult, fork, getpid};

    assert_eq!(
        getpid().as_raw(),
        1,
        "the helper runs as pid 1 of its namespace"
    );
    let codec = Codec::new(xchacha_keyring());
    let ttl = Duration::from_secs(600);
    // Fill this thread's pool, leaving unused bytes buffered.
    codec
        .mint(bind("increase-counter", b"warm"), "amount", &0u32, ttl)
        .expect("mint");
    let _ = draw_hedge(&BufferedRandom);
    unshare(CloneFlags::CLONE_NEWPID).expect("unshare(CLONE_NEWPID)");
    let (mut reader, mut writer) = std::io::pipe().expect("pipe");
    // SAFETY: the helper runs one test on one thread (--test-threads=1); the
    // child draws, mints, writes to a pipe and exits at once.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let pid = std::process::id();
            let drawn = draw_hedge(&BufferedRandom);
            let filled = draw(&BufferedRandom);
            let token = codec
                .mint(bind("increase-counter", b"ctx"), "confirm", &"child", ttl)
                .expect("mint")
                .token;
            let single = codec
                .mint_single_use(bind("increase-counter", b"ctx"), "confirm", &"same", ttl)
                .expect("mint")
                .token;
            let _ = writer.write_all(
                format!(
                    "{pid} {} {} {token} {single}",
                    hex::encode(drawn),
                    hex::encode(filled)
                )
                .as_bytes(),
            );
            drop(writer);
            // SAFETY: exits without running the harness's teardown.
            unsafe { nix::libc::_exit(0) };
        }
        ForkResult::Parent { child } => {
            drop(writer);
            let drawn = draw_hedge(&BufferedRandom);
            let filled = draw(&BufferedRandom);
            let token = codec
                .mint(bind("increase-counter", b"ctx"), "confirm", &"parent", ttl)
                .expect("mint")
                .token;
            let single = codec
                .mint_single_use(bind("increase-counter", b"ctx"), "confirm", &"same", ttl)
                .expect("mint")
                .token;
            let mut from_child = String::new();
            reader.read_to_string(&mut from_child).expect("child wrote");
            nix::sys::wait::waitpid(child, None).expect("waitpid");
            let mut parts = from_child.split(' ');
            let child_pid = parts.next().expect("pid");
            let child_drawn = parts.next().expect("draw");
            let child_filled = parts.next().expect("fill");
            let child_token = parts.next().expect("token");
            let child_single = parts.next().expect("single-use token");
            let token_id = |token: &str| {
                codec
                    .verify_single_use::<String>(token, bind("increase-counter", b"ctx").any_step())
                    .expect("a valid single-use token")
                    .spent_id()
            };
            let ids_differ = token_id(&single) != token_id(child_single);
            assert!(
                codec
                    .verify::<String>(child_token, bind("increase-counter", b"ctx").any_step())
                    .is_ok()
            );
            let differ = nonce_of(&token) != nonce_of(child_token);
            println!(
                "PIDNS parent_pid={} child_pid={child_pid} pool_repeated={} nonces_differ={differ} \
                 fill_repeated={} token_ids_differ={ids_differ}",
                std::process::id(),
                hex::encode(drawn) == child_drawn,
                hex::encode(filled) == child_filled,
            );
            assert!(differ, "parent and child minted with the same nonce");
        }
    }
}

/// An ordinary `fork` after the codec's pool is warm: the codec draws its
/// nonce randomness without the pool's pid check (the hedge makes it
/// unnecessary), so parent and child may draw the same bytes. Invariant: two
/// tokens share a nonce only if they are the same token.
#[test]
fn forked_child_and_parent_share_a_nonce_only_for_the_same_token() {
    let codec = Codec::with_parts(
        xchacha_keyring(),
        Policy::new(),
        FixedClock(1_800_000_000),
        BufferedRandom,
    );
    let ttl = Duration::from_secs(600);
    let mint_all = |who: &str| -> Vec<String> {
        (0..10)
            .flat_map(|i| {
                [
                    codec
                        .mint(bind("t", b"c"), "s", &format!("{who}-{i}"), ttl)
                        .expect("mint")
                        .token,
                    codec
                        .mint(bind("t", b"c"), "s", &format!("same-{i}"), ttl)
                        .expect("mint")
                        .token,
                ]
            })
            .collect()
    };
    codec
        .mint(bind("t", b"c"), "s", &"warm", ttl)
        .expect("mint");
    let (mut reader, mut writer) = std::io::pipe().expect("pipe");
    // SAFETY: the child mints, writes to a pipe and exits at once.
    match unsafe { nix::unistd::fork() }.expect("fork") {
        nix::unistd::ForkResult::Child => {
            let tokens = mint_all("child").join("\n");
            let _ = writer.write_all(tokens.as_bytes());
            drop(writer);
            // SAFETY: exits without running the parent's test harness teardown.
            unsafe { nix::libc::_exit(0) };
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(writer);
            let parent = mint_all("parent");
            let mut text = String::new();
            reader.read_to_string(&mut text).expect("child wrote");
            nix::sys::wait::waitpid(child, None).expect("waitpid");
            let from_child: Vec<&str> = text.lines().collect();
            assert_eq!(from_child.len(), parent.len());
            let mut same_token = 0;
            for p in &parent {
                for c in &from_child {
                    if nonce_of(p) == nonce_of(c) {
                        assert_eq!(p, c, "two different tokens share a nonce");
                        same_token += 1;
                    }
                }
            }
            println!(
                "{} parent and {} child tokens; {same_token} pairs are the very same token",
                parent.len(),
                from_child.len()
            );
        }
    }
}
