//! Writes the hand-written seeds of the `cri_requests` fuzz target into
//! `fuzz/corpus/cri_requests/` (run from the repository's root).

fn main() -> std::io::Result<()> {
    let dir = std::path::Path::new("fuzz/corpus/cri_requests");
    std::fs::create_dir_all(dir)?;
    for (name, bytes) in holdfast_api_cri::fuzz::seeds() {
        std::fs::write(dir.join(name), bytes)?;
    }
    Ok(())
}
