//! Line-by-line reading of text files, gzip-compressed or not (told by the gzip magic, not by
//! the name), with errors naming the file and the line.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::raw::at_line;
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

/// Bytes of text handed to one parallel parse (whole lines; a longer line makes a longer block).
const BLOCK: usize = 8 << 20;

/// Reads `path` (gzip or not) in blocks of whole lines and runs `parse(first_line, block)` on
/// up to a few blocks per thread at once (rayon), returning the results in file order;
/// `first_line` is the 1-based number of the block's first line, for errors. For the large
/// files (edges, features): the decompression stays serial, the parsing does not.
///
/// # Errors
/// The first error of `parse` in file order (checked against gzip corruption later in the
/// file, as [`scan`] does); corrupt gzip data naming the line reached.
pub(crate) fn scan_blocks<T: Send>(
    path: &Path,
    parse: impl Fn(usize, &[u8]) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    scan_blocks_of(path, BLOCK, parse)
}

/// [`scan_blocks`] with blocks of about `block_bytes`.
fn scan_blocks_of<T: Send>(
    path: &Path,
    block_bytes: usize,
    parse: impl Fn(usize, &[u8]) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    use rayon::prelude::*;
    use std::io::Read;
    let mut lines = Lines::open(path)?;
    let batch = 2 * rayon::current_num_threads().max(1);
    let mut out = Vec::new();
    let mut carry: Vec<u8> = Vec::new();
    let mut next_line = 1usize;
    let mut done = false;
    while !done {
        // read up to `batch` blocks, each ending at a newline (the last one at the end of file)
        let mut blocks: Vec<(usize, Vec<u8>)> = Vec::with_capacity(batch);
        while blocks.len() < batch && !done {
            let mut buf = std::mem::take(&mut carry);
            let start = buf.len();
            buf.resize(start + block_bytes, 0);
            let mut filled = start;
            while filled < buf.len() {
                match lines.reader.read(&mut buf[filled..]) {
                    Ok(0) => {
                        done = true;
                        break;
                    }
                    Ok(k) => filled += k,
                    Err(e) if lines.gz => {
                        return Err(at_line(
                            path,
                            next_line + buf[..filled].iter().filter(|&&b| b == b'\n').count(),
                            format!("corrupt or truncated gzip data ({e})"),
                        ))
                    }
                    Err(source) => {
                        return Err(GraphError::Io {
                            path: path.to_path_buf(),
                            source,
                        })
                    }
                }
            }
            buf.truncate(filled);
            if !done {
                match buf.iter().rposition(|&b| b == b'\n') {
                    Some(p) => carry = buf.split_off(p + 1),
                    None => {
                        carry = buf; // one line longer than the block: read on
                        continue;
                    }
                }
            }
            if buf.is_empty() {
                continue;
            }
            let n = buf.iter().filter(|&&b| b == b'\n').count();
            blocks.push((next_line, buf));
            next_line += n;
        }
        let parsed: Vec<Result<T>> = blocks
            .par_iter()
            .map(|(first, b)| parse(*first, b))
            .collect();
        for r in parsed {
            match r {
                Ok(v) => out.push(v),
                Err(e) => return Err(lines.explain(e)),
            }
        }
    }
    Ok(out)
}

/// The lines of a block: `(line number, text without \n / \r\n)`.
pub(crate) fn block_lines(first: usize, block: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let body = block.strip_suffix(b"\n").unwrap_or(block);
    body.split(|&b| b == b'\n')
        .enumerate()
        .map(move |(i, l)| (first + i, l.strip_suffix(b"\r").unwrap_or(l)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of a few bytes (lines cut anywhere, lines longer than a block, `\r\n`, no final
    /// newline, gzip) give the lines and line numbers of the line-by-line reader.
    #[test]
    fn blocks_give_the_lines_of_the_line_reader() {
        let dir = tempfile::tempdir().unwrap();
        let text = "a,1\r\nbb,22\n\nccc,333333333333333\nd\r\ne,5";
        let plain = dir.path().join("t.csv");
        std::fs::write(&plain, text).unwrap();
        let gz = dir.path().join("t.csv.gz");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut e, text.as_bytes()).unwrap();
        std::fs::write(&gz, e.finish().unwrap()).unwrap();
        for p in [&plain, &gz] {
            let want: Vec<(usize, Vec<u8>)> = scan(p, |l| {
                let mut v = Vec::new();
                while let Some((n, t)) = l.next_line()? {
                    v.push((n, t.to_vec()));
                }
                Ok(v)
            })
            .unwrap();
            assert_eq!(want.len(), 6);
            assert_eq!(want[5], (6, b"e,5".to_vec()));
            for size in [1, 3, 7, 64, 1 << 20] {
                let got: Vec<(usize, Vec<u8>)> = scan_blocks_of(p, size, |first, b| {
                    Ok(block_lines(first, b)
                        .map(|(n, t)| (n, t.to_vec()))
                        .collect::<Vec<_>>())
                })
                .unwrap()
                .into_iter()
                .flatten()
                .collect();
                assert_eq!(got, want, "{} in blocks of {size}", p.display());
            }
        }
    }
}
