//! The round metrics as TensorBoard scalars (`tma train --tensorboard DIR`): an event file
//! `DIR/<run name>/events.out.tfevents.<unix seconds>.<host>` that `tensorboard --logdir DIR`
//! reads next to PyTorch runs, written as the run goes (each round's record is one write, so
//! TensorBoard sees every formed round).
//!
//! The format, written here (docs/decisions/0025-tensorboard-event-files.md): TFRecord framing
//! (`u64` length little-endian, masked CRC-32C of the length, the data, masked CRC-32C of the
//! data; mask = `((crc >> 15) | (crc << 17)) + 0xa282ead8`) around `Event` protobufs
//! (`wall_time` double 1, `step` int64 2, `file_version` string 3 = `brain.Event:2` in the
//! first event, `summary` message 5 → `Summary.value` repeated message 1 → `{tag` string 1,
//! `simple_value` float 2`}`), as TensorFlow's `tensorboard/compat/proto/event.proto` and
//! `summary.proto` define them.
//!
//! Scalars, step = round number (1-based, continued across resumes), wall time = real time
//! (seconds since the Unix epoch) when the round was recorded:
//!
//! | tag | value | when |
//! |---|---|---|
//! | `val/<metric>` | every validation metric of the round's averaged model (`rounds.jsonl` `val.all`: e.g. `val/accuracy`, `val/macro_f1`; `val/mrr`, `val/hits@10`) | validated rounds (every `--eval-every`-th and the last) |
//! | `train/loss` | mean training mini-batch loss since the previous round | rounds with a step |
//! | `train/steps` | optimizer steps of the round's participants since the start of the run, summed | every round |
//! | `round/participants` | trainers in the round's average | every round |
//! | `time/train_s` | training time when the round formed, seconds | every round |
//! | `time/eval_s` | wall-clock seconds the round's validation took | every round |
//! | `test/<metric>` | test metrics of the last round's model (`summary.json` `final_test`) | at the end, step = the last round |
//! | `best_test/<metric>` | test metrics of the best-validation model (`best_test`) | at the end, step = its round |
//!
//! Values are `float32` (TensorBoard's `simple_value`): exact for step counts below 2^24.
//! Validation checks between rounds (`--val-check-interval`) are not written (they are in
//! `rounds.jsonl`): their step would be the round before them.

use crate::evaluation::record::{Observer, RoundRecord, Summary};
use crate::TrainError;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What TensorBoard's readers expect in the first event (`Event.file_version`).
pub const FILE_VERSION: &str = "brain.Event:2";

/// The prefix of every event file name (`tensorboard --logdir` finds files by it).
pub const FILE_PREFIX: &str = "events.out.tfevents.";

/// Scalars by tag, in the order written.
pub type Scalars = Vec<(String, f32)>;

/// A protobuf field read back: (field number, wire type, varint value, payload of the other
/// wire types).
type Field<'a> = (u64, u8, u64, &'a [u8]);

/// An event file being written (see the module documentation).
pub struct EventLog {
    path: PathBuf,
    file: File,
    /// Rounds (and summaries) written so far by this writer.
    written: u64,
    /// The folder the writer created (None when it existed): removed with an unused file.
    created_dir: Option<PathBuf>,
}

