//! `tma convert` (a `.npy` dataset directory to the on-disk graph format, bounded-memory CSR
//! build), `tma generate` (an R-MAT graph straight to that format) and `tma info` on a graph
//! directory in that format (read from its manifest and mapped files, nothing copied).
//! Format: docs/graph-format.md; decisions: docs/decisions/0008-on-disk-graph.md.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use tma_graph::disk::{self, convert_npy_dir, ConvertOptions, Dtype, MappedGraph, Progress};
use tma_graph::formats::{self, Format, ReadOptions};
use tma_graph::{generate_rmat, LoadOptions, RmatConfig};

/// Parses a byte size (`512MiB`, `2G`, `1.5GiB`): the library's parser, the one every size
/// option of tma reads with ([`tma_train::options::table::parse_bytes`]).
pub fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    tma_train::options::table::parse_bytes(s)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

/// Part of `--memory-budget` set aside for the process's fixed footprint (binary, allocator,
/// thread stacks, I/O buffers: about 10 MiB measured); the rest bounds the build.
const RESERVE: u64 = 16 << 20;
/// Smallest `--memory-budget` accepted.
const MIN_BUDGET: u64 = 32 << 20;

/// Turns transparent huge pages off for this process: the binary's allocator asks for them
/// (docs/decisions/0004-allocator.md), which helps random row gathers but makes every
/// streaming buffer resident in 2 MiB steps (measured: peak RSS 46 instead of 33 MiB under a
/// 32 MiB budget). Streaming commands gain nothing from them.
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_THP_DISABLE takes plain integer arguments and only changes this
    // process's paging policy.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// The build's share of `--memory-budget` (the budget less [`RESERVE`]).
fn build_budget(b: u64) -> Result<u64> {
    if b < MIN_BUDGET {
        bail!(
            "--memory-budget {:.1} MiB is below the minimum of {} MiB",
            mib(b),
            MIN_BUDGET >> 20
        );
    }
    Ok(b - RESERVE)
}

/// Progress bars on stderr, one per stage (hidden when stderr is not a terminal).
struct Bars(Mutex<Option<ProgressBar>>);

impl Progress for Bars {
    fn start(&self, name: &str, total: u64) {
        let b = ProgressBar::new(total);
        b.set_style(
            ProgressStyle::with_template(
                "{msg:>16} {wide_bar} {percent:>3}% {human_pos}/{human_len} ({eta})",
            )
            .expect("template"),
        );
        b.set_message(name.to_string());
        *self.0.lock().unwrap() = Some(b);
    }
    fn inc(&self, n: u64) {
        if let Some(b) = &*self.0.lock().unwrap() {
            b.inc(n);
        }
    }
    fn finish(&self) {
        if let Some(b) = self.0.lock().unwrap().take() {
            b.finish_and_clear();
        }
    }
}

fn print_stages(stages: &[(String, f64)], total: f64) {
    for (name, s) in stages {
        eprintln!("  {name:<40} {s:>9.2} s");
    }
    eprintln!("  {:<40} {total:>9.2} s", "total");
}

fn print_peak(budget: u64) {
    if let Some(p) = tma_graph::memory::peak_rss_bytes() {
        // (the sampler started with the command: the peak of the heap, which the budget bounds;
        // VmHWM counts the touched pages of mapped files too)
        let anon = tma_train::memory::peak_anon_bytes().map_or(String::new(), |a| {
            format!("peak anonymous {:.1} MiB, ", mib(a))
        });
        eprintln!(
            "{anon}peak RSS {:.1} MiB (VmHWM, pages of mapped files included; --memory-budget {:.1} MiB)",
            mib(p),
            mib(budget)
        );
    }
}

/// What `tma convert` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvertTo {
    /// The on-disk graph format (docs/graph-format.md), memory-mapped by tma.
    Disk,
    /// tma's .npy dataset layout (docs/dataset-format.md), with node_ids.npy when the source's
    /// node ids were remapped.
    Npy,
}

