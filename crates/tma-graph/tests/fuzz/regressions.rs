//! One named test per crashing input the fuzzers found (each failed before its fix).

use super::mutate::{check, npy_with_header};
use super::targets;

/// `targets::run(target, input)` must be a clean error containing `want`.
fn refused(target: &str, input: &[u8], want: &str) {
    let v = check(input.len(), || targets::run(target, input));
    assert!(v.is_none(), "{target}: {}", v.unwrap());
    let (_, out) = targets::run(target, input);
    let e = out.expect_err("a malformed input must be refused");
    assert!(e.contains(want), "{e}");
}

/// `edge_index.npy` of a dataset converted to the on-disk format, with `header` and `payload`.
fn convert_edge_index(header: &str, payload: &[u8]) -> Vec<u8> {
    targets::encode(
        "convert",
        "edge_index.npy",
        &npy_with_header(header, payload),
    )
}

/// A shape whose product overflows u64 made npyz's header parser panic in
/// `disk/convert.rs::edge_header` (the `.npy` reader prechecks it; the converter did not).
#[test]
fn convert_refuses_an_overflowing_edge_index_shape() {
    let input = convert_edge_index(
        "{'descr': '<i8', 'fortran_order': False, 'shape': (18446744073709551615, 18446744073709551615), }",
        &[0; 16],
    );
    refused("convert", &input, "edge_index.npy");
}

/// `[2, E]` with `16 E` past u64 overflowed the payload size in `edge_header`.
#[test]
fn convert_refuses_an_edge_count_whose_byte_size_overflows() {
    let input = convert_edge_index(
        "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 4611686018427387904), }",
        &[0; 16],
    );
    refused("convert", &input, "edge_index.npy");
}

/// Header variants the `'shape'` precheck may miss: double quotes, a list, spaces, `L`
/// suffixes; each overflowing shape must be refused cleanly by the `.npy` reader.
#[test]
fn npy_refuses_overflowing_shapes_in_every_spelling() {
    for dict in [
        "{\"descr\": \"<i8\", \"fortran_order\": False, \"shape\": (18446744073709551615, 18446744073709551615), }",
        "{'descr': '<i8', 'fortran_order': False, 'shape': [18446744073709551615, 18446744073709551615], }",
        "{'descr': '<i8', 'fortran_order': False, 'shape' : ( 4294967296 , 4294967296 ), }",
        "{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296L, 4294967296L), }",
        "{'shape': (4294967296, 4294967296), 'fortran_order': False, 'descr': '<i8', }",
        "{'descr': '<i8', 'shape': (4294967296, 4294967296), 'fortran_order': False}",
    ] {
        let input = npy_with_header(dict, &[0; 8]);
        let v = check(input.len(), || targets::run("npy", &input));
        assert!(v.is_none(), "{dict}: {}", v.unwrap());
        for t in ["dataset", "convert"] {
            let input = targets::encode(t, "edge_index.npy", &input);
            let v = check(input.len(), || targets::run(t, &input));
            assert!(v.is_none(), "{t} {dict}: {}", v.unwrap());
        }
    }
}

/// Not a bug found, a property kept: brackets nested thousands deep (a recursive parser's
/// stack) are a clean error.
#[test]
fn npy_refuses_a_header_nested_too_deep() {
    for depth in [17usize, 5000, 30000] {
        let dict = format!(
            "{{'descr': '<i8', 'fortran_order': False, 'shape': {}{}, }}",
            "(".repeat(depth),
            ")".repeat(depth)
        );
        let input = npy_with_header(&dict, &[]);
        refused("npy", &input, "unparseable header");
        refused(
            "convert",
            &targets::encode("convert", "edge_index.npy", &input),
            "unparseable header",
        );
    }
}

/// Not a bug found, a property kept: a structured dtype whose field shape overflows is a
/// clean error.
#[test]
fn npy_refuses_structured_dtypes_with_overflowing_fields() {
    let dict = "{'descr': [('a', '<i8', (4294967296, 4294967296))], 'fortran_order': False, 'shape': (1,), }";
    refused("npy", &npy_with_header(dict, &[0; 8]), "fuzz.npy");
}

/// A class id of i64::MAX in an OGB `node-label.csv.gz` overflowed `c + 1` in the error
/// message (found by `TMA_FUZZ_SCALE=10`, mutation 7423 of `ogb`).
#[test]
fn ogb_refuses_a_class_id_of_i64_max() {
    let input = targets::encode(
        "ogb",
        "raw/node-label.csv.gz",
        b"0\n1\n2\n0\n1\n9223372036854775807\n",
    );
    refused("ogb", &input, "would mean 9223372036854775808 classes");
}
