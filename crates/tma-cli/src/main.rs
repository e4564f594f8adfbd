//! `tma`: train GNNs with time-based model averaging over randomized partitions.

mod bench;
mod compare;
mod dist;
#[cfg(feature = "mpi")]
mod mpi_run;
mod plot;
mod train_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// tma trains graph neural networks on graphs too large for one trainer: independent
/// trainers, each on a randomized partition of the graph, whose models are averaged every
/// fixed span of wall-clock time (RandomTMA / SuperTMA, Zhu et al. 2023, arXiv 2305.09887).
#[derive(Parser)]
#[command(name = "tma", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a model (in-process trainers). With no --dataset, trains on a built-in generated graph.
    Train(Box<train_cmd::TrainOpts>),
    /// Print a dataset's summary (nodes, edges, features, labels, splits).
    Info(train_cmd::InfoOpts),
    /// Partition a dataset and print per-part statistics.
    Partition(train_cmd::PartitionOpts),
    /// Run several methods on the same data, model and budget over several seeds; write a
    /// table, results.json and a plot of validation metric vs training time.
    Compare(Box<compare::CompareOpts>),
    /// Performance suite: every figure with its fraction of the machine's ceiling and, with
    /// --peers, its ratio to PyG / DGL (see bench/README.md).
    Bench(Box<bench::BenchOpts>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Train(o) => train_cmd::train(*o),
        Command::Info(o) => train_cmd::info(o),
        Command::Partition(o) => train_cmd::partition(o),
        Command::Compare(o) => compare::compare(*o),
        Command::Bench(o) => bench::bench(*o),
    };
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
            ExitCode::FAILURE
        }
    }
}
