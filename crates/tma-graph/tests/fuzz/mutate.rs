//! The fuzzers' shared machinery: seeded structure-aware mutations of valid inputs, and the
//! check that runs one reader on one input (no panic, no huge allocation, a clean error naming
//! the file). Shared by the `fuzz` tests of tma-graph, tma-train and tma-cli (included there by
//! `#[path]`) and by the coverage-guided targets in `fuzz/`.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

// ---------------------------------------------------------------------------------------------
// allocation watch: the largest single request of the current thread
// ---------------------------------------------------------------------------------------------

/// A [`System`] allocator that remembers, per thread, the largest single request since the
/// last [`reset_peak`]; requests over [`REFUSE`] bytes are refused (null) after printing the
/// input's case id, so an out-of-memory aborts loudly instead of thrashing the machine.
pub struct Watch;

/// Requests above this size are refused (the test binary then aborts with the size).
pub const REFUSE: usize = 4 << 30;

thread_local! {
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Watch {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        if layout.size() > REFUSE {
            return std::ptr::null_mut();
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        if layout.size() > REFUSE {
            return std::ptr::null_mut();
        }
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        if new_size > REFUSE {
            return std::ptr::null_mut();
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn note(size: usize) {
    let _ = PEAK.try_with(|p| {
        if size > p.get() {
            p.set(size)
        }
    });
}

/// Forgets the current thread's largest request.
pub fn reset_peak() {
    PEAK.with(|p| p.set(0));
}

/// The current thread's largest single request since [`reset_peak`].
pub fn peak() -> usize {
    PEAK.with(|p| p.get())
}

// ---------------------------------------------------------------------------------------------
// running one case
// ---------------------------------------------------------------------------------------------

thread_local! {
    static LAST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
    static IN_CHECK: Cell<bool> = const { Cell::new(false) };
}

/// Installs (once) a panic hook that records the message and location of a panic on the
/// current thread instead of printing it (the case's report prints it with the input).
pub fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_CHECK.try_with(|c| c.get()).unwrap_or(false) {
                let msg = format!("{info}");
                let _ = LAST_PANIC.try_with(|l| *l.borrow_mut() = Some(msg));
            } else {
                prev(info);
            }
        }));
    });
}

/// What one case did wrong, `None` when it is fine.
pub type Verdict = Option<String>;

/// Allocation allowed for a case: a fixed floor plus a multiple of the input size (a reader
/// may hold a few copies of what it reads, never what a header merely claims).
pub fn alloc_budget(input_len: usize) -> usize {
    (64 << 20) + 64 * input_len
}

/// Runs `f` (one reader on one input of `input_len` bytes) and judges it: a panic, an
/// allocation over [`alloc_budget`], or an error whose text does not contain the names `f`
/// gives (the file or directory the user gave) is a failure. `f` returns the names and
/// `Err(text)` for a clean error.
pub fn check(input_len: usize, f: impl FnOnce() -> (String, Result<(), String>)) -> Verdict {
    quiet_panics();
    reset_peak();
    LAST_PANIC.with(|l| *l.borrow_mut() = None);
    let t0 = std::time::Instant::now();
    IN_CHECK.with(|c| c.set(true));
    let out = catch_unwind(AssertUnwindSafe(f));
    IN_CHECK.with(|c| c.set(false));
    let secs = t0.elapsed().as_secs_f64();
    let peak = peak();
    let verdict = match out {
        Err(_) => Some(format!(
            "panicked: {}",
            LAST_PANIC
                .with(|l| l.borrow_mut().take())
                .unwrap_or_else(|| "(no message)".into())
        )),
        Ok((names, Err(e))) if !e.contains(&names) => {
            Some(format!("error does not name {names}: {e}"))
        }
        _ => None,
    };
    if verdict.is_some() {
        return verdict;
    }
    if peak > alloc_budget(input_len) {
        return Some(format!(
            "allocated {peak} bytes at once for a {input_len}-byte input"
        ));
    }
    if secs > 10.0 {
        return Some(format!("took {secs:.1} s"));
    }
    None
}

/// The failures of one target: each distinct verdict once, with the first input that gave it.
#[derive(Default)]
pub struct Failures {
    /// Target name (in the report).
    pub target: String,
    /// (verdict, case description, input) per distinct verdict.
    pub seen: Vec<(String, String, Vec<u8>)>,
    /// Cases run.
    pub cases: usize,
}