/// Options of `tma convert`.
#[derive(Args, Debug, Clone)]
pub struct ConvertOpts {
    /// Source: a dataset in any format tma reads: a .npy directory (docs/dataset-format.md),
    /// an OGB directory, a SNAP or CSV edge list, a .npz file (also --from).
    #[arg(long, visible_alias = "from", value_name = "PATH")]
    pub dataset: PathBuf,
    /// Format of the source: tma, ogb, snap, npz or csv. Default: detected from the path.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Read an edge-list source (ogb, snap, npz, csv) as undirected: every arc gets its reverse.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub undirected: bool,
    /// What to write: disk (the on-disk graph format, docs/graph-format.md) or npy (tma's .npy
    /// layout, docs/dataset-format.md).
    #[arg(long, value_enum, default_value = "disk")]
    pub to: ConvertTo,
    /// Output directory; must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Memory for the whole process (e.g. 512MiB, 2GiB; at least 32MiB): 16 MiB for its fixed
    /// footprint, the rest for the CSR build. Features, labels and the split are converted in
    /// memory, outside this budget. Applies to a .npy source written --to disk; other
    /// conversions read the whole dataset into memory.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_bytes, allow_hyphen_values = true)]
    pub memory_budget: u64,
    /// Which of the source's fixed splits to convert (*_masks.npy rows, OGB split/ directories
    /// sorted by name). Default: 0.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub split_index: usize,
    /// Hold link pairs out for validation and test (VAL,TEST: fractions of the undirected
    /// pairs, chosen by a seeded hash of the pair) and write the link-split section of the
    /// on-disk format: the held-out pairs, their fixed negatives, and the graph without them
    /// (both directions), in streaming passes within --memory-budget; `tma train --task link`
    /// then uses this split. Needs --to disk and a source without a link split. Default: none.
    #[arg(long, value_name = "VAL,TEST", allow_hyphen_values = true)]
    pub link_split: Option<String>,
    /// With --link-split: fixed evaluation negatives per held-out pair (OGB's ogbl-citation2
    /// protocol: 1000, never a true edge or a self-loop); 0 = none stored (each run draws
    /// them from its seed when it starts).
    #[arg(long, value_name = "K", default_value_t = 1000)]
    pub link_num_neg: usize,
    /// With --link-split: seed of the held-out pairs and their negatives.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// `tma convert`: a `.npy` directory to the on-disk format within `--memory-budget`
/// ([`convert_npy_dir`]); any other source, or `--to npy`, through the in-memory dataset
/// ([`tma_graph::formats`]).
///
/// A conversion that fails (a full disk, bad input found midway) leaves `--out` as it found
/// it: removed when it created it, emptied when it was an empty directory.
pub fn convert(o: ConvertOpts) -> Result<()> {
    tma_train::memory::start_sampler();
    let out = o.out.clone();
    undo_on_error(&out, || convert_to(o))
}

/// Runs `write`, which fills the directory `out`; on error puts `out` back as it was before
/// (removed if it did not exist, emptied if it was empty; a non-empty `out` is refused by
/// the writers before they write, and is left alone), saying so.
fn undo_on_error(out: &Path, write: impl FnOnce() -> Result<()>) -> Result<()> {
    let existed_empty = std::fs::read_dir(out).map(|mut d| d.next().is_none()).ok();
    let r = write();
    if r.is_err() {
        let touched = match existed_empty {
            None => std::fs::remove_dir_all(out).is_ok(),
            Some(true) => tma_train::run::discard_unstarted(out, true),
            Some(false) => false,
        };
        if touched {
            eprintln!(
                "removed what was written to {} (the write failed)",
                out.display()
            );
        }
    }
    r
}

fn convert_to(o: ConvertOpts) -> Result<()> {
    let Some(ls) = &o.link_split else {
        return convert_graph(o);
    };
    let v = floats("--link-split", ls, 2)?;
    if o.to == ConvertTo::Npy {
        bail!("--link-split writes the link-split section of the on-disk format: use --to disk (the .npy layout has none)");
    }
    if o.out.exists() && std::fs::read_dir(&o.out).map_or(true, |mut d| d.next().is_some()) {
        bail!(
            "--out {}: the directory exists and is not empty (choose a new one)",
            o.out.display()
        );
    }
    let t = Instant::now();
    let format = match o.format {
        Some(f) => f,
        None => formats::detect(&o.dataset)
            .with_context(|| format!("tma convert --dataset {}", o.dataset.display()))?,
    };
    if format == Format::Tma && !o.undirected && disk::is_disk_graph(&o.dataset) {
        return split_links_cmd(&o.dataset, &o, v[0], v[1], t);
    }
    // any other source: converted to the on-disk format next to --out first, then split
    let name = o
        .out
        .file_name()
        .map_or_else(|| "out".to_string(), |n| n.to_string_lossy().into_owned());
    let staging = o
        .out
        .parent()
        .unwrap_or(Path::new(""))
        .join(format!(".{name}.convert-staging"));
    if staging.exists() {
        // a staging directory of an interrupted `tma convert --link-split` to the same --out
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("removing {}", staging.display()))?;
    }
    eprintln!(
        "converting {} to the on-disk format in {} first (removed at the end)",
        o.dataset.display(),
        staging.display()
    );
    let inner = ConvertOpts {
        out: staging.clone(),
        link_split: None,
        ..o.clone()
    };
    let r = convert_graph(inner).and_then(|()| split_links_cmd(&staging, &o, v[0], v[1], t));
    let _ = std::fs::remove_dir_all(&staging);
    r
}

