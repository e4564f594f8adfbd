//! Integration tests of the `tma` binary (one test binary, ripgrep style): every module runs
//! the built binary through the shared [`harness`].
//!
//! * `commands`: train / info / partition / bench as a user runs them (outputs, exit codes,
//!   messages);
//! * `compare`: `tma compare` end to end;
//! * `durability`: SIGKILL at random instants and a full disk (issue 29 item 9);
//! * `eval`: `tma eval` / `tma embed` on saved models of real runs;
//! * `metrics`: `--metric` (model selection) and `--split-index all`;
//! * `resume`: partition directories, a run killed with SIGKILL and resumed;
//! * `formats`: `--dataset` in OGB / SNAP / npz / CSV, `--format`, `tma convert --to npy`;
//! * `scale`: `tma convert` / `tma generate` and the on-disk graph format;
//! * `mpi` (only with `--features mpi`): real `mpirun` jobs;
//!   `cargo test -p tma-cli --features mpi --test cli mpi::`.

mod harness;

mod commands;
mod compare;
mod durability;
mod edge_cases;
mod eval;
mod formats;
mod metrics;
#[cfg(feature = "mpi")]
mod mpi;
mod resume;
mod scale;
