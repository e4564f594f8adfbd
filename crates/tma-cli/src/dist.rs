//! Beyond one process: `tma partition --out DIR` (partition directories), `tma train
//! --partitions DIR`, `--resume RUN_DIR` and `--engine mpi` (one process per rank under
//! `mpirun`/`srun`; rank 0 coordinates, ranks 1..=M train on their own part only).

use crate::opts::TrainOpts;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use tma_train::store::{self, Manifest};
use tma_train::{Engine, TrainConfig};

/// Parses `--engine` (default in-process); `mpi` needs a build with the `mpi` feature.
pub fn parse_engine(s: Option<&str>) -> Result<Engine> {
    match s.unwrap_or("in-process") {
        "in-process" => Ok(Engine::InProcess),
        "mpi" => {
            if cfg!(feature = "mpi") {
                Ok(Engine::Mpi)
            } else {
                bail!("--engine mpi: this tma was built without MPI support; rebuild with `cargo build --release -p tma-cli --features mpi` (needs libopenmpi-dev, libclang-dev)")
            }
        }
        e => bail!("--engine '{e}': expected in-process or mpi"),
    }
}

/// `--resume RUN_DIR`: the run's own config.toml becomes the config file (flags still win)
/// and RUN_DIR the output directory.
pub fn apply_resume(mut o: TrainOpts) -> Result<TrainOpts> {
    if let Some(dir) = o.resume.clone() {
        let cfg = dir.join("config.toml");
        if !cfg.exists() {
            bail!(
                "--resume {}: no config.toml there (not a tma run directory)",
                dir.display()
            );
        }
        // a run made before the averaging ramp existed trained without one: its resume keeps
        // that schedule (a config.toml without `sync_ramp` means 0, not today's default)
        if o.sync_ramp.is_none() && o.config.is_none() {
            let text = std::fs::read_to_string(&cfg)
                .with_context(|| format!("cannot read {}", cfg.display()))?;
            let keys: toml::Table = toml::from_str(&text)
                .with_context(|| format!("config file {} is not valid", cfg.display()))?;
            if !keys.contains_key("sync_ramp") {
                o.sync_ramp = Some(0);
            }
        }
        if o.config.is_none() {
            o.config = Some(cfg);
        }
        if let Some(out) = &o.out {
            if out != &dir {
                bail!(
                    "--resume {} continues that run directory; drop --out {}",
                    dir.display(),
                    out.display()
                );
            }
        }
        o.out = Some(dir);
    }
    Ok(o)
}

/// `--partitions DIR`: reads its manifest and makes `cfg`'s data options (task, trainers,
/// seed, split fractions, ...) those the directory was made with, and its method one that
/// trains on the directory's layout (`tma_train::methods::apply_partitions`). A flag that
/// contradicts the directory is an error, and so is a `--method` of another layout.
pub fn open_partitions(
    o: &TrainOpts,
    cfg: &mut TrainConfig,
) -> Result<Option<(PathBuf, Manifest)>> {
    let Some(dir) = o.partitions.clone() else {
        return Ok(None);
    };
    let m = store::read_manifest(&dir)?;
    let d = &m.data;
    tma_train::options::check_partitions(
        &crate::opts::given(o),
        &dir,
        d,
        tma_train::options::Spelling::Flag,
    )
    .map_err(anyhow::Error::msg)?;
    if o.dataset.is_some() {
        bail!("--partitions and --dataset exclude each other (the partition directory holds the data)");
    }
    tma_train::methods::apply_partitions(&dir, d, cfg)?;
    Ok(Some((dir, m)))
}

/// `tma partition --out DIR`: split + partition exactly as `tma train` would, then write the
/// partition directory that `out` (created before the dataset was loaded) stages. On a graph in
/// the on-disk format (mapped), each part is built in turn and streamed into the directory as
/// it is built (the spill of `tma train`, files kept), within `budget` if given, with `on_part`
/// called once per part; the coordinator's graph and features are streamed from the mapping.
/// Otherwise the parts are built in memory and written (the in-RAM path). Same seed, same
/// bytes either way.
/// Made for the layout only (`tma_train::data::Purpose::Layout`): the metric is not checked,
/// and data training could not use (no labels, no part with a training example) is written
/// with a warning line, `tma train --partitions` refusing it.
/// Also returns what preparation changed or dropped in the data (warnings, one line each;
/// the load's own and the partition report's are among them).
pub fn write_partitions(
    ds: tma_graph::Dataset,
    cfg: &TrainConfig,
    out: store::PartitionWriter,
    budget: Option<u64>,
    on_part: impl Fn(&tma_train::data::spill::SpilledPart) + Send + Sync + 'static,
) -> Result<(Manifest, Vec<String>)> {
    let name = ds.name.clone();
    let directed = ds.directed;
    let dir = out.staging().to_path_buf();
    let (prep, spill) = if ds.graph.indices.is_mapped() {
        let mut spill = out.spill().on_part(on_part);
        if let Some(b) = budget {
            spill = spill.memory_budget(b);
        }
        let prep = tma_train::methods::prepare_layout(ds, cfg, Some(&spill))?;
        (prep, Some(spill))
    } else {
        (tma_train::methods::prepare_layout(ds, cfg, None)?, None)
    };
    let m = out
        .finish(&prep, cfg, &name, directed, spill.as_ref())
        .with_context(|| format!("writing partition directory (staged in {})", dir.display()))?;
    // the load's warning is printed by the caller before preparing
    let warnings = prep
        .warnings
        .iter()
        .filter(|w| !w.starts_with("edge_index.npy:"))
        .map(|w| without_train_flags(w))
        .collect();
    Ok((m, warnings))
}

/// The stored-split line of the preparation names `tma train`'s split flags, which `tma
/// partition` does not have: said without them there.
fn without_train_flags(w: &str) -> String {
    if !w.starts_with("link split: stored with the graph") {
        return w.to_string();
    }
    let w = w.replace(" (--val-frac and --test-frac do not apply)", "");
    match w.find("; its ").or_else(|| w.find("; --eval-num-neg ")) {
        Some(i) => w[..i].to_string(),
        None => w,
    }
}
