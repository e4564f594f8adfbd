//! What every CLI test needs: the built `tma` binary, temporary directories, running `tma` and
//! checking its exit code and messages, reading its JSON outputs, and the shared real datasets
//! (a missing dataset or tool is a failure that says how to get it, never a silent pass).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `tma` binary Cargo built for these tests.
pub const TMA: &str = env!("CARGO_BIN_EXE_tma");

/// A `tma` command with `args`, not yet run.
pub fn tma_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(TMA);
    c.args(args);
    c
}

/// Runs `tma args` to completion and returns its exit status and output.
pub fn tma(args: &[&str]) -> Output {
    tma_cmd(args).output().expect("run the tma binary")
}

/// A fresh temporary directory, removed when dropped.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("create a temporary directory")
}

/// The process's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The process's stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stdout followed by stderr, for failure messages and searches over both.
pub fn text(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

/// Asserts `o` succeeded (exit code 0), showing its output otherwise.
pub fn assert_success(o: &Output) {
    assert!(
        o.status.success(),
        "tma failed ({}):\n{}",
        o.status,
        text(o)
    );
}

/// Asserts `o` exited with `code`, that its stderr contains every one of `needles`, and that it
/// did not panic.
pub fn assert_fails_with(o: &Output, code: i32, needles: &[&str]) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(code), "exit status; stderr:\n{e}");
    for n in needles {
        assert!(e.contains(n), "stderr lacks {n:?}:\n{e}");
    }
    assert!(!e.contains("panicked"), "tma panicked:\n{e}");
}

/// Parses the JSON file `path`.
pub fn json_file(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `RUN_DIR/summary.json`.
pub fn summary(run: &Path) -> serde_json::Value {
    json_file(&run.join("summary.json"))
}

/// A short in-process run (hidden 16, 300 ms rounds, 600 ms, quiet) on the partition directory
/// `parts`, into `run`, with `extra` options.
pub fn train_on_partitions(parts: &str, run: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "train",
        "--partitions",
        parts,
        "--hidden",
        "16",
        "--sync-every",
        "300ms",
        "--time-limit",
        "600ms",
        "--quiet",
        "--out",
        run.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    tma(&args)
}

/// `tma partition --dataset DATASET --task link --parts N EXTRA.. --out OUT`, run to completion.
pub fn partition_link(dataset: &Path, parts: &str, extra: &[&str], out: &Path) -> Output {
    let mut args = vec![
        "partition",
        "--dataset",
        dataset.to_str().unwrap(),
        "--task",
        "link",
        "--parts",
        parts,
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    tma(&args)
}

/// `../shared/datasets/<name>` (relative to the repository root). Panics, saying what is
/// missing and how to get it, when the directory is absent.
pub fn shared_dataset(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/datasets")
        .join(name);
    assert!(
        p.join("meta.json").is_file(),
        "missing {}: this test needs the shared real datasets at ../shared/datasets next to the \
         repository root (CI provides them; layout in docs/dataset-format.md); copy or link them there",
        p.display()
    );
    p
}

/// Short training on the built-in generated graph: 800 nodes, hidden 16, rounds every 300 ms,
/// 1 s of training, no progress output.
pub const QUICK: &[&str] = &[
    "--gen-nodes",
    "800",
    "--hidden",
    "16",
    "--sync-every",
    "300ms",
    "--time-limit",
    "1s",
    "--quiet",
];

/// Sends SIGINT to the child process `pid`.
pub fn sigint(pid: u32) {
    signal(pid, libc::SIGINT);
}

/// Sends `sig` to the child process `pid`.
pub fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// Polls `ok` every 50 ms until it holds; fails naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: std::time::Duration, mut ok: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !ok() {
        assert!(t.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Waits (at most 60 s) until the run's `rounds.jsonl` at `path` holds a round.
pub fn wait_for_a_round(path: &Path) {
    wait_for(
        "the first round",
        std::time::Duration::from_secs(60),
        || std::fs::metadata(path).is_ok_and(|m| m.len() > 0),
    );
}

/// `tma args` started with its stdout and stderr captured (for signals mid-run).
pub fn spawn_tma(args: &[&str]) -> std::process::Child {
    tma_cmd(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the tma binary")
}
