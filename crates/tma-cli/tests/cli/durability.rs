//! Issue 29 item 9: what tma keeps survives a SIGKILL at any instant and a full disk.
//!
//! * The kill loop: `tma train` on Cora with a checkpoint every 20 ms round is SIGKILLed at
//!   seeded random instants (`TMA_KILL_LOOP` runs, default 16 here; `bench/kill-loop.sh` runs
//!   120); afterwards every JSON file parses, every safetensors file is whole, and
//!   `tma train --resume` either completes the run or refuses naming why.
//! * A full disk (a 1 MiB tmpfs; needs root, as CI has): `tma train`, `tma partition --out`,
//!   `tma convert` and `tma generate` fail naming the file and "No space left on device", and leave nothing
//!   half-written (no temporary or staging file, every kept file whole).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{json_file, shared_dataset, stderr, tempdir, text, tma, TMA};

/// Checks that every file tma keeps in `run` is whole: JSON files parse, safetensors files
/// have a valid header whose tensors end exactly at the end of the file, `rounds.jsonl` rows
/// parse except a torn last one (a resume drops it). Returns the files checked.
fn assert_whole(run: &Path) -> usize {
    let mut n = 0;
    for d in [run.to_path_buf(), run.join("checkpoint")] {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".json") {
                json_file(&p);
                n += 1;
            } else if name.ends_with(".safetensors") && !name.starts_with('.') {
                assert_safetensors_whole(&p);
                n += 1;
            } else if name == "rounds.jsonl" {
                let text = std::fs::read_to_string(&p).unwrap();
                let lines: Vec<&str> = text.lines().collect();
                let torn = !text.is_empty() && !text.ends_with('\n');
                let whole = lines.len() - usize::from(torn);
                for l in &lines[..whole] {
                    serde_json::from_str::<serde_json::Value>(l)
                        .unwrap_or_else(|e| panic!("{}: {e}: {l}", p.display()));
                }
            }
        }
    }
    n
}

/// A safetensors file: u64 header length, JSON header, tensors whose last byte is the file's.
fn assert_safetensors_whole(p: &Path) {
    let b = std::fs::read(p).unwrap();
    assert!(b.len() >= 8, "{}: {} bytes", p.display(), b.len());
    let h = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    assert!(8 + h <= b.len(), "{}: header past the end", p.display());
    let header: serde_json::Value = serde_json::from_slice(&b[8..8 + h])
        .unwrap_or_else(|e| panic!("{}: header: {e}", p.display()));
    let end = header
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .map(|(_, t)| t["data_offsets"][1].as_u64().unwrap() as usize)
        .max()
        .unwrap_or(0);
    assert_eq!(8 + h + end, b.len(), "{}: truncated tensors", p.display());
}

/// Temporary files left in `run` or its checkpoint folder (`.NAME.tmp-PID-K`).
fn temps(run: &Path) -> Vec<String> {
    [run.to_path_buf(), run.join("checkpoint")]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|r| r.flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n.contains(".tmp-"))
        .collect()
}

