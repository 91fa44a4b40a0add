//! Scratch files for the unit tests: [`tempfile`]'s, named for the test that made
//! them and removed when dropped, by a test that fails as well as by one that passes.

use std::path::Path;
use tempfile::{TempDir, TempPath};

/// A file of `len` zero bytes in the temp directory.
pub(crate) fn file(tag: &str, len: u64) -> TempPath {
    file_in(&std::env::temp_dir(), tag, len)
}

/// An empty file beside the sources, for `O_DIRECT`, which a tmpfs `/tmp` refuses.
pub(crate) fn direct_file(tag: &str) -> TempPath {
    file_in(Path::new(env!("CARGO_MANIFEST_DIR")), tag, 0)
}

/// An empty directory in the temp directory, removed with what it holds.
pub(crate) fn dir(tag: &str) -> TempDir {
    tempfile::Builder::new().prefix(&format!(".storqos-{tag}-")).tempdir().unwrap()
}

fn file_in(dir: &Path, tag: &str, len: u64) -> TempPath {
    let f = tempfile::Builder::new().prefix(&format!(".storqos-{tag}-")).tempfile_in(dir).unwrap();
    f.as_file().set_len(len).unwrap();
    f.into_temp_path()
}