/// `tma convert --link-split` of an on-disk graph `src` into `o.out` ([`disk::split_links`]).
fn split_links_cmd(src: &Path, o: &ConvertOpts, val: f64, test: f64, t: Instant) -> Result<()> {
    let budget = build_budget(o.memory_budget)?;
    let rep = disk::split_links(
        src,
        &o.out,
        &disk::LinkSplitOptions {
            val,
            test,
            num_neg: o.link_num_neg,
            seed: o.seed,
            memory_budget: budget,
        },
        &Bars(Mutex::new(None)),
    )
    .with_context(|| format!("tma convert --link-split --dataset {}", o.dataset.display()))?;
    println!(
        "link split -> {}: {} validation and {} test pairs held out (seed {}); the stored graph is the training graph: {} of {} arcs ({} removed, both directions of each held-out pair); `tma train --task link --dataset {}` uses this split",
        o.out.display(),
        rep.held_out.0,
        rep.held_out.1,
        o.seed,
        rep.arcs_out,
        rep.arcs_in,
        rep.arcs_in - rep.arcs_out,
        o.out.display()
    );
    if rep.held_out.0 == 0 || rep.held_out.1 == 0 {
        eprintln!(
            "warning: --link-split {val},{test} held out no {} pair on this graph: a run cannot evaluate that split",
            if rep.held_out.0 == 0 { "validation" } else { "test" }
        );
    }
    match &rep.negatives {
        Some(n) => {
            println!("{} fixed negatives per held-out pair stored", n.num_neg);
            for w in n
                .notes
                .warnings(val, test, n.num_neg)
                .into_iter()
                .filter(|w| !w.contains("rounds to 0"))
            {
                eprintln!("warning: {w}");
            }
        }
        None => {
            println!("no negatives stored: each run draws them from its seed when it starts")
        }
    }
    print_stages(&rep.stages, t.elapsed().as_secs_f64());
    print_peak(o.memory_budget);
    Ok(())
}

