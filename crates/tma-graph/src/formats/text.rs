//! Line-by-line reading of text files, gzip-compressed or not (told by the gzip magic, not by
//! the name), with errors naming the file and the line.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::at_line;
use crate::error::{GraphError, Result};

/// A text file read one line at a time.
pub(crate) struct Lines {
    path: PathBuf,
    reader: Box<dyn BufRead>,
    gz: bool,
    line: usize,
    buf: Vec<u8>,
}

impl Lines {
    /// Opens `path`; a file starting with the gzip magic (`1f 8b`) is decompressed (all
    /// members, as `gzip -d` does).
    pub(crate) fn open(path: &Path) -> Result<Lines> {
        let io = |source| GraphError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut f = BufReader::with_capacity(1 << 20, std::fs::File::open(path).map_err(io)?);
        let gz = f.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
        let reader: Box<dyn BufRead> = if gz {
            Box::new(BufReader::with_capacity(
                1 << 20,
                flate2::bufread::MultiGzDecoder::new(f),
            ))
        } else {
            Box::new(f)
        };
        Ok(Lines {
            path: path.to_path_buf(),
            reader,
            gz,
            line: 0,
            buf: Vec::with_capacity(256),
        })
    }

    /// `e` (an error found in the text), or, for a gzip file whose remaining data turns out
    /// to be corrupt, that corruption: deflate data is checked only at the end of the stream,
    /// so garbled text may be met before the checksum fails.
    fn explain(&mut self, e: GraphError) -> GraphError {
        if !self.gz {
            return e;
        }
        if let GraphError::Invalid { reason, .. } = &e {
            if reason.contains("gzip data") {
                return e;
            }
        }
        let line = self.line;
        let mut sink = vec![0u8; 1 << 16];
        loop {
            match std::io::Read::read(&mut self.reader, &mut sink) {
                Ok(0) => return e,
                Ok(_) => continue,
                Err(err) => {
                    let what = match &e {
                        GraphError::Invalid { reason, .. } => reason.clone(),
                        other => other.to_string(),
                    };
                    return at_line(
                        &self.path,
                        line,
                        format!(
                            "corrupt or truncated gzip data ({err}, found after line {line}); \
                             the text read so far is garbled ({what})"
                        ),
                    );
                }
            }
        }
    }

    /// The next line (its 1-based number, and the text without its `\n` / `\r\n`), or
    /// `None` at the end.
    ///
    /// # Errors
    /// [`GraphError::Invalid`] naming the line for corrupt or truncated gzip data;
    /// [`GraphError::Io`] for a read error of a plain file.
    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &[u8])>> {
        self.buf.clear();
        let n = match self.reader.read_until(b'\n', &mut self.buf) {
            Ok(n) => n,
            Err(e) if self.gz => {
                return Err(at_line(
                    &self.path,
                    self.line + 1,
                    format!("corrupt or truncated gzip data ({e})"),
                ))
            }
            Err(source) => {
                return Err(GraphError::Io {
                    path: self.path.clone(),
                    source,
                })
            }
        };
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        let mut end = self.buf.len();
        if end > 0 && self.buf[end - 1] == b'\n' {
            end -= 1;
        }
        if end > 0 && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        Ok(Some((self.line, &self.buf[..end])))
    }
}

/// Opens `path` and runs `f` over its lines; an error `f` returns is checked against gzip
/// corruption later in the file (see [`Lines`]).
pub(crate) fn scan<T>(path: &Path, f: impl FnOnce(&mut Lines) -> Result<T>) -> Result<T> {
    let mut lines = Lines::open(path)?;
    match f(&mut lines) {
        Ok(v) => Ok(v),
        Err(e) => Err(lines.explain(e)),
    }
}

/// `tok` as shown in an error: at most 40 characters, lossy UTF-8.
pub(crate) fn show(tok: &[u8]) -> String {
    let s = String::from_utf8_lossy(tok);
    if s.chars().count() > 40 {
        format!("{}...", s.chars().take(40).collect::<String>())
    } else {
        s.into_owned()
    }
}

/// A field with surrounding spaces and one pair of double quotes removed.
pub(crate) fn trim(tok: &[u8]) -> &[u8] {
    let t = tok.trim_ascii();
    if t.len() >= 2 && t[0] == b'"' && t[t.len() - 1] == b'"' {
        t[1..t.len() - 1].trim_ascii()
    } else {
        t
    }
}

/// A non-negative decimal integer (an optional leading `+`; also `3.0`, as pandas writes
/// integer columns that held a NaN); `Err` says what is wrong with the token.
pub(crate) fn parse_id(tok: &[u8]) -> std::result::Result<u64, String> {
    let t = trim(tok);
    if t.is_empty() {
        return Err("empty field where a node id is expected".into());
    }
    let digits = t.strip_prefix(b"+").unwrap_or(t);
    let digits = digits.strip_suffix(b".0").unwrap_or(digits);
    if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
        let mut v: u64 = 0;
        for &d in digits {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add((d - b'0') as u64))
                .ok_or_else(|| format!("node id {} does not fit in 64 bits", show(t)))?;
        }
        return Ok(v);
    }
    if t[0] == b'-' && t[1..].iter().all(u8::is_ascii_digit) && t.len() > 1 {
        return Err(format!("negative node id {}", show(t)));
    }
    Err(format!(
        "bad field {:?}: expected a non-negative integer node id",
        show(t)
    ))
}

/// A finite `f32`.
pub(crate) fn parse_f32(tok: &[u8]) -> std::result::Result<f32, String> {
    let t = trim(tok);
    let s = std::str::from_utf8(t).map_err(|_| format!("bad field {:?}", show(t)))?;
    match s.parse::<f32>() {
        Ok(x) if x.is_finite() => Ok(x),
        Ok(x) => Err(format!("non-finite value {x} (NaN or infinity)")),
        Err(_) => Err(format!("bad field {:?}: expected a number", show(t))),
    }
}
