//! `holdfastd`: parses flags and wires the parts together (see `wiring.rs`).

mod settings;
mod socket;
mod wiring;

use clap::Parser as _;
use settings::{Flags, Settings};
use std::process::ExitCode;

fn main() -> ExitCode {
    // containerd's shim starts this same binary as the `binary://` logger of
    // each task: that is a different life, with no flags of ours.
    if holdfast_adapter_containerd::logger::is_logger_invocation() {
        return match holdfast_adapter_containerd::logger::run_logger(std::env::args().skip(1)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("holdfastd logger: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // `docker cp` runs this binary as a helper chrooted into a container.
    if holdfast_engine::archive::is_archive_invocation() {
        return ExitCode::from(holdfast_engine::archive::run_helper());
    }
    let flags = Flags::parse();
    let settings = match Settings::resolve(flags) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("holdfastd: {e}");
            return ExitCode::from(2);
        }
    };
    wiring::init_tracing(&settings.log_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("holdfastd: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(wiring::run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "holdfastd stopped");
            eprintln!("holdfastd: {e:#}");
            ExitCode::FAILURE
        }
    }
}