/// `tma convert` without `--link-split`.
fn convert_graph(o: ConvertOpts) -> Result<()> {
    let ropts = ReadOptions {
        format: o.format,
        undirected: o.undirected,
    };
    let format = match o.format {
        Some(f) => f,
        None => formats::detect(&o.dataset)
            .with_context(|| format!("tma convert --dataset {}", o.dataset.display()))?,
    };
    if o.to == ConvertTo::Npy || format != Format::Tma || o.undirected {
        return convert_in_memory(&o, &ropts, format);
    }
    let budget = build_budget(o.memory_budget)?;
    no_huge_pages();
    let t = Instant::now();
    let rep = convert_npy_dir(
        &o.dataset,
        &o.out,
        &ConvertOptions {
            memory_budget: budget,
            split_index: o.split_index,
        },
        &Bars(Mutex::new(None)),
    )
    .with_context(|| format!("tma convert --dataset {}", o.dataset.display()))?;
    let b = &rep.build;
    println!(
        "converted {} -> {}: {} nodes, {} arcs",
        o.dataset.display(),
        o.out.display(),
        rep.num_nodes,
        rep.num_arcs
    );
    println!(
        "dropped {} self-loops and merged {} duplicate arcs of {} in edge_index.npy (as the .npy loader does)",
        b.self_loops_dropped, b.duplicates_merged, b.arcs_in
    );
    eprintln!(
        "CSR build: {} buckets, {} sorted runs, largest run {:.1} MiB{}",
        b.buckets,
        b.runs,
        mib(b.max_run_bytes),
        if b.over_budget_runs > 0 {
            format!(
                " ({} runs exceeded half the budget: a group of nodes holds more arcs than fit)",
                b.over_budget_runs
            )
        } else {
            String::new()
        }
    );
    print_stages(&rep.stages, t.elapsed().as_secs_f64());
    print_peak(o.memory_budget);
    Ok(())
}

/// `tma convert` of any format, or to the `.npy` layout: the dataset is read into memory.
fn convert_in_memory(o: &ConvertOpts, ropts: &ReadOptions, format: Format) -> Result<()> {
    let t = Instant::now();
    let lopts = LoadOptions {
        split_index: o.split_index,
        ..LoadOptions::default()
    };
    let ctx = || format!("tma convert --dataset {}", o.dataset.display());
    let l = match o.to {
        ConvertTo::Npy => {
            formats::convert_to_npy(&o.dataset, ropts, &lopts, &o.out).with_context(ctx)?
        }
        ConvertTo::Disk => {
            if o.out.exists() && std::fs::read_dir(&o.out).map_or(true, |mut d| d.next().is_some())
            {
                bail!(
                    "--out {}: the directory exists and is not empty (choose a new one)",
                    o.out.display()
                );
            }
            let l = formats::read(&o.dataset, ropts, &lopts).with_context(ctx)?;
            let mut prov = disk::Provenance::new(
                std::fs::canonicalize(&o.dataset)
                    .unwrap_or_else(|_| o.dataset.clone())
                    .display()
                    .to_string(),
            );
            prov.tool = format!("tma convert --format {format}");
            prov.notes = l.notes.clone();
            let r = &l.dataset.removed;
            if r.self_loops + r.duplicate_arcs > 0 {
                prov.notes.push(format!(
                    "dropped {} self-loops and merged {} duplicate arcs of the source",
                    r.self_loops, r.duplicate_arcs
                ));
            }
            disk::write_dataset(&l.dataset, &o.out, &prov)
                .with_context(|| format!("tma convert --out {}", o.out.display()))?;
            if let Some(ids) = &l.node_ids {
                tma_graph::npy::write(&o.out.join("node_ids.npy"), ids, &[ids.len()])?;
            }
            l
        }
    };
    for n in &l.notes {
        eprintln!("warning: {n}");
    }
    let ds = &l.dataset;
    println!(
        "converted {} ({format}) -> {} ({}): {} nodes, {} arcs{}",
        o.dataset.display(),
        o.out.display(),
        match o.to {
            ConvertTo::Npy => ".npy layout",
            ConvertTo::Disk => "on-disk format",
        },
        ds.num_nodes(),
        ds.num_edges(),
        if l.node_ids.is_some() {
            "; node_ids.npy maps node i to its id in the source"
        } else {
            ""
        }
    );
    println!("{}", ds.summary());
    println!(
        "dropped {} self-loops and merged {} duplicate arcs",
        ds.removed.self_loops, ds.removed.duplicate_arcs
    );
    eprintln!("  {:<40} {:>9.2} s", "total", t.elapsed().as_secs_f64());
    Ok(())
}

/// `--feat-dtype`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeatDtype {
    /// 32-bit floats
    F32,
    /// 16-bit floats (IEEE binary16): half the disk and page cache
    F16,
}