fn io_err(path: &Path, e: std::io::Error) -> TrainError {
    TrainError::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

/// The host name for the file name (`gethostname`; `localhost` when unknown), with
/// characters other than ASCII letters, digits, `-`, `_` and `.` replaced by `_`.
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).into_owned();
    if rc != 0 || name.is_empty() {
        return "localhost".to_string();
    }
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Seconds since the Unix epoch now (the events' `wall_time`).
pub fn wall_time() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl EventLog {
    /// Creates `dir` (and its parents) and a new event file in it,
    /// `events.out.tfevents.<unix seconds, 10 digits>.<host>` (`.1`, `.2`, ... appended when
    /// that name is taken), holding the first event (`file_version`, step 0).
    ///
    /// # Errors
    /// [`TrainError::Io`] naming the folder or the file that cannot be created or written.
    pub fn create(dir: &Path) -> Result<EventLog, TrainError> {
        let created_dir = (!dir.exists()).then(|| dir.to_path_buf());
        std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        let now = wall_time();
        let base = format!("{FILE_PREFIX}{:010}.{}", now as u64, host_name());
        let mut n = 0u32;
        let (path, file) = loop {
            let name = if n == 0 {
                base.clone()
            } else {
                format!("{base}.{n}")
            };
            let path = dir.join(name);
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(f) => break (path, f),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(e) => return Err(io_err(&path, e)),
            }
        };
        let mut log = EventLog {
            path,
            file,
            written: 0,
            created_dir,
        };
        let mut first = Vec::new();
        put_double(&mut first, 1, now);
        put_varint_field(&mut first, 2, 0);
        put_bytes(&mut first, 3, FILE_VERSION.as_bytes());
        log.append(&first)?;
        Ok(log)
    }

    /// The event file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rounds and summaries written so far (the header event not counted).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Appends one event of `scalars` at `step` and `wall_time` (one write; nothing when
    /// `scalars` is empty).
    ///
    /// # Errors
    /// [`TrainError::Io`] naming the event file (e.g. a full disk).
    pub fn write_scalars(
        &mut self,
        step: u64,
        wall_time: f64,
        scalars: &[(String, f32)],
    ) -> Result<(), TrainError> {
        if scalars.is_empty() {
            return Ok(());
        }
        let mut summary = Vec::new();
        for (tag, v) in scalars {
            let mut value = Vec::new();
            put_bytes(&mut value, 1, tag.as_bytes());
            value.push(2 << 3 | 5); // simple_value: float, fixed32
            value.extend_from_slice(&v.to_le_bytes());
            put_bytes(&mut summary, 1, &value);
        }
        let mut event = Vec::new();
        put_double(&mut event, 1, wall_time);
        put_varint_field(&mut event, 2, step);
        put_bytes(&mut event, 5, &summary);
        self.append(&event)?;
        self.written += 1;
        Ok(())
    }

    /// Appends the scalars of round `r` ([`round_scalars`]) at step `r.round`, now; a
    /// validation check writes nothing.
    ///
    /// # Errors
    /// As [`EventLog::write_scalars`].
    pub fn write_round(&mut self, r: &RoundRecord) -> Result<(), TrainError> {
        if r.check {
            return Ok(());
        }
        self.write_scalars(r.round, wall_time(), &round_scalars(r))
    }

    /// Appends the test metrics of a finished (or interrupted) run: `test/<metric>` at the
    /// last round, `best_test/<metric>` at the best round.
    ///
    /// # Errors
    /// As [`EventLog::write_scalars`].
    pub fn write_summary(&mut self, s: &Summary) -> Result<(), TrainError> {
        let now = wall_time();
        let (last, best) = summary_scalars(s);
        self.write_scalars(s.rounds, now, &last)?;
        self.write_scalars(s.best_round, now, &best)
    }

    /// Removes the event file when no round was written to it (a run that failed or was
    /// stopped before its first round), and its folder when this writer created it and it is
    /// empty then. Errors are ignored (a leftover file holds only the header event, which
    /// TensorBoard shows as nothing).
    pub fn discard_if_unused(&self) {
        if self.written == 0 {
            let _ = std::fs::remove_file(&self.path);
            if let Some(d) = &self.created_dir {
                let _ = std::fs::remove_dir(d);
            }
        }
    }

    fn append(&mut self, data: &[u8]) -> Result<(), TrainError> {
        let rec = frame(data);
        self.file.write_all(&rec).map_err(|e| io_err(&self.path, e))
    }
}

impl Observer for EventLog {
    fn on_round(&mut self, r: &RoundRecord) -> Result<(), TrainError> {
        self.write_round(r)
    }
}

/// The scalars of round `r`, by tag (see the module documentation); NaN values of a
/// diverged model are written as they are.
pub fn round_scalars(r: &RoundRecord) -> Scalars {
    let mut out = Vec::new();
    if !r.val.metric.is_empty() {
        for (name, v) in &r.val.all {
            out.push((format!("val/{name}"), *v as f32));
        }
    }
    if r.train_loss.is_finite() {
        out.push(("train/loss".into(), r.train_loss as f32));
    }
    out.push(("train/steps".into(), r.steps.iter().sum::<u64>() as f32));
    out.push(("round/participants".into(), r.participants.len() as f32));
    out.push(("time/train_s".into(), r.elapsed_s as f32));
    out.push(("time/eval_s".into(), r.eval_s as f32));
    out
}