impl Failures {
    /// A report for `target`.
    pub fn new(target: &str) -> Failures {
        Failures {
            target: target.into(),
            ..Failures::default()
        }
    }

    /// Records one case's verdict.
    pub fn record(&mut self, case: &str, input: &[u8], v: Verdict) {
        self.cases += 1;
        if let Some(v) = v {
            // the panic location (or the first line) identifies the bug
            let key: String = v.lines().next().unwrap_or("").chars().take(200).collect();
            let key = strip_tmp(&key);
            if !self.seen.iter().any(|(k, _, _)| *k == key) {
                self.seen.push((key, case.into(), input.to_vec()));
            }
        }
    }

    /// Panics listing every distinct failure with its input (escaped, at most 600 bytes shown),
    /// also written to `target/tmp/fuzz-failures/` for replay.
    pub fn assert_none(&self) {
        if self.seen.is_empty() {
            return;
        }
        let dir = option_env!("CARGO_TARGET_TMPDIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(std::env::temp_dir)
            .join("fuzz-failures");
        let _ = std::fs::create_dir_all(&dir);
        let mut msg = format!(
            "{}: {} distinct failures in {} cases\n",
            self.target,
            self.seen.len(),
            self.cases
        );
        for (i, (v, case, input)) in self.seen.iter().enumerate() {
            let file = dir.join(format!("{}-{i}.bin", self.target));
            let _ = std::fs::write(&file, input);
            msg.push_str(&format!(
                "--- {v}\n    case: {case}\n    input ({} bytes, saved as {}): {}\n",
                input.len(),
                file.display(),
                escape(&input[..input.len().min(600)])
            ));
        }
        panic!("{msg}");
    }
}

/// A temp-dir path in a message, replaced by `TMP` (so one bug in many temp dirs is one key).
fn strip_tmp(s: &str) -> String {
    let mut out = String::new();
    for w in s.split(' ') {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(if w.contains("/.tmp") || w.contains("/tmp/") {
            "TMP"
        } else {
            w
        });
    }
    out
}

/// Bytes as a Rust byte-string literal body.
pub fn escape(b: &[u8]) -> String {
    b.iter()
        .flat_map(|&c| std::ascii::escape_default(c))
        .map(char::from)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// mutations
// ---------------------------------------------------------------------------------------------

/// The seeded RNG of a target (seed from `TMA_FUZZ_SEED` when set, so a long local run can
/// explore other streams; the CI run always uses `default`).
pub fn rng(default: u64) -> ChaCha8Rng {
    let seed = std::env::var("TMA_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    ChaCha8Rng::seed_from_u64(seed)
}

/// Iterations of a target: `n`, times `TMA_FUZZ_SCALE` when set (a long local run).
pub fn iters(n: usize) -> usize {
    let scale: f64 = std::env::var("TMA_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    ((n as f64) * scale).max(1.0) as usize
}

/// Integers that break size arithmetic (as decimal text).
pub const HUGE_TEXT: &[&str] = &[
    "0",
    "-1",
    "1",
    "2",
    "255",
    "65536",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "1099511627776",
    "9007199254740993",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "1e308",
    "1e999",
    "-0",
    "nan",
    "inf",
    "0.5",
    "",
];

/// Integers that break size arithmetic (binary, little-endian).
pub const HUGE_U64: &[u64] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
    1 << 32,
    1 << 40,
    u64::MAX / 8,
    i64::MAX as u64,
    u64::MAX,
];

/// Applies 1 to 4 random mutations to `input`; `dict` adds format tokens to splice in.
pub fn mutate(rng: &mut ChaCha8Rng, input: &[u8], dict: &[&[u8]]) -> Vec<u8> {
    let mut b = input.to_vec();
    let k = rng.random_range(1..=4);
    for _ in 0..k {
        mutate_once(rng, &mut b, dict);
    }
    b
}

fn mutate_once(rng: &mut ChaCha8Rng, b: &mut Vec<u8>, dict: &[&[u8]]) {
    let len = b.len();
    match rng.random_range(0..11) {
        // bit flip
        0 if len > 0 => {
            let i = rng.random_range(0..len);
            b[i] ^= 1 << rng.random_range(0..8);
        }
        // interesting byte
        1 if len > 0 => {
            let i = rng.random_range(0..len);
            b[i] = [
                0u8, 0xff, 0x7f, 0x80, b'0', b'9', b'-', b',', b'\n', b'"', b'\'',
            ][rng.random_range(0..11)];
        }
        // insert random bytes
        2 => {
            let i = rng.random_range(0..=len);
            let n = rng.random_range(1..=8);
            let ins: Vec<u8> = (0..n).map(|_| rng.random()).collect();
            b.splice(i..i, ins);
        }
        // delete a range
        3 if len > 0 => {
            let i = rng.random_range(0..len);
            let n = rng.random_range(1..=(len - i).min(16));
            b.drain(i..i + n);
        }
        // truncate
        4 if len > 0 => {
            b.truncate(rng.random_range(0..len));
        }
        // duplicate a range
        5 if len > 0 => {
            let i = rng.random_range(0..len);
            let n = rng.random_range(1..=(len - i).min(64));
            let dup = b[i..i + n].to_vec();
            b.splice(i..i, dup);
        }
        // a huge binary integer over 1/2/4/8 bytes
        6 if len > 0 => {
            let v = HUGE_U64[rng.random_range(0..HUGE_U64.len())];
            let w = [1usize, 2, 4, 8][rng.random_range(0..4)].min(len);
            let i = rng.random_range(0..=len - w);
            b[i..i + w].copy_from_slice(&v.to_le_bytes()[..w]);
        }
        // replace a decimal number of the text with a huge / odd one
        7 | 8 => {
            let runs = digit_runs(b);
            if runs.is_empty() {
                return mutate_once(rng, b, dict);
            }
            let (s, e) = runs[rng.random_range(0..runs.len())];
            let t = HUGE_TEXT[rng.random_range(0..HUGE_TEXT.len())];
            b.splice(s..e, t.bytes());
        }
        // splice a dictionary token
        9 if !dict.is_empty() => {
            let t = dict[rng.random_range(0..dict.len())];
            let i = rng.random_range(0..=len);
            if rng.random_bool(0.5) && i < len {
                let e = (i + t.len()).min(len);
                b.splice(i..e, t.iter().copied());
            } else {
                b.splice(i..i, t.iter().copied());
            }
        }
        // copy a chunk over another place
        10 if len > 1 => {
            let i = rng.random_range(0..len);
            let j = rng.random_range(0..len);
            let n = rng.random_range(1..=(len - i.max(j)).min(32));
            let chunk = b[i..i + n].to_vec();
            b[j..j + n].copy_from_slice(&chunk);
        }
        _ => {
            let mut x = [0u8; 1];
            rng.fill_bytes(&mut x);
            b.push(x[0]);
        }
    }
}

/// Start and end of each run of ASCII digits.
fn digit_runs(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            out.push((s, i));
        } else {
            i += 1;
        }
    }
    out
}

/// Every prefix of `input` for files of at most `max` bytes; else `count` random prefixes and
/// the prefixes that cut within the first 128 bytes (headers).
pub fn truncations(rng: &mut ChaCha8Rng, input: &[u8], max: usize, count: usize) -> Vec<usize> {
    if input.len() <= max {
        return (0..input.len()).collect();
    }
    let mut v: Vec<usize> = (0..max.min(128).min(input.len())).collect();
    v.extend((0..count).map(|_| rng.random_range(0..input.len())));
    v
}

// ---------------------------------------------------------------------------------------------
// .npy headers
// ---------------------------------------------------------------------------------------------

/// The dtypes an `.npy` header mutation tries.
pub const NPY_DESCRS: &[&str] = &[
    "<i8",
    "<i4",
    "<u8",
    "<u4",
    "<f8",
    "<f4",
    "<f2",
    "|u1",
    "|b1",
    ">i8",
    ">f4",
    "<i0",
    "<i16",
    "|O",
    "<U8",
    "|S4",
    "|V8",
    "<c8",
    "<M8[s]",
    "i8",
    "<",
    "",
    "<i9999999999999999999",
];

/// The shapes an `.npy` header mutation tries (as the tuple's text).
pub const NPY_SHAPES: &[&str] = &[
    "()",
    "(0,)",
    "(1,)",
    "(2,)",
    "(2, 0)",
    "(0, 2)",
    "(2, 1)",
    "(1099511627776,)",
    "(2, 1099511627776)",
    "(1099511627776, 2)",
    "(4294967296, 4294967296)",
    "(18446744073709551615,)",
    "(18446744073709551615, 18446744073709551615)",
    "(3037000500, 3037000500)",
    "(-1,)",
    "(1, 1, 1, 1)",
    "(2, 2, 2)",
    "(2,",
    "2",
    "(a,)",
];

/// A v1.0 `.npy` file with the given header dictionary text and payload (no padding rules: the
/// point is to feed odd headers).
pub fn npy_with_header(dict: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    let mut h = dict.to_string();
    h.push('\n');
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(payload);
    out
}

/// The header dictionary and payload of an `.npy` v1.0 file (None if it is not one).
pub fn npy_split(b: &[u8]) -> Option<(String, Vec<u8>)> {
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" || b[6] != 1 {
        return None;
    }
    let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
    let h = std::str::from_utf8(b.get(10..10 + hl)?).ok()?;
    Some((h.trim_end().to_string(), b[10 + hl..].to_vec()))
}

