//! A stand-alone `binary://` logger for tests and for running the adapter
//! without the daemon; the daemon runs the same logic as itself.

fn main() {
    if let Err(e) = holdfast_adapter_containerd::logger::run_logger(std::env::args().skip(1)) {
        eprintln!("holdfast-logger: {e}");
        std::process::exit(1);
    }
}
