//! `tma`: train GNNs with time-based model averaging over randomized partitions.
#![warn(missing_docs)]

mod bench;
mod compare;
mod curves;
mod dist;
mod encoder_flags;
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

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
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
        mut_arg("partitions", |a| a.hide(true)),
        mut_arg("engine", |a| a.hide(true)),
        mut_arg("join_timeout", |a| a.hide(true)),
        // `tma train`'s help names train's default; compare's is its own (compare::compare)
        mut_arg("out", |a| a.help(
            "Directory of the comparison: table.md, results.json, val_vs_time.svg and one run \
             directory per method and seed (METHOD-seedK). Default: \
             runs/compare-<dataset>-<task>-<time>"
        )),
        mut_arg("resume", |a| a.value_name("OUT").help(
            "Continue the comparison in OUT (interrupted, or killed) with the options it was \
             started with (its compare.json; an option given that differs is refused, named): \
             finished runs are kept, an interrupted run continues from its last checkpoint, one \
             that stopped before its first checkpoint starts again, and the table and plot are \
             written from every run's directory. Default: a new comparison"
        )),
        mut_arg("tensorboard", |a| a.help(
            "Also write each run's round metrics as TensorBoard scalars, in an event file under DIR/<this comparison's folder>/<METHOD>-seed<K>/ (`tensorboard --logdir DIR`). Default: none"
        ))
    )]
    Compare(Box<compare::CompareOpts>),
    /// Performance suite: every figure with its fraction of the machine's ceiling and, with
    /// --peers, its ratio to PyG / DGL (see bench/README.md).
    Bench(Box<bench::BenchOpts>),
}

/// The command line of `tma`: the derived commands with the help of `train`'s and
/// `compare`'s options from the library's option table.
fn command() -> clap::Command {
    // the encoders' own options (GAT's --heads, ...) come from the registry, then every
    // flag's help from the option table
    Cli::command()
        .mut_subcommand("train", |c| {
            opts::with_table_help(encoder_flags::add(c), &[])
        })
        .mut_subcommand("compare", |c| {
            opts::with_table_help(encoder_flags::add(c), &["out", "tensorboard", "resume"])
        })
}

/// A rank other than 0 about to exit non-zero on an error rank 0 prints: mpirun ends the
/// whole job at the first rank that exits non-zero, so leaving at once could take rank 0 down
/// before its line is printed (seen on a 2-core CI machine). It waits for rank 0 to print and
/// exit (mpirun then ends this rank too), 5 s at most.
fn wait_for_rank_zero_to_print() {
    std::thread::sleep(std::time::Duration::from_secs(5));
}

