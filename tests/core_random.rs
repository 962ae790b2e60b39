//! The randomness sources: distinct output, and no repeats across `fork`.

// fork(2) is unsafe to call from a multi-threaded process in general; the child
// here only draws random bytes, writes them to a pipe and exits at once.
#![allow(unsafe_code)]

use std::io::{Read, Write};

use reqstate::{BufferedRandom, OsRandom, SecureRandom};

fn draw(source: &dyn SecureRandom) -> [u8; 24] {
    let mut out = [0u8; 24];
    source.fill(&mut out).expect("random");
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
