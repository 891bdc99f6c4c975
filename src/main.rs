use std::io;
use std::process::ExitCode;

use clap::Parser;
use robots_proxy::check;
use robots_proxy::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => {
            let stdin = io::stdin();
            let stdout = io::stdout();
            match check::run(&args, &mut stdin.lock(), &mut stdout.lock()) {
                Ok(outcome) => outcome.exit_code(),
                Err(e) => {
                    eprintln!("robots-proxy check: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}