/// `--preset`: graphs shaped like the paper's link-prediction workloads (Zhu et al. 2023).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// Reddit-like: 232,965 nodes, ~114.6M arcs as stored (Reddit's; dense: mean degree ~492),
    /// 64-d features, link split 0.0005,0.0005 (~28K held-out pairs each). It draws 718 arcs
    /// per node: on so few nodes ~31% of R-MAT's arcs repeat one drawn before, and are merged.
    Reddit,
    /// ogbl-citation2-like: 2,927,963 nodes, ~30.6M arcs (average degree 10.45; stored
    /// undirected: the generator makes undirected graphs), 128-d features, link split
    /// 0.003,0.003 (about OGB's 86,956 held-out pairs each)
    Citation2,
    /// MAG240M-like: 65,000,000 nodes, average degree 20 (~1.3 billion arcs), 16-d features to
    /// fit the disk (~13 GB), a node split of 1% / 0.1% / 0.2% (few labelled papers), link
    /// split 0.000001,0.000001 (~650 held-out pairs each, 1000 negatives per pair: the test
    /// split's ~650,000 endpoints then need the outputs of ~1/5 of the graph, which fit the
    /// page cache; OGB-sized splits read every node, and the full pass's scratch files at this
    /// size do not: docs/decisions/0018-link-prediction-at-scale.md)
    Mag,
}

/// The flags a preset sets (`nodes`, `avg_degree`, `feat_dim`, `link_split`, `split`).
fn preset_values(p: Preset) -> (u64, f64, usize, &'static str, &'static str) {
    match p {
        Preset::Reddit => (232_965, 718.0, 64, "0.0005,0.0005", "0.6,0.2,0.2"),
        Preset::Citation2 => (2_927_963, 10.45, 128, "0.003,0.003", "0.6,0.2,0.2"),
        Preset::Mag => (
            65_000_000,
            20.0,
            16,
            "0.000001,0.000001",
            "0.01,0.001,0.002",
        ),
    }
}

/// Options of `tma generate`.
#[derive(Args, Debug)]
pub struct GenerateOpts {
    /// A graph shaped like one of the paper's link-prediction workloads: sets --nodes,
    /// --avg-degree, --feat-dim, --link-split and --split (each flag given as well overrides
    /// it). Measured figures: bench/scale-results.md.
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// Nodes (2 ..= 2^32 - 1); required without --preset.
    #[arg(long, value_name = "N")]
    pub nodes: Option<u64>,
    /// Target arcs per node before self-loop removal and duplicate merging (both directions of
    /// an edge count; finite, >= 0). Default: 20.
    #[arg(long, value_name = "D", allow_hyphen_values = true)]
    pub avg_degree: Option<f64>,
    /// Feature width (0: no features; structural ones are generated at load). Default: 32.
    #[arg(long, value_name = "D")]
    pub feat_dim: Option<usize>,
    /// Feature element type on disk.
    #[arg(long, value_enum, default_value = "f32")]
    pub feat_dtype: FeatDtype,
    /// Standard deviation of the feature noise around the class mean (finite, >= 0).
    #[arg(
        long,
        value_name = "S",
        default_value_t = 2.0,
        allow_hyphen_values = true
    )]
    pub feature_noise: f32,
    /// Classes (>= 1).
    #[arg(long, value_name = "C", default_value_t = 16)]
    pub classes: u32,
    /// Fraction of edges moved into the source's class (in [0, 1]).
    #[arg(
        long,
        value_name = "P",
        default_value_t = 0.7,
        allow_hyphen_values = true
    )]
    pub homophily: f64,
    /// R-MAT quadrant probabilities a,b,c (d = 1 - a - b - c).
    #[arg(
        long,
        value_name = "A,B,C",
        default_value = "0.57,0.19,0.19",
        allow_hyphen_values = true
    )]
    pub rmat: String,
    /// Fractions of undirected pairs held out for link validation and test (VAL,TEST); held-out
    /// pairs are not in the stored graph (it is the training graph), and `tma train --task
    /// link` uses them as its split. Default: 0,0 (none).
    #[arg(long, value_name = "VAL,TEST", allow_hyphen_values = true)]
    pub link_split: Option<String>,
    /// Fixed evaluation negatives per held-out pair, stored with the link split (OGB's
    /// ogbl-citation2 protocol: 1000 per positive, never a true edge or a self-loop); a run
    /// ranks each held-out pair against them (MRR). 0 = none stored: each run draws them from
    /// its seed when it starts.
    #[arg(long, value_name = "K", default_value_t = 1000)]
    pub link_num_neg: usize,
    /// Fractions of nodes in the training, validation and test splits (TRAIN,VAL,TEST; the
    /// remaining nodes are in no split). Large graphs of the field label few nodes
    /// (ogbn-papers100M: about 1.1% train, 0.1% validation, 0.2% test); the whole test split
    /// is evaluated at the end of a run. Default: 0.6,0.2,0.2.
    #[arg(long, value_name = "TRAIN,VAL,TEST", allow_hyphen_values = true)]
    pub split: Option<String>,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Memory for the whole process (e.g. 512MiB, 2GiB; at least 32MiB): 16 MiB for its fixed
    /// footprint, the rest for the generator's buffers and the CSR build.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_bytes, allow_hyphen_values = true)]
    pub memory_budget: u64,
    /// Output directory (must not exist or be empty).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

