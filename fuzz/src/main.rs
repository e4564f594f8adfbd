//! One libFuzzer binary for every reader: `TMA_FUZZ_TARGET=npy fuzz_reader CORPUS_DIR ...`
//! (see `fuzz/run.sh`). A panic, or an error that does not name the user's file, is a crash.
//! tma-graph's targets (crates/tma-graph/tests/fuzz/targets.rs) and tma-train's
//! (crates/tma-train/tests/fuzz/harness.rs: store_node, store_link, checkpoint, safetensors,
//! config_toml).
#![no_main]

#[path = "../../crates/tma-graph/tests/fuzz/harness.rs"]
mod harness;
#[path = "../../crates/tma-graph/tests/fuzz/targets.rs"]
mod targets;
#[path = "../../crates/tma-train/tests/fuzz/harness.rs"]
mod train_harness;
#[allow(dead_code)]
#[path = "../../crates/tma-graph/tests/it/util.rs"]
mod util;

fn target() -> &'static str {
    static T: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    T.get_or_init(|| std::env::var("TMA_FUZZ_TARGET").expect("set TMA_FUZZ_TARGET"))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let t = target();
    let (names, out) = if train_harness::TARGETS.contains(&t) {
        train_harness::run(t, data)
    } else {
        targets::run(t, data)
    };
    if let Err(e) = out {
        assert!(e.contains(&names), "error does not name {names}: {e}");
    }
});