/// A structure-aware mutation of a valid `.npy` file: another dtype, shape, order or version,
/// a payload cut or grown, or a byte-level mutation of the whole file.
pub fn mutate_npy(rng: &mut ChaCha8Rng, valid: &[u8]) -> Vec<u8> {
    let Some((dict, payload)) = npy_split(valid) else {
        return mutate(rng, valid, NPY_DICT);
    };
    let descr = NPY_DESCRS[rng.random_range(0..NPY_DESCRS.len())];
    let shape = NPY_SHAPES[rng.random_range(0..NPY_SHAPES.len())];
    let fortran = rng.random_bool(0.3);
    let cur_descr = field(&dict, "'descr': '", "'").unwrap_or("<i8").to_string();
    let cur_shape = field(&dict, "'shape': ", ")")
        .map(|s| format!("{s})"))
        .unwrap_or("()".into());
    let mut payload = payload;
    match rng.random_range(0..8) {
        0 => {
            return npy_with_header(
                &format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {cur_shape}, }}"),
                &payload,
            )
        }
        1 => {
            return npy_with_header(
                &format!("{{'descr': '{cur_descr}', 'fortran_order': False, 'shape': {shape}, }}"),
                &payload,
            )
        }
        2 => {
            let f = if fortran { "True" } else { "False" };
            return npy_with_header(
                &format!(
                    "{{'descr': '{cur_descr}', 'fortran_order': {f}, 'shape': {cur_shape}, }}"
                ),
                &payload,
            );
        }
        3 => {
            // a payload cut or grown by a few elements
            let n = rng.random_range(1..=16);
            if rng.random_bool(0.5) {
                payload.truncate(payload.len().saturating_sub(n));
            } else {
                payload.extend((0..n).map(|_| rng.random::<u8>()));
            }
            return npy_with_header(&dict, &payload);
        }
        4 => {
            // version 2/3 header of the same dictionary, or an unknown version
            let mut out = b"\x93NUMPY".to_vec();
            let v = [2u8, 3, 0, 4, 255][rng.random_range(0..5)];
            out.extend_from_slice(&[v, 0]);
            let h = format!("{dict}\n");
            let hl = if rng.random_bool(0.8) {
                h.len() as u32
            } else {
                HUGE_U64[rng.random_range(0..HUGE_U64.len())] as u32
            };
            out.extend_from_slice(&hl.to_le_bytes());
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(&payload);
            return out;
        }
        5 => {
            // a huge header length
            let mut out = valid.to_vec();
            let v = HUGE_U64[rng.random_range(0..HUGE_U64.len())] as u16;
            out[8..10].copy_from_slice(&v.to_le_bytes());
            return out;
        }
        6 => {
            // mutate the header text only
            let d = mutate(rng, dict.as_bytes(), NPY_DICT);
            let mut out = b"\x93NUMPY\x01\x00".to_vec();
            out.extend_from_slice(&((d.len() + 1) as u16).to_le_bytes());
            out.extend_from_slice(&d);
            out.push(b'\n');
            out.extend_from_slice(&payload);
            return out;
        }
        _ => {}
    }
    mutate(rng, valid, NPY_DICT)
}