fn floats(flag: &str, s: &str, k: usize) -> Result<Vec<f64>> {
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>())
        .collect::<std::result::Result<_, _>>()
        .with_context(|| format!("{flag} {s:?}: expected {k} comma-separated numbers"))?;
    if v.len() != k {
        bail!("{flag} {s:?}: expected {k} comma-separated numbers");
    }
    Ok(v)
}

/// Refuses a bad value of a `tma generate` flag with an error naming the flag (the library's
/// own check, [`generate_rmat`], can only name the output directory).
fn check_generate_flags(o: &GenerateOpts, nodes: u64, avg_degree: f64, abc: &[f64]) -> Result<()> {
    if !(2..=u32::MAX as u64).contains(&nodes) {
        bail!("--nodes {nodes} must be in 2..=4294967295");
    }
    if !(avg_degree.is_finite() && avg_degree >= 0.0) {
        bail!("--avg-degree {avg_degree}: must be a finite number >= 0");
    }
    if o.classes == 0 {
        bail!("--classes 0: at least 1 class");
    }
    if !(0.0..=1.0).contains(&o.homophily) {
        bail!("--homophily {}: must lie in [0, 1]", o.homophily);
    }
    if !(o.feature_noise.is_finite() && o.feature_noise >= 0.0) {
        bail!(
            "--feature-noise {}: must be a finite number >= 0",
            o.feature_noise
        );
    }
    if !abc.iter().all(|p| (0.0..=1.0).contains(p)) || abc.iter().sum::<f64>() > 1.0 {
        bail!(
            "--rmat {}: A, B and C must lie in [0, 1] with A + B + C <= 1",
            o.rmat
        );
    }
    Ok(())
}

/// `tma generate`.
///
/// A generation that fails midway (a full disk) leaves `--out` as it found it.
pub fn generate(o: GenerateOpts) -> Result<()> {
    tma_train::memory::start_sampler();
    let out = o.out.clone();
    undo_on_error(&out, || generate_to(o))
}

