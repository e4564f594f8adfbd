//! One named test per crashing input the fuzzers found (each failed before its fix).

use super::harness;
use super::mutate::check;

/// `harness::run(target, input)` must be a clean error containing `want`.
fn refused(target: &str, input: &[u8], want: &str) {
    let v = check(input.len(), || harness::run(target, input));
    assert!(v.is_none(), "{target}: {}", v.unwrap());
    let (_, out) = harness::run(target, input);
    let e = out.expect_err("a malformed input must be refused");
    assert!(e.contains(want), "{e}");
}

/// `state.json` with `elapsed_s` past what a `Duration` holds (here 2^64 s) panicked in
/// `checkpoint::resume_from` (`Duration::from_secs_f64`); `read_state` refuses it.
#[test]
fn a_checkpoint_elapsed_time_beyond_any_duration_is_refused() {
    let state = harness::dir_file_bytes("checkpoint", "checkpoint/state.json");
    let mut v: serde_json::Value = serde_json::from_slice(&state).unwrap();
    for bad in [
        serde_json::json!(18446744073709551615u64),
        serde_json::json!(1e300),
    ] {
        v["elapsed_s"] = bad;
        let input = harness::encode(
            "checkpoint",
            "checkpoint/state.json",
            0,
            &serde_json::to_vec(&v).unwrap(),
        );
        refused("checkpoint", &input, "elapsed_s");
    }
}