/// Ends the process on an error of the command line's parser (or its --help / --version):
/// under a launcher (mpirun, srun) every rank parses the same command line, so rank 0 alone
/// prints it; a rank other than 0 exits with the same code, silently (after
/// [`wait_for_rank_zero_to_print`] for an error).
fn exit_on_parse_error(e: clap::Error) -> ! {
    if tma_train::engines::launcher_rank().is_some_and(|r| r > 0) {
        if e.use_stderr() {
            wait_for_rank_zero_to_print();
        }
        std::process::exit(e.exit_code());
    }
    e.exit()
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
    // the encoders' own options (GAT's --heads, ...) and --model's help come from the registry
    let matches = command()
        .try_get_matches()
        .unwrap_or_else(|e| exit_on_parse_error(e));
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| exit_on_parse_error(e));
    match (&mut cli.command, matches.subcommand()) {
        (Command::Train(o), Some((_, m))) => o.encoder = encoder_flags::read(m),
        (Command::Compare(o), Some((_, m))) => o.train.encoder = encoder_flags::read(m),
        _ => {}
    }
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
            // under mpirun every rank reads the same command line: an error in it is printed
            // by rank 0 alone (the other ranks exit with the same status, silently)
            if e.downcast_ref::<train_cmd::SaidByRankZero>().is_none() {
                eprintln!("error: {msg}");
            } else {
                wait_for_rank_zero_to_print();
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use tma_train::options::table::{self, Scope};

    fn train() -> clap::Command {
        let mut cmd = command();
        cmd.build();
        cmd.find_subcommand("train").expect("train").clone()
    }

    #[test]
    fn the_flags_of_train_are_the_rows_of_the_option_table() {
        let cmd = train();
        let mut flags: Vec<(String, String)> = cmd
            .get_arguments()
            .filter(|a| a.get_id() != "help")
            .map(|a| {
                (
                    a.get_id().to_string(),
                    format!("--{}", a.get_long().unwrap()),
                )
            })
            .collect();
        flags.sort();
        let mut rows: Vec<(String, String)> = table::rows()
            .iter()
            .map(|o| (o.key.to_string(), o.cli_flag()))
            .collect();
        rows.sort();
        assert_eq!(flags, rows);
        // every flag's help is its row's, default included, and hidden rows are hidden
        for a in cmd.get_arguments().filter(|a| a.get_id() != "help") {
            let o = table::rows().iter().find(|o| o.key == a.get_id()).unwrap();
            assert_eq!(
                a.get_help().unwrap().to_string(),
                table::help(o),
                "{}",
                o.key
            );
            assert_eq!(a.is_hide_set(), o.hidden, "{}", o.key);
        }
        // compare keeps its own --out
        let mut cmd = command();
        cmd.build();
        let out = cmd
            .find_subcommand("compare")
            .unwrap()
            .get_arguments()
            .find(|a| a.get_id() == "out")
            .unwrap()
            .get_help()
            .unwrap()
            .to_string();
        assert!(out.starts_with("Directory of the comparison"), "{out}");
    }

    #[test]
    fn config_file_keys_are_the_rows_of_the_option_table() {
        // the keys a config file may hold: every row but the CLI's own switches, which a file
        // cannot set (`config`, `resume`, `quiet`, the test hook)
        let v = serde_json::to_value(opts::TrainOpts::default()).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        let not_in_files = ["config", "resume", "quiet", "debug_slow_round"];
        // (the encoders' own options are no field: a file's `heads = 4` lands in the encoder map)
        let encoder = |k: &str| tma_train::config::encoder_options::declared(k).is_some();
        let mut rows: Vec<&str> = table::rows()
            .iter()
            .map(|o| o.key)
            .filter(|k| !not_in_files.contains(k) && !encoder(k))
            .collect();
        rows.sort_unstable();
        assert_eq!(keys, rows);
        let o: opts::TrainOpts = toml::from_str("heads = 4").unwrap();
        assert_eq!(o.encoder.get("heads"), Some(&serde_json::json!(4)));
        for o in &not_in_files {
            assert_eq!(table::find(o).unwrap().scope, Scope::Cli, "{o}");
        }
        // the aliases a file accepts are the table's
        for (alias, key) in tma_train::options::aliases() {
            let o: opts::TrainOpts = toml::from_str(&format!("{alias} = 3")).unwrap();
            assert_eq!(
                serde_json::to_value(&o).unwrap()[key],
                3,
                "{alias} -> {key}"
            );
        }
    }

    #[test]
    fn the_readme_option_table_is_the_library_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let readme = std::fs::read_to_string(path).unwrap();
        let (start, end) = (
            "<!-- options-table:start -->\n",
            "<!-- options-table:end -->",
        );
        let i = readme
            .find(start)
            .expect("README has the option table's start marker")
            + start.len();
        let j = readme
            .find(end)
            .expect("README has the option table's end marker");
        let want = table::markdown();
        if readme[i..j] != want {
            if std::env::var_os("TMA_BLESS").is_some() {
                let new = format!("{}{want}{}", &readme[..i], &readme[j..]);
                std::fs::write(path, new).unwrap();
            } else {
                panic!(
                    "README.md's option table is not the library's option table; rewrite it with \
                     `TMA_BLESS=1 cargo test -p tma-cli --bin tma the_readme_option_table`"
                );
            }
        }
    }
}
