//! Standard output of the commands, and what a closed pipe means.
//!
//! `println!` panics when standard output is a pipe whose reader has gone
//! (`reqstate mint … | head -c0`): Rust ignores SIGPIPE, so the write fails
//! with `EPIPE`. The commands write through [`line()`] instead and, on a
//! closed pipe, exit quietly with [`EXIT_BROKEN_PIPE`] (141, what a shell
//! reports for `cat`, `ls` and every other tool that SIGPIPE ended).

use std::io::Write as _;

/// The exit code when standard output was closed before everything was
/// written: 128 + SIGPIPE (13), as the shell reports for a tool that SIGPIPE
/// ended. Nothing is printed on standard error.
pub const EXIT_BROKEN_PIPE: u8 = 141;

/// `EX_IOERR` from sysexits.h: standard output could not be written for a
/// reason other than a closed pipe (a full disk …).
pub const EXIT_IO_ERROR: u8 = 74;

/// Writes `text` and a newline to standard output and returns `code`; or
/// [`EXIT_BROKEN_PIPE`] when the reader has gone, [`EXIT_IO_ERROR`] (with a
/// message on standard error) when the write failed otherwise.
pub fn line(text: impl std::fmt::Display, code: u8) -> u8 {
    let mut out = std::io::stdout().lock();
    let written = writeln!(out, "{text}").and_then(|()| out.flush());
    match written {
        Ok(()) => code,
        Err(e) => write_failed(&e),
    }
}

/// The exit code of a failed write to standard output (see [`line()`]).
pub fn write_failed(e: &std::io::Error) -> u8 {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        EXIT_BROKEN_PIPE
    } else {
        eprintln!("reqstate: cannot write to standard output: {e}");
        EXIT_IO_ERROR
    }
}
