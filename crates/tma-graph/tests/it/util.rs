//! Test helpers: `.npy` writers over the workspace codec ([`tma_graph::npy`]), a valid fixture
//! dataset for the loader tests, and the path of the shared real datasets.

use std::path::{Path, PathBuf};

use tma_graph::npy::{self, Order};

/// Encode an `.npy` v1.0 file holding `data` (raw little-endian bytes) under any dtype string,
/// including wrong ones (the malformed-file tests need them).
pub fn npy_bytes(descr: &str, shape: &[usize], fortran: bool, data: &[u8]) -> Vec<u8> {
    let order = if fortran { Order::Fortran } else { Order::C };
    let mut out = npy::encode_header(descr, shape, order);
    out.extend_from_slice(data);
    out
}

pub fn write_i64(dir: &Path, name: &str, shape: &[usize], v: &[i64]) {
    npy::write(&dir.join(name), v, shape).unwrap();
}

pub fn write_f32(dir: &Path, name: &str, shape: &[usize], v: &[f32]) {
    npy::write(&dir.join(name), v, shape).unwrap();
}

pub fn write_f64(dir: &Path, name: &str, shape: &[usize], v: &[f64]) {
    npy::write(&dir.join(name), v, shape).unwrap();
}

/// One-byte elements under dtype `descr` (`|u1`, `|b1`, or a wrong one), C or Fortran order.
pub fn write_u8(dir: &Path, name: &str, descr: &str, shape: &[usize], fortran: bool, v: &[u8]) {
    tma_graph::durable::write(&dir.join(name), &npy_bytes(descr, shape, fortran, v)).unwrap();
}

/// The fixture: 4 nodes, undirected path 0-1-2-3 (both directions) plus a self-loop 3-3,
/// sparse features 4 x 100 (one non-zero per row, 2 in row 1), classes `[0, 1, -1, 1]`,
/// index split train [1, 0] / val [2] / test [3].
pub fn write_fixture(dir: &Path) {
    std::fs::write(
        dir.join("meta.json"),
        r#"{"name": "fixture", "directed": false, "computed": {"nodes": 4}, "x_shape": [4, 100]}"#,
    )
    .unwrap();
    let src = [0i64, 1, 1, 2, 2, 3, 3];
    let dst = [1i64, 0, 2, 1, 3, 2, 3];
    let ei: Vec<i64> = src.iter().chain(dst.iter()).copied().collect();
    write_i64(dir, "edge_index.npy", &[2, 7], &ei);
    write_i64(dir, "x_indptr.npy", &[5], &[0, 1, 3, 4, 5]);
    write_i64(dir, "x_indices.npy", &[5], &[7, 0, 99, 50, 3]);
    write_f32(dir, "x_data.npy", &[5], &[1.0, 0.5, 2.0, 3.0, 4.0]);
    write_i64(dir, "y.npy", &[4], &[0, 1, -1, 1]);
    write_i64(dir, "train_idx.npy", &[2], &[1, 0]);
    write_i64(dir, "val_idx.npy", &[1], &[2]);
    write_i64(dir, "test_idx.npy", &[1], &[3]);
}

/// A fresh temp dir holding the fixture.
pub fn fixture() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    write_fixture(d.path());
    d
}

/// `../shared/datasets/<name>` (relative to the repository root). Panics, saying what is
/// missing and how to get it, when the directory is absent: a test never passes by skipping.
pub fn real_dataset(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/datasets")
        .join(name);
    assert!(
        p.join("meta.json").is_file(),
        "missing {}: the real-dataset tests need the shared datasets at ../shared/datasets next \
         to the repository root (CI provides them; layout in docs/dataset-format.md); copy or link \
         them there",
        p.display()
    );
    p
}
