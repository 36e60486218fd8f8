//! Where the benchmark reads and writes: the workspace, its `docs/` and `target/bench/`.

use std::path::PathBuf;

/// The workspace root (cargo runs a bench in its package directory, `bench/`).
pub(crate) fn workspace() -> PathBuf {
    let package = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    package.parent().map(PathBuf::from).unwrap_or(package)
}

/// `target/bench/` (or under `CARGO_TARGET_DIR`), where the JSON lines go.
pub(crate) fn bench_target() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"));
    target.join("bench")
}

pub(crate) fn docs() -> PathBuf {
    workspace().join("docs")
}
