//! One libFuzzer binary for every reader: `TMA_FUZZ_TARGET=npy fuzz_reader CORPUS_DIR ...`
//! (see `fuzz/run.sh`). A panic, or an error that does not name the user's file, is a crash.
#![no_main]

#[path = "../../crates/tma-graph/tests/fuzz/harness.rs"]
mod harness;
#[path = "../../crates/tma-graph/tests/fuzz/targets.rs"]
mod targets;
#[allow(dead_code)]
#[path = "../../crates/tma-graph/tests/it/util.rs"]
mod util;

fn target() -> &'static str {
    static T: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    T.get_or_init(|| std::env::var("TMA_FUZZ_TARGET").expect("set TMA_FUZZ_TARGET"))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (names, out) = targets::run(target(), data);
    if let Err(e) = out {
        assert!(e.contains(&names), "error does not name {names}: {e}");
    }
});