/// The test scalars of a summary: those of the last round's model (`test/...`) and of the
/// best-validation model (`best_test/...`).
pub fn summary_scalars(s: &Summary) -> (Scalars, Scalars) {
    let tagged = |prefix: &str, all: &std::collections::BTreeMap<String, f64>| {
        all.iter()
            .map(|(k, v)| (format!("{prefix}/{k}"), *v as f32))
            .collect::<Vec<_>>()
    };
    (
        tagged("test", &s.final_test.all),
        tagged("best_test", &s.best_test.all),
    )
}

/// `data` as one TFRecord: length (u64 LE), masked CRC-32C of the length, data, masked
/// CRC-32C of the data.
pub fn frame(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut rec = Vec::with_capacity(data.len() + 16);
    rec.extend_from_slice(&len);
    rec.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    rec.extend_from_slice(data);
    rec.extend_from_slice(&masked_crc32c(data).to_le_bytes());
    rec
}

/// TFRecord's masked CRC-32C (Castagnoli) of `data`.
pub fn masked_crc32c(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    // ((crc >> 15) | (crc << 17)) + 0xa282ead8, as TensorFlow's crc32c::Mask
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn put_varint_field(buf: &mut Vec<u8>, field: u32, v: u64) {
    put_varint(buf, u64::from(field) << 3);
    put_varint(buf, v);
}

fn put_double(buf: &mut Vec<u8>, field: u32, v: f64) {
    put_varint(buf, u64::from(field) << 3 | 1);
    buf.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(buf: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_varint(buf, u64::from(field) << 3 | 2);
    put_varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

/// One event read back from an event file ([`read_events`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Seconds since the Unix epoch.
    pub wall_time: f64,
    /// The step (the round number; 0 for the header event).
    pub step: u64,
    /// `file_version` (the header event only).
    pub file_version: Option<String>,
    /// The summary's scalars, tag and value, in file order.
    pub scalars: Scalars,
}

/// Reads an event file as [`EventLog`] writes it, checking both CRCs of every record (a
/// check of what was written, and what the tests compare).
///
/// # Errors
/// [`TrainError::Io`] for a file that cannot be read; [`TrainError::Data`] naming the file,
/// the byte offset and the problem for a truncated record, a CRC mismatch or a malformed
/// protobuf.
pub fn read_events(path: &Path) -> Result<Vec<Event>, TrainError> {
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    let bad =
        |at: usize, what: &str| TrainError::Data(format!("{}: byte {at}: {what}", path.display()));
    let mut events = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let head = bytes
            .get(at..at + 12)
            .ok_or_else(|| bad(at, "truncated length"))?;
        let len_bytes: [u8; 8] = head[..8].try_into().expect("8 bytes");
        if masked_crc32c(&len_bytes).to_le_bytes() != head[8..12] {
            return Err(bad(at, "length CRC mismatch"));
        }
        let len = usize::try_from(u64::from_le_bytes(len_bytes))
            .map_err(|_| bad(at, "length too large"))?;
        let end = at
            .checked_add(12)
            .and_then(|s| s.checked_add(len))
            .filter(|e| e.checked_add(4).is_some_and(|e| e <= bytes.len()))
            .ok_or_else(|| bad(at, "truncated record"))?;
        let data = &bytes[at + 12..end];
        if masked_crc32c(data).to_le_bytes() != bytes[end..end + 4] {
            return Err(bad(at, "data CRC mismatch"));
        }
        events.push(decode_event(data).map_err(|e| bad(at, &e))?);
        at = end + 4;
    }
    Ok(events)
}

/// The protobuf fields of `data`, in order.
fn fields(data: &[u8]) -> Result<Vec<Field<'_>>, String> {
    fn varint(data: &[u8], at: &mut usize) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *data.get(*at).ok_or("truncated varint")?;
            *at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let key = varint(data, &mut at)?;
        let (field, wire) = (key >> 3, (key & 7) as u8);
        let take = |at: &mut usize, n: usize| -> Result<&[u8], String> {
            let s = data.get(*at..*at + n).ok_or("truncated field")?;
            *at += n;
            Ok(s)
        };
        match wire {
            0 => {
                let v = varint(data, &mut at)?;
                out.push((field, wire, v, &data[..0]));
            }
            1 => out.push((field, wire, 0, take(&mut at, 8)?)),
            2 => {
                let n = usize::try_from(varint(data, &mut at)?).map_err(|e| e.to_string())?;
                out.push((field, wire, 0, take(&mut at, n)?));
            }
            5 => out.push((field, wire, 0, take(&mut at, 4)?)),
            w => return Err(format!("wire type {w} of field {field}")),
        }
    }
    Ok(out)
}

