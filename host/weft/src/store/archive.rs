//! Directories as one object: a tar archive compressed with zstd (level
//! 1, fast), written deterministically (entries sorted, times, owners and
//! modes normalised) so that the same content always has the same digest:
//! the output cache keys on it. Single files are stored as they are.

use std::io::{Read, Write};
use std::path::Path;

/// Packs the directory `dir` into `out`.
pub fn pack_dir(dir: &Path, out: impl Write) -> std::io::Result<()> {
    let encoder = zstd::Encoder::new(out, 1)?;
    let mut tar = tar::Builder::new(encoder);
    tar.mode(tar::HeaderMode::Deterministic);
    tar.follow_symlinks(false);
    let mut entries = Vec::new();
    walk(dir, Path::new(""), &mut entries)?;
    entries.sort();
    for rel in entries {
        let full = dir.join(&rel);
        let meta = std::fs::symlink_metadata(&full)?;
        if meta.is_dir() {
            tar.append_dir(&rel, &full)?;
        } else {
            tar.append_path_with_name(&full, &rel)?;
        }
    }
    tar.into_inner()?.finish()?.flush()
}

/// Every entry under `dir`, relative to the root, directories included.
fn walk(root: &Path, rel: &Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(root.join(rel))? {
        let entry = entry?;
        let rel = rel.join(entry.file_name());
        let is_dir = entry.file_type()?.is_dir();
        out.push(rel.clone());
        if is_dir {
            walk(root, &rel, out)?;
        }
    }
    Ok(())
}

/// Unpacks an archive made by [`pack_dir`] into `dir` (created); entries
/// that would land outside `dir` are refused by the tar crate.
pub fn unpack_dir(input: impl Read, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let decoder = zstd::Decoder::new(input)?;
    let mut tar = tar::Archive::new(decoder);
    tar.set_preserve_permissions(true);
    tar.set_preserve_mtime(false);
    tar.unpack(dir)
}