fn generate_to(o: GenerateOpts) -> Result<()> {
    let budget = build_budget(o.memory_budget)?;
    no_huge_pages();
    let abc = floats("--rmat", &o.rmat, 3)?;
    let preset = o.preset.map(preset_values);
    let Some(nodes) = o.nodes.or(preset.map(|p| p.0)) else {
        bail!("--nodes N is required (or --preset reddit|citation2|mag)");
    };
    let avg_degree = o.avg_degree.or(preset.map(|p| p.1)).unwrap_or(20.0);
    let feat_dim = o.feat_dim.or(preset.map(|p| p.2)).unwrap_or(32);
    let link_split = o
        .link_split
        .clone()
        .or(preset.map(|p| p.3.to_string()))
        .unwrap_or_else(|| "0,0".into());
    let split = o
        .split
        .clone()
        .or(preset.map(|p| p.4.to_string()))
        .unwrap_or_else(|| "0.6,0.2,0.2".into());
    let ls = floats("--link-split", &link_split, 2)?;
    // (0,0, the default, holds nothing out; convert's rule otherwise)
    if !ls.iter().all(|f| (0.0..1.0).contains(f)) || ls[0] + ls[1] >= 1.0 {
        bail!("--link-split {link_split}: each fraction must be in [0, 1) and their sum below 1");
    }
    let sp = floats("--split", &split, 3)?;
    if !sp.iter().all(|f| (0.0..=1.0).contains(f)) || sp.iter().sum::<f64>() > 1.0 + 1e-9 {
        bail!(
            "--split {split:?}: TRAIN, VAL and TEST must lie in [0, 1] with TRAIN + VAL + TEST <= 1"
        );
    }
    check_generate_flags(&o, nodes, avg_degree, &abc)?;
    if let Some(p) = o.preset {
        eprintln!(
            "preset {}: --nodes {nodes} --avg-degree {avg_degree} --feat-dim {feat_dim} --link-split {link_split} --split {split}",
            format!("{p:?}").to_lowercase()
        );
    }
    let cfg = RmatConfig {
        num_nodes: nodes,
        avg_degree,
        abc: (abc[0], abc[1], abc[2]),
        num_classes: o.classes,
        homophily: o.homophily,
        feature_dim: feat_dim,
        feature_noise: o.feature_noise,
        feature_dtype: match o.feat_dtype {
            FeatDtype::F32 => Dtype::F32,
            FeatDtype::F16 => Dtype::F16,
        },
        link_val: ls[0],
        link_test: ls[1],
        link_num_neg: o.link_num_neg,
        train_frac: sp[0],
        val_frac: sp[1],
        test_frac: sp[2],
        seed: o.seed,
        memory_budget: budget,
    };
    let t = Instant::now();
    let rep = generate_rmat(&cfg, &o.out, &Bars(Mutex::new(None))).context("tma generate")?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "generated {}: {} nodes, {} arcs from {} edge draws ({} self-loops dropped, {} duplicate arcs merged{})",
        o.out.display(),
        rep.num_nodes,
        rep.num_arcs,
        rep.draws,
        rep.self_loops,
        rep.build.duplicates_merged,
        if cfg.link_val + cfg.link_test > 0.0 {
            format!(
                "; held out {} validation and {} test pairs{}",
                rep.held_out.0,
                rep.held_out.1,
                match &rep.link_negatives {
                    Some(n) => format!(", {} fixed negatives each", n.num_neg),
                    None => String::new(),
                }
            )
        } else {
            String::new()
        }
    );
    print_stages(&rep.stages, secs);
    if let Some(n) = &rep.link_negatives {
        let w = n
            .notes
            .warnings(cfg.link_val, cfg.link_test, n.num_neg)
            .into_iter()
            .filter(|w| !w.contains("rounds to 0"));
        for w in w {
            eprintln!("warning: {w}");
        }
    }
    eprintln!(
        "{:.2} M arcs/s written; {} buckets, {} sorted runs",
        rep.num_arcs as f64 / secs / 1e6,
        rep.build.buckets,
        rep.build.runs
    );
    print_peak(o.memory_budget);
    Ok(())
}

/// `tma info --dataset DIR` for a directory in the on-disk format: the manifest's summary and
/// the split sizes; the graph is mapped, not read (`--validate` scans every file, `--verify`
/// also checks the checksums).
pub fn info_mapped(dir: &std::path::Path, validate: bool, verify: bool) -> Result<()> {
    let g = MappedGraph::open(dir)?;
    println!("{}", g.summary());
    if let Some((a, b, c)) = g.split() {
        println!(
            "split: train {} / val {} / test {}",
            a.len(),
            b.len(),
            c.len()
        );
    }
    let m = g.manifest();
    println!(
        "written by {} from {}{}",
        m.provenance.tool,
        m.provenance.source,
        m.provenance
            .seed
            .map(|s| format!(" (seed {s})"))
            .unwrap_or_default()
    );
    for n in &m.provenance.notes {
        println!("note: {n}");
    }
    if validate || verify {
        g.validate()?;
        println!("contents valid");
    }
    if verify {
        g.verify_checksums()?;
        println!("checksums match the manifest");
    }
    Ok(())
}