/// Tokens of `.npy` headers.
pub const NPY_DICT: &[&[u8]] = &[
    b"'descr'",
    b"'shape'",
    b"'fortran_order'",
    b"True",
    b"False",
    b"(",
    b")",
    b",",
    b"{",
    b"}",
    b"'<i8'",
    b"'|O'",
    b"\x93NUMPY",
    b"18446744073709551615",
    b"1099511627776L",
];

fn field<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let i = s.find(start)? + start.len();
    let j = s[i..].find(end)?;
    Some(&s[i..i + j])
}

// ---------------------------------------------------------------------------------------------
// JSON documents (manifests, meta.json, checkpoint state)
// ---------------------------------------------------------------------------------------------

/// JSON values to put in place of one value of a document.
pub const JSON_VALUES: &[&str] = &[
    "null",
    "true",
    "0",
    "-1",
    "1.5",
    "4294967296",
    "1099511627776",
    "9223372036854775807",
    "18446744073709551615",
    "1e300",
    "-1e300",
    "\"\"",
    "\"x\"",
    "\"../../x\"",
    "[]",
    "[1099511627776]",
    "{}",
];

/// A structure-aware mutation of a JSON document: one value (found by walking the parsed
/// tree) replaced by an odd one, a key removed or renamed, or a byte-level mutation.
pub fn mutate_json(rng: &mut ChaCha8Rng, valid: &[u8]) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(valid) else {
        return mutate(rng, valid, JSON_DICT);
    };
    if rng.random_bool(0.25) {
        return mutate(rng, valid, JSON_DICT);
    }
    let mut paths = vec![];
    collect_paths(&v, &mut vec![], &mut paths);
    if paths.is_empty() {
        return mutate(rng, valid, JSON_DICT);
    }
    for _ in 0..rng.random_range(1..=2) {
        let p = &paths[rng.random_range(0..paths.len())];
        let op = rng.random_range(0..10);
        set_at(&mut v, p, op, rng);
    }
    serde_json::to_vec_pretty(&v).unwrap()
}