fn decode_event(data: &[u8]) -> Result<Event, String> {
    let mut ev = Event {
        wall_time: f64::NAN,
        step: 0,
        file_version: None,
        scalars: Vec::new(),
    };
    for (field, wire, v, payload) in fields(data)? {
        match (field, wire) {
            (1, 1) => ev.wall_time = f64::from_le_bytes(payload.try_into().expect("8 bytes")),
            (2, 0) => ev.step = v,
            (3, 2) => {
                ev.file_version =
                    Some(String::from_utf8(payload.to_vec()).map_err(|e| e.to_string())?)
            }
            (5, 2) => {
                for (f, w, _, value) in fields(payload)? {
                    if (f, w) != (1, 2) {
                        return Err(format!("Summary field {f} (wire type {w})"));
                    }
                    let (mut tag, mut simple) = (None, None);
                    for (f, w, _, p) in fields(value)? {
                        match (f, w) {
                            (1, 2) => {
                                tag =
                                    Some(String::from_utf8(p.to_vec()).map_err(|e| e.to_string())?)
                            }
                            (2, 5) => {
                                simple = Some(f32::from_le_bytes(p.try_into().expect("4 bytes")))
                            }
                            _ => return Err(format!("Summary.Value field {f} (wire type {w})")),
                        }
                    }
                    match (tag, simple) {
                        (Some(t), Some(v)) => ev.scalars.push((t, v)),
                        _ => return Err("Summary.Value without tag or simple_value".into()),
                    }
                }
            }
            (f, w) => return Err(format!("Event field {f} (wire type {w})")),
        }
    }
    Ok(ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::eval::EvalResult;
    use std::collections::BTreeMap;

    #[test]
    fn records_are_framed_and_encoded_as_tensorflow_reads_them() {
        // values from TensorBoard's own code (tensorboard 2.21, Python):
        // `pywrap_tensorflow.masked_crc32c` and `event_pb2.Event.SerializeToString`
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(masked_crc32c(b"123456789"), 0xc78a_b0e5);
        let dir = tempfile::tempdir().unwrap();
        let mut log = EventLog::create(dir.path()).unwrap();
        let header_len = std::fs::metadata(log.path()).unwrap().len() as usize;
        log.write_scalars(3, 1.5, &[("a".into(), 1.0)]).unwrap();
        let bytes = std::fs::read(log.path()).unwrap();
        let ev = "09000000000000f83f10032a0a0a080a0161150000803f";
        let expected = format!("{}{}{}{}", "1700000000000000", "e7cef81e", ev, "59859981");
        let got: String = bytes[header_len..]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(got, expected);
        // nothing to write: no record
        log.write_scalars(4, 2.0, &[]).unwrap();
        assert_eq!(std::fs::read(log.path()).unwrap().len(), bytes.len());
        assert_eq!(log.written(), 1);
    }

    fn round(n: u64, check: bool, validated: bool) -> RoundRecord {
        let all: BTreeMap<String, f64> =
            [("accuracy".to_string(), 0.625), ("macro_f1".into(), 0.5)]
                .into_iter()
                .collect();
        RoundRecord {
            round: n,
            elapsed_s: 2.5 * n as f64,
            participants: vec![0, 2, 3],
            missing: vec![1],
            steps: vec![10 * n, 11 * n, 12 * n],
            epochs: vec![0, 0, 0],
            train_loss: if n == 1 { f64::NAN } else { 0.25 },
            val: if validated {
                EvalResult {
                    metric: "accuracy".into(),
                    value: 0.625,
                    all,
                }
            } else {
                EvalResult {
                    metric: String::new(),
                    value: f64::NAN,
                    all: BTreeMap::new(),
                }
            },
            eval_s: 0.125,
            eval_cpu_s: 0.1,
            is_best: true,
            skipped_slots: 0,
            late: None,
            check,
            server_step: None,
            restored: None,
            restored_check: false,
            correction: None,
        }
    }

    #[test]
    fn every_round_is_one_event_at_its_round_and_a_check_none() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("tb").join("run-a");
        let before = wall_time();
        let mut log = EventLog::create(&sub).unwrap();
        let name = log
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert!(name.starts_with(FILE_PREFIX), "{name}");
        // <10-digit seconds>.<host>
        let rest = &name[FILE_PREFIX.len()..];
        assert_eq!(rest.as_bytes()[10], b'.', "{name}");
        assert!(rest[..10].bytes().all(|b| b.is_ascii_digit()), "{name}");
        let obs: &mut dyn Observer = &mut log;
        obs.on_round(&round(1, false, true)).unwrap();
        obs.on_round(&round(1, true, true)).unwrap(); // a check: not written
        obs.on_round(&round(2, false, false)).unwrap();
        let after = wall_time();
        let events = read_events(log.path()).unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));
        assert_eq!((events[0].step, events[0].scalars.len()), (0, 0));
        for e in &events {
            assert!(e.wall_time >= before && e.wall_time <= after, "{e:?}");
        }
        let s = |v: &[(&str, f32)]| -> Vec<(String, f32)> {
            v.iter().map(|(t, x)| (t.to_string(), *x)).collect()
        };
        assert_eq!(events[1].step, 1);
        assert_eq!(
            events[1].scalars,
            s(&[
                ("val/accuracy", 0.625),
                ("val/macro_f1", 0.5),
                // round 1 made no step: no loss
                ("train/steps", 33.0),
                ("round/participants", 3.0),
                ("time/train_s", 2.5),
                ("time/eval_s", 0.125),
            ])
        );
        assert_eq!(events[2].step, 2);
        assert_eq!(
            events[2].scalars,
            s(&[
                // not validated: no val/
                ("train/loss", 0.25),
                ("train/steps", 66.0),
                ("round/participants", 3.0),
                ("time/train_s", 5.0),
                ("time/eval_s", 0.125),
            ])
        );
        assert_eq!(log.written(), 2);
    }

    #[test]
    fn a_file_without_a_round_is_removed_with_the_folder_it_made() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("run-b");
        let log = EventLog::create(&sub).unwrap();
        // a second writer in the same second gets another name
        let mut other = EventLog::create(&sub).unwrap();
        assert_ne!(log.path(), other.path());
        assert!(other.path().to_str().unwrap().ends_with(".1"));
        other.write_round(&round(1, false, true)).unwrap();
        log.discard_if_unused();
        other.discard_if_unused();
        assert!(!log.path().exists());
        assert!(other.path().exists(), "a file with a round is kept");
        assert!(sub.exists());
        let alone = dir.path().join("run-c");
        EventLog::create(&alone).unwrap().discard_if_unused();
        assert!(!alone.exists(), "the folder it created, empty, goes too");
    }

    #[test]
    fn a_damaged_file_is_refused_naming_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = EventLog::create(dir.path()).unwrap();
        log.write_scalars(1, 1.0, &[("x".into(), 2.0)]).unwrap();
        let mut bytes = std::fs::read(log.path()).unwrap();
        let last = bytes.len() - 5;
        bytes[last] ^= 1;
        std::fs::write(log.path(), &bytes).unwrap();
        let e = read_events(log.path()).unwrap_err().to_string();
        assert!(e.contains("data CRC mismatch"), "{e}");
        std::fs::write(log.path(), &bytes[..bytes.len() - 2]).unwrap();
        let e = read_events(log.path()).unwrap_err().to_string();
        assert!(e.contains("truncated record"), "{e}");
    }
}
