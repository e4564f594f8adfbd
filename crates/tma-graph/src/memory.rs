//! This process's memory as the Linux kernel reports it: the one reader of
//! `/proc/self/status` (and `/proc/meminfo`) every crate and binary of tma uses, for the peak
//! memory each process reports and the budgets checked while it runs.
//!
//! RSS counts touched pages of mapped files (graph, features, parts) as well as anonymous
//! memory (heap, stacks); the anonymous part is what a process really costs (mapped pages are
//! page cache the kernel reclaims and shares). Every function returns `None` where the file or
//! the field does not exist (not Linux, or a kernel without the field).

/// The value of `field` (e.g. `VmHWM`, without the colon) in the text of a `/proc` status
/// file such as `/proc/self/status` or `/proc/meminfo`, whose lines read `Field:  1234 kB`;
/// in bytes (the kernel writes kB = KiB).
pub fn parse_kib_field(text: &str, field: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    let kib: u64 = line[field.len() + 1..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// A field of this process's `/proc/self/status` in bytes (`VmHWM`, `VmRSS`, `RssAnon`,
/// `RssFile`, `VmSize`, ...).
pub fn status_bytes(field: &str) -> Option<u64> {
    parse_kib_field(&std::fs::read_to_string("/proc/self/status").ok()?, field)
}

/// Peak resident set size of this process so far, bytes (`VmHWM`: anonymous memory plus
/// touched pages of mapped files).
pub fn peak_rss_bytes() -> Option<u64> {
    status_bytes("VmHWM")
}

/// Resident set size of this process now, bytes (`VmRSS`).
pub fn rss_bytes() -> Option<u64> {
    status_bytes("VmRSS")
}

/// Anonymous resident memory of this process now, bytes (`RssAnon`).
pub fn anon_bytes() -> Option<u64> {
    status_bytes("RssAnon")
}

/// Resident pages of mapped files of this process now, bytes (`RssFile`).
pub fn file_bytes() -> Option<u64> {
    status_bytes("RssFile")
}

/// Virtual address space of this process now, bytes (`VmSize`; what `ulimit -v` limits).
pub fn virtual_bytes() -> Option<u64> {
    status_bytes("VmSize")
}

/// Memory the machine has available for new work, bytes (`MemAvailable` of `/proc/meminfo`).
pub fn machine_available_bytes() -> Option<u64> {
    parse_kib_field(
        &std::fs::read_to_string("/proc/meminfo").ok()?,
        "MemAvailable",
    )
}

/// Memory of the machine, bytes (`MemTotal` of `/proc/meminfo`).
pub fn machine_total_bytes() -> Option<u64> {
    parse_kib_field(&std::fs::read_to_string("/proc/meminfo").ok()?, "MemTotal")
}

/// `bytes` in MiB, for reports.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_parsed_in_bytes_by_exact_name() {
        let t = "Name:\ttma\nVmHWM:\t  2048 kB\nVmHWMx:\t 1 kB\nRssAnon:\t     12 kB\nbad:\tx kB\n";
        assert_eq!(parse_kib_field(t, "VmHWM"), Some(2048 * 1024));
        assert_eq!(parse_kib_field(t, "RssAnon"), Some(12 * 1024));
        // a field is matched whole: `VmHW` is not `VmHWM`
        assert_eq!(parse_kib_field(t, "VmHW"), None);
        assert_eq!(parse_kib_field(t, "bad"), None);
        assert_eq!(parse_kib_field(t, "RssFile"), None);
        assert_eq!(parse_kib_field("Big: 18446744073709551615 kB", "Big"), None);
    }

    #[test]
    fn this_process_reports_its_memory_on_linux() {
        if !std::path::Path::new("/proc/self/status").exists() {
            panic!("this test runs on Linux: /proc/self/status is missing");
        }
        let v: Vec<u8> = vec![1; 64 << 20];
        let (peak, rss, anon) = (
            peak_rss_bytes().unwrap(),
            rss_bytes().unwrap(),
            anon_bytes().unwrap(),
        );
        assert!(
            anon >= 64 << 20 && rss >= anon && peak >= rss,
            "{peak} {rss} {anon}"
        );
        assert!(file_bytes().is_some() && virtual_bytes().unwrap() >= rss);
        assert!(machine_total_bytes().unwrap() >= machine_available_bytes().unwrap());
        assert_eq!(v.iter().map(|&b| b as u64).sum::<u64>(), 64 << 20);
        assert_eq!(mib(3 << 20), 3.0);
    }
}