/// Tokens of JSON.
pub const JSON_DICT: &[&[u8]] = &[
    b"{", b"}", b"[", b"]", b"\"", b":", b",", b"null", b"\\u0000",
];

#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Idx(usize),
}

fn collect_paths(v: &serde_json::Value, cur: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                cur.push(Step::Key(k.clone()));
                out.push(cur.clone());
                collect_paths(x, cur, out);
                cur.pop();
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate().take(8) {
                cur.push(Step::Idx(i));
                out.push(cur.clone());
                collect_paths(x, cur, out);
                cur.pop();
            }
        }
        _ => {}
    }
}

fn set_at(v: &mut serde_json::Value, path: &[Step], op: u32, rng: &mut ChaCha8Rng) {
    let (last, parent) = path.split_last().unwrap();
    let mut cur = v;
    for s in parent {
        cur = match (s, cur) {
            (Step::Key(k), serde_json::Value::Object(m)) => match m.get_mut(k) {
                Some(x) => x,
                None => return,
            },
            (Step::Idx(i), serde_json::Value::Array(a)) => match a.get_mut(*i) {
                Some(x) => x,
                None => return,
            },
            _ => return,
        };
    }
    let new: serde_json::Value =
        serde_json::from_str(JSON_VALUES[rng.random_range(0..JSON_VALUES.len())]).unwrap();
    match (last, cur) {
        (Step::Key(k), serde_json::Value::Object(m)) => match op {
            0 => {
                m.remove(k);
            }
            1 => {
                if let Some(x) = m.remove(k) {
                    m.insert(format!("{k}_"), x);
                }
            }
            2 => {
                // a number scaled, an array emptied / duplicated
                if let Some(x) = m.get_mut(k) {
                    tweak(x, rng);
                }
            }
            _ => {
                m.insert(k.clone(), new);
            }
        },
        (Step::Idx(i), serde_json::Value::Array(a)) if *i < a.len() => match op {
            0 => {
                a.remove(*i);
            }
            1 => {
                let x = a[*i].clone();
                a.insert(*i, x);
            }
            2 => tweak(&mut a[*i], rng),
            _ => a[*i] = new,
        },
        _ => {}
    }
}

fn tweak(x: &mut serde_json::Value, rng: &mut ChaCha8Rng) {
    match x {
        serde_json::Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                let d = [1u64, 2, 1 << 20, 1 << 40][rng.random_range(0..4)];
                *x = if rng.random_bool(0.5) {
                    serde_json::json!(u.saturating_add(d))
                } else {
                    serde_json::json!(u.saturating_sub(1))
                };
            }
        }
        serde_json::Value::Array(a) => {
            if rng.random_bool(0.5) {
                a.clear()
            } else if let Some(f) = a.first().cloned() {
                a.push(f)
            }
        }
        serde_json::Value::String(s) => s.push('x'),
        _ => *x = serde_json::Value::Null,
    }
}