/// The kill loop (see the module docs). Prints its counts: killed before the run directory
/// existed, killed after the run had finished, resumed to completion, refused with a reason.
#[test]
fn sigkill_at_random_instants_leaves_whole_files_and_a_run_that_resumes() {
    let ds = shared_dataset("planetoid_cora");
    let n: usize = std::env::var("TMA_KILL_LOOP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let tmp = tempdir();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let (mut before, mut finished, mut resumed, mut refused, mut files) = (0, 0, 0, 0, 0);
    for i in 0..n {
        let run = tmp.path().join(format!("run{i}"));
        let mut child = Command::new(TMA)
            .args(["train", "--dataset", ds.to_str().unwrap()])
            .args([
                "--sync-every",
                "20ms",
                "--time-limit",
                "1500ms",
                "--hidden",
                "64",
            ])
            .args(["--threads", "1", "--quiet", "--out", run.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // xorshift: kill instants spread over loading, rounds and the final writes
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let at = Duration::from_millis(50 + state % 1900);
        let t0 = Instant::now();
        while t0.elapsed() < at && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        if !run.exists() {
            before += 1;
            continue;
        }
        files += assert_whole(&run);
        let done = run.join("summary.json").exists()
            && json_file(&run.join("summary.json"))["interrupted"] == false;
        if done {
            finished += 1;
            continue;
        }
        let o = tma(&["train", "--resume", run.to_str().unwrap(), "--quiet"]);
        if o.status.success() {
            resumed += 1;
            let s = json_file(&run.join("summary.json"));
            assert_eq!(s["interrupted"], false, "{s}");
            files += assert_whole(&run);
            assert!(temps(&run).is_empty(), "{:?}", temps(&run));
        } else {
            refused += 1;
            let e = stderr(&o);
            assert!(
                e.contains("nothing to resume") || e.contains("before its first round"),
                "run {i}: --resume failed without a reason:\n{}",
                text(&o)
            );
            assert!(!e.contains("panicked"), "{e}");
        }
    }
    eprintln!(
        "kill loop: {n} kills: {before} before the run directory, {finished} after the run finished, {resumed} resumed to completion, {refused} refused with a reason; {files} kept files checked whole"
    );
    assert_eq!(before + finished + resumed + refused, n);
    // the instants cover the rounds: most kills land in a run with a checkpoint
    assert!(resumed * 2 >= n, "only {resumed} of {n} kills were mid-run");
}

/// A tmpfs of `size` (e.g. "1m") mounted at `dir` for the test (root; CI runs as root),
/// unmounted on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> SmallDisk {
        std::fs::create_dir_all(dir).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tma-full"])
            .arg(dir)
            .output()
            .expect("run mount");
        assert!(
            o.status.success(),
            "the full-disk tests mount a small tmpfs and need root: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        SmallDisk(dir.to_path_buf())
    }

    /// Names in the mounted folder (recursively, relative).
    fn names(&self) -> Vec<String> {
        fn walk(d: &Path, base: &Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(d).unwrap().flatten() {
                let p = e.path();
                out.push(p.strip_prefix(base).unwrap().display().to_string());
                if p.is_dir() {
                    walk(&p, base, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.0, &self.0, &mut out);
        out.sort();
        out
    }
}

impl SmallDisk {
    /// `o` failed naming this disk and "No space left on device", without a panic, and left
    /// nothing on it.
    fn assert_full_and_empty(&self, o: &std::process::Output) {
        assert!(!o.status.success(), "{}", text(o));
        let e = stderr(o);
        let d = self.0.to_str().unwrap();
        assert!(e.contains(d) && e.contains(FULL), "{e}");
        assert!(!e.contains("panicked"), "{e}");
        assert!(
            self.names().is_empty(),
            "left on the disk: {:?}",
            self.names()
        );
    }
}

/// The OS error of a full disk.
const FULL: &str = "No space left on device";

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The four writers on a full disk (see the module docs).
#[test]
fn a_full_disk_fails_train_partition_convert_and_generate_naming_the_file_and_leaves_nothing_partial(
) {
    let ds = shared_dataset("planetoid_cora");
    let tmp = tempdir();

    // partition --out (1 MiB: Cora's parts, its coordinator data and their features take more)
    let disk = SmallDisk::mount(&tmp.path().join("disk1"), "1m");
    let d = disk.0.to_str().unwrap().to_string();
    let o = tma(&[
        "partition",
        "--parts",
        "3",
        "--out",
        &format!("{d}/parts"),
        "--dataset",
        ds.to_str().unwrap(),
    ]);
    disk.assert_full_and_empty(&o);

    // convert to the on-disk format (its files take 512 KiB)
    let disk = SmallDisk::mount(&tmp.path().join("disk2"), "256k");
    let d = disk.0.to_str().unwrap().to_string();
    let o = tma(&[
        "convert",
        "--dataset",
        ds.to_str().unwrap(),
        "--out",
        &format!("{d}/g"),
    ]);
    disk.assert_full_and_empty(&o);

    // generate (20,000 nodes of 16-d features and ~200,000 arcs: about 2 MB, and its
    // temporary edge buckets, written under --out)
    let disk = SmallDisk::mount(&tmp.path().join("disk4"), "256k");
    let d = disk.0.to_str().unwrap().to_string();
    let o = tma(&[
        "generate",
        "--nodes",
        "20000",
        "--avg-degree",
        "10",
        "--feat-dim",
        "16",
        "--link-split",
        "0.01,0.01",
        "--out",
        &format!("{d}/g"),
    ]);
    disk.assert_full_and_empty(&o);

    // train: the run directory's first files fit, its checkpoints and models (1.4 MB of
    // weights at --hidden 256) do not
    let disk = SmallDisk::mount(&tmp.path().join("disk3"), "1m");
    let d = disk.0.to_str().unwrap().to_string();
    let run = format!("{d}/run");
    let o = tma(&[
        "train",
        "--dataset",
        ds.to_str().unwrap(),
        "--hidden",
        "256",
        "--sync-every",
        "100ms",
        "--time-limit",
        "1s",
        "--quiet",
        "--out",
        &run,
    ]);
    assert!(!o.status.success(), "{}", text(&o));
    let e = stderr(&o);
    assert!(e.contains(&run) && e.contains(FULL), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    let run = PathBuf::from(run);
    if run.exists() {
        assert_whole(&run);
        assert!(temps(&run).is_empty(), "{:?}", temps(&run));
    }
    drop(disk);
}
