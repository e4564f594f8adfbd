//! Tiny `.npy` writer and a valid fixture dataset for the loader tests.

use std::path::{Path, PathBuf};

/// Encode an `.npy` v1.0 file.
pub fn npy_bytes(descr: &str, shape: &[usize], fortran: bool, data: &[u8]) -> Vec<u8> {
    let shape_s = match shape {
        [a] => format!("({a},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut h = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape_s}, }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}

pub fn write_i64(dir: &Path, name: &str, shape: &[usize], v: &[i64]) {
    let data: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(dir.join(name), npy_bytes("<i8", shape, false, &data)).unwrap();
}

pub fn write_f32(dir: &Path, name: &str, shape: &[usize], v: &[f32]) {
    let data: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(dir.join(name), npy_bytes("<f4", shape, false, &data)).unwrap();
}

pub fn write_f64(dir: &Path, name: &str, shape: &[usize], v: &[f64]) {
    let data: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(dir.join(name), npy_bytes("<f8", shape, false, &data)).unwrap();
}

pub fn write_u8(dir: &Path, name: &str, descr: &str, shape: &[usize], fortran: bool, v: &[u8]) {
    std::fs::write(dir.join(name), npy_bytes(descr, shape, fortran, v)).unwrap();
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

/// `shared/datasets/<name>` if present.
pub fn real_dataset(name: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/datasets")
        .join(name);
    if p.join("meta.json").exists() {
        Some(p)
    } else {
        eprintln!("skipping: {} not present", p.display());
        None
    }
}
