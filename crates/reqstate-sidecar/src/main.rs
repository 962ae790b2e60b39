//! The `reqstate` binary: parse the command line, set up logging, run. Everything else lives in `reqstate-sidecar`.

use std::process::ExitCode;

use reqstate_sidecar::{Cli, EXIT_BAD_CONFIG};

fn main() -> ExitCode {
    let cli = match Cli::parse_args(std::env::args_os()) {
        Ok(cli) => cli,
        Err(code) => return ExitCode::from(code),
    };
    if let Err(e) = reqstate_sidecar::init_tracing(&cli.log) {
        eprintln!("reqstate: {e}");
        return ExitCode::from(EXIT_BAD_CONFIG);
    }
    reqstate_sidecar::run(cli.command)
}
