//! A process's memory, measured while a run goes ([`ProcessMemory`], [`start_sampler`]): peak
//! RSS (`VmHWM`) and peak anonymous memory (`RssAnon`, sampled every [`SAMPLE_EVERY`] by a
//! low-rate thread), reported in the run's output and in `summary.json`.
//!
//! RSS counts the pages of mapped files a process has touched (graph, features and parts
//! mapped from disk) as well as its anonymous memory (heap, stacks); the mapped pages are page
//! cache the kernel reclaims under pressure and shares between processes mapping the same file,
//! so the anonymous part is what a process really costs. See `docs/graph-format.md` for the
//! per-trainer formula. What a run will need is estimated before it starts
//! ([`crate::run::memory_estimate`]).

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Memory this process may still use, bytes: the least of the machine's available memory
/// (`MemAvailable`), the cgroup's limit less its usage, and the address-space limit
/// (`ulimit -v`) less this process's size. None where none of them can be read.
pub fn available_bytes() -> Option<u64> {
    let mut best: Option<u64> = None;
    let mut take = |b: u64| best = Some(best.map_or(b, |x: u64| x.min(b)));
    if let Some(b) = tma_graph::memory::machine_available_bytes() {
        take(b);
    }
    let read_u64 =
        |p: &str| -> Option<u64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    if let (Some(max), Some(cur)) = (
        read_u64("/sys/fs/cgroup/memory.max"),
        read_u64("/sys/fs/cgroup/memory.current"),
    ) {
        take(max.saturating_sub(cur));
    }
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we pass.
        if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0
            && lim.rlim_cur != libc::RLIM_INFINITY
        {
            let used = tma_graph::memory::virtual_bytes().unwrap_or(0);
            take(lim.rlim_cur.saturating_sub(used));
        }
    }
    best
}

/// How often the sampler thread reads `RssAnon`.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// Peak memory of one process of a run (`summary.json` `memory`, one entry per process).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessMemory {
    /// What the process did: `in-process` (coordinator and trainer threads in one process),
    /// `coordinator` (MPI rank 0) or `trainer` (an MPI trainer rank).
    pub role: String,
    /// MPI rank (None in-process).
    pub rank: Option<usize>,
    /// The trainer it ran (MPI trainer ranks).
    pub trainer: Option<usize>,
    /// Peak resident set size, bytes (`VmHWM`: anonymous memory plus touched pages of mapped
    /// files); None where `/proc/self/status` does not exist.
    pub peak_rss_bytes: Option<u64>,
    /// Peak anonymous resident memory, bytes (`RssAnon`, the largest value the sampler saw
    /// and the current one); None where `/proc/self/status` does not exist.
    pub peak_anon_bytes: Option<u64>,
}

impl ProcessMemory {
    /// This process's peaks so far, with its role.
    pub fn this_process(role: &str, rank: Option<usize>, trainer: Option<usize>) -> ProcessMemory {
        ProcessMemory {
            role: role.to_string(),
            rank,
            trainer,
            peak_rss_bytes: tma_graph::memory::peak_rss_bytes(),
            peak_anon_bytes: peak_anon_bytes(),
        }
    }

    /// One line for the run's output, e.g. `in-process: peak RSS 297 MiB, peak anonymous 180 MiB`.
    pub fn line(&self) -> String {
        let who = match (self.rank, self.trainer) {
            (Some(r), Some(t)) => format!("{} (rank {r}, trainer {t})", self.role),
            (Some(r), None) => format!("{} (rank {r})", self.role),
            _ => self.role.clone(),
        };
        let mib = |b: Option<u64>| {
            b.map_or("unknown".into(), |b| {
                format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
            })
        };
        format!(
            "{who}: peak RSS {}, peak anonymous {}",
            mib(self.peak_rss_bytes),
            mib(self.peak_anon_bytes)
        )
    }
}

static PEAK_ANON_KIB: AtomicU64 = AtomicU64::new(0);
static SAMPLER: OnceLock<bool> = OnceLock::new();

/// Samples `RssAnon` once now, raising the recorded peak; returns the current value (bytes).
pub fn sample_anon() -> Option<u64> {
    let k = tma_graph::memory::anon_bytes()? / 1024;
    PEAK_ANON_KIB.fetch_max(k, Ordering::Relaxed);
    Some(k * 1024)
}

/// Starts, once per process, the thread that samples `RssAnon` every [`SAMPLE_EVERY`]
/// (a detached thread reading one small file; it ends with the process). Returns whether
/// sampling works here (`/proc/self/status` has `RssAnon`).
pub fn start_sampler() -> bool {
    *SAMPLER.get_or_init(|| {
        if sample_anon().is_none() {
            return false;
        }
        std::thread::Builder::new()
            .name("tma-memory".into())
            .spawn(|| loop {
                std::thread::sleep(SAMPLE_EVERY);
                sample_anon();
            })
            .is_ok()
    })
}

/// The peak anonymous memory seen so far (bytes): the sampler's maximum and the current value.
pub fn peak_anon_bytes() -> Option<u64> {
    sample_anon()?;
    Some(PEAK_ANON_KIB.load(Ordering::Relaxed) * 1024)
}

#[cfg(test)]
mod sampler_tests {
    use super::*;

    #[test]
    fn sampler_sees_an_allocation_after_it_is_freed() {
        if !start_sampler() {
            panic!("/proc/self/status has no RssAnon on this host");
        }
        let before = peak_anon_bytes().unwrap();
        // 256 MiB touched, held for a few sampling periods, then freed
        let v = vec![1u8; 256 << 20];
        std::thread::sleep(SAMPLE_EVERY * 5);
        assert_eq!(v.iter().map(|&x| x as u64).sum::<u64>(), 256 << 20);
        drop(v);
        let peak = peak_anon_bytes().unwrap();
        assert!(peak >= before + (200 << 20), "peak {peak} before {before}");
        let m = ProcessMemory::this_process("in-process", None, None);
        assert!(m.peak_rss_bytes.unwrap() >= m.peak_anon_bytes.unwrap() - (64 << 20));
        assert!(
            m.line().starts_with("in-process: peak RSS "),
            "{}",
            m.line()
        );
    }
}
