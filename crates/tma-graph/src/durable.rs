//! The one way tma writes a file it keeps (models, checkpoints, manifests, summaries, arrays):
//! to a temporary file in the same directory, `fsync`ed, renamed over the destination, and the
//! directory `fsync`ed, so after a crash, a SIGKILL or a power loss a reader finds the old
//! whole file or the new whole file, never a partial one, and a rename that returned is on
//! disk. A full disk fails the write (naming the file and the OS error, e.g. "No space left
//! on device") before anything is renamed; the temporary file is removed.
//!
//! Streamed writers (e.g. [`crate::disk::write::ArrayWriter`]) write their temporary file
//! themselves, `fsync` it, and finish with [`rename`]. A staging directory is made durable
//! the same way: every file in it `fsync`ed ([`sync_file`]), then [`rename`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{GraphError, Result};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> GraphError + '_ {
    move |source| GraphError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The temporary file [`write`] uses for `path`: `.NAME.tmp-PID-K` in the same directory
/// (`K` counts this process's calls, so concurrent writers never share one).
pub fn temp_path(path: &Path) -> Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| GraphError::Invalid {
        path: path.to_path_buf(),
        reason: "not a file name".into(),
    })?;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let k = COUNTER.fetch_add(1, Ordering::Relaxed);
    Ok(path.with_file_name(format!(
        ".{}.tmp-{}-{k}",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// Writes `bytes` to `path` durably and atomically (see the module docs).
///
/// # Errors
/// [`GraphError::Io`] naming the temporary file (create, write, `fsync`: e.g. a full disk),
/// `path` (the rename) or its directory (its `fsync`).
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = temp_path(path)?;
    let result = (|| {
        let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        drop(f);
        rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Renames `from` (a file already `fsync`ed, or a directory whose files are) over `to`, then
/// `fsync`s the directory of `to` (and of `from` when it differs), so the rename itself is on
/// disk when this returns.
///
/// # Errors
/// [`GraphError::Io`] naming `to` (the rename) or the directory that could not be synced.
pub fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(io(to))?;
    let dir_of = |p: &Path| match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (a, b) = (dir_of(to), dir_of(from));
    sync_dir(&a)?;
    if a != b {
        sync_dir(&b)?;
    }
    Ok(())
}

/// `fsync`s the directory `dir` (its entries: names created, renamed or removed in it).
///
/// # Errors
/// [`GraphError::Io`] naming `dir`.
pub fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

/// `fsync`s the existing file `path` (e.g. every file of a staging directory before it is
/// renamed into place).
///
/// # Errors
/// [`GraphError::Io`] naming `path`.
pub fn sync_file(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(io(path))
}

/// Removes from `dir` the temporary files [`write`] leaves when its process is killed
/// mid-write (`.NAME.tmp-PID-K`), for a process that owns `dir` (e.g. a resumed run); returns
/// how many. A missing `dir` has none.
///
/// # Errors
/// [`GraphError::Io`] naming `dir` or the file that could not be removed.
pub fn remove_temps(dir: &Path) -> Result<usize> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io(dir)(e)),
    };
    let mut n = 0;
    for e in entries {
        let e = e.map_err(io(dir))?;
        let name = e.file_name();
        if is_temp_name(&name.to_string_lossy()) {
            let p = e.path();
            std::fs::remove_file(&p).map_err(io(&p))?;
            n += 1;
        }
    }
    Ok(n)
}

/// Whether `name` is one of [`temp_path`]'s names: `.NAME.tmp-PID-K`.
fn is_temp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let Some((_, tail)) = rest.rsplit_once(".tmp-") else {
        return false;
    };
    let mut nums = tail.split('-');
    let digits =
        |s: Option<&str>| s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
    digits(nums.next()) && digits(nums.next()) && nums.next().is_none()
}

#[cfg(test)]
mod tests {
    #[test]
    fn remove_temps_removes_only_temporary_files_of_writes() {
        let dir = tempfile::tempdir().unwrap();
        for n in [
            ".round-000025.safetensors.tmp-9409-70",
            ".state.json.tmp-1-0",
            "round-000024.safetensors",
            ".hidden",
            ".x.tmp-12",
            ".x.tmp-a-1",
        ] {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        assert_eq!(remove_temps(dir.path()).unwrap(), 2);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            vec![
                ".hidden",
                ".x.tmp-12",
                ".x.tmp-a-1",
                "round-000024.safetensors"
            ]
        );
        assert_eq!(remove_temps(&dir.path().join("none")).unwrap(), 0);
    }

    use super::*;

    #[test]
    fn write_replaces_the_whole_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        write(&p, b"old version").unwrap();
        write(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["state.json".to_string()]);
    }

    #[test]
    fn a_failed_write_names_the_file_and_keeps_the_old_version() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("model.safetensors");
        write(&p, b"old").unwrap();
        // the destination is a directory: the rename fails, the old file elsewhere is kept
        let d = dir.path().join("sub");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("x"), b"x").unwrap();
        let e = write(&d, b"new").unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}: I/O error", d.display())), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn rename_of_a_directory_syncs_both_parents() {
        let dir = tempfile::tempdir().unwrap();
        let staging = dir.path().join("a").join(".staging");
        std::fs::create_dir_all(&staging).unwrap();
        std::fs::write(staging.join("f"), b"1").unwrap();
        sync_file(&staging.join("f")).unwrap();
        let to = dir.path().join("parts");
        rename(&staging, &to).unwrap();
        assert_eq!(std::fs::read(to.join("f")).unwrap(), b"1");
        let e = sync_dir(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing: I/O error"), "{e}");
    }
}
