//! `tma`: train GNNs with time-based model averaging over randomized partitions.
#![warn(missing_docs)]

mod bench;
mod compare;
mod dist;
mod eval_cmd;
#[cfg(test)]
mod fuzz_config;
mod interrupt;
mod opts;
mod plot;
mod scale_cmd;
mod splits;
mod train_cmd;

/// jemalloc as the allocator: freed activation buffers are reused without returning their pages
/// to the kernel (glibc unmaps every large block on free, and each first touch of a fresh page
/// faults), and `thp:always` backs large blocks with transparent huge pages (the kernel's THP
/// mode here is `madvise`), which cuts page faults 512-fold and TLB misses on the random row
/// gathers of aggregation. Measured: docs/decisions/0004-allocator.md.
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A C string pointer jemalloc reads before `main` (its compile-time `malloc_conf`).
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[repr(transparent)]
struct MallocConf(*const std::ffi::c_char);
// SAFETY: points at a static, immutable C string.
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
unsafe impl Sync for MallocConf {}

/// jemalloc options (prefixed symbol of tikv-jemalloc-sys); `_RJEM_MALLOC_CONF` in the
/// environment still overrides them.
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: MallocConf = MallocConf(c"thp:always,metadata_thp:auto".as_ptr());

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// tma trains graph neural networks on graphs too large for one trainer: independent
/// trainers, each on a randomized partition of the graph, whose models are averaged every
/// fixed span of wall-clock time (RandomTMA / SuperTMA, Zhu et al. 2023, arXiv 2305.09887).
#[derive(Parser)]
#[command(
    name = "tma",
    version,
    about = "Train graph neural networks with M independent trainers on a randomized graph partition whose models are averaged every fixed span of wall-clock time (RandomTMA/SuperTMA)",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a model (in-process trainers). With no --dataset, trains on a built-in generated graph.
    Train(Box<opts::TrainOpts>),
    /// Print a dataset's summary (nodes, edges, features, labels, splits).
    Info(train_cmd::InfoOpts),
    /// Evaluate a saved model (a run directory or a model file) on the validation and test
    /// splits of its run, derived again from the run's config.toml and dataset.
    Eval(eval_cmd::EvalOpts),
    /// Write a saved model's node embeddings (or logits) for every node to a .npy file,
    /// computed a chunk of nodes at a time within --memory-budget.
    Embed(eval_cmd::EmbedOpts),
    /// Partition a dataset and print per-part statistics.
    Partition(train_cmd::PartitionOpts),
    /// Convert a dataset (.npy directory, OGB directory, SNAP/CSV edge list, .npz) to the on-disk
    /// graph format (--to disk, memory-mapped; a .npy source's CSR is built within
    /// --memory-budget) or to tma's .npy layout (--to npy).
    Convert(scale_cmd::ConvertOpts),
    /// Generate a power-law (R-MAT) graph with classes, features and splits straight to the
    /// on-disk graph format, within --memory-budget.
    Generate(scale_cmd::GenerateOpts),
    /// Run several methods on the same data, model and budget over several seeds; write a
    /// table, results.json and a plot of validation metric vs training time.
    // `tma train` options that compare refuses (compare::unsupported_options) stay out of its
    // help; given anyway, they are refused with the reason
    #[command(
        mut_arg("method", |a| a.hide(true)),
        mut_arg("seed", |a| a.hide(true)),
        mut_arg("resume", |a| a.hide(true)),
        mut_arg("partitions", |a| a.hide(true)),
        mut_arg("engine", |a| a.hide(true)),
        mut_arg("join_timeout", |a| a.hide(true)),
        // `tma train`'s help names train's default; compare's is its own (compare::compare)
        mut_arg("out", |a| a.help(
            "Directory of the comparison: table.md, results.json, val_vs_time.svg and one run \
             directory per method and seed (METHOD-seedK). Default: \
             runs/compare-<dataset>-<task>-<time>"
        )),
        mut_arg("tensorboard", |a| a.help(
            "Also write each run's round metrics as TensorBoard scalars, in an event file              under DIR/<this comparison's folder>/<METHOD>-seed<K>/ (`tensorboard --logdir              DIR`). Default: none"
        ))
    )]
    Compare(Box<compare::CompareOpts>),
    /// Performance suite: every figure with its fraction of the machine's ceiling and, with
    /// --peers, its ratio to PyG / DGL (see bench/README.md).
    Bench(Box<bench::BenchOpts>),
}

fn main() -> ExitCode {
    // Writing to a closed pipe (`tma bench | head`) ends the process quietly, as other Unix
    // tools do, instead of a "failed printing to stdout" panic.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // diagnostics of the library (e.g. which inference path each evaluation took) on stderr
    // when TMA_LOG asks for them (`TMA_LOG=tma_train=debug`); silent otherwise
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("TMA_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init();
    }
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Train(o) => splits::train(*o),
        Command::Info(o) => train_cmd::info(o),
        Command::Eval(o) => eval_cmd::eval(o),
        Command::Embed(o) => eval_cmd::embed(o),
        Command::Partition(o) => train_cmd::partition(o),
        Command::Convert(o) => scale_cmd::convert(o),
        Command::Generate(o) => scale_cmd::generate(o),
        Command::Compare(o) => compare::compare(*o),
        Command::Bench(o) => bench::bench(*o),
    };
    // a Ctrl-C being acted on ends the process itself, with its own message and exit code
    interrupt::wait_if_interrupted();
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // the chain, without repeating a cause its parent's message already contains
            let mut msg = e.to_string();
            for cause in e.chain().skip(1) {
                let c = cause.to_string();
                if !msg.contains(&c) {
                    msg.push_str(": ");
                    msg.push_str(&c);
                }
            }
            eprintln!("error: {msg}");
            // a command that ended on a signal's request (e.g. interrupted while loading the
            // data) exits as the signal's code says (130 / 143), which job schedulers read
            if interrupt::received() {
                ExitCode::from(interrupt::exit_code() as u8)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
