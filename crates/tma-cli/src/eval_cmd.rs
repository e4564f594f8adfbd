//! `tma eval` and `tma embed`: a saved model used after its run (the library side is
//! `tma_train::saved`).

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use tma_graph::formats::Format;
use tma_train::saved::{self, EmbedOutput, SavedModel, Which};
use tma_train::{DataSource, TrainConfig};

/// What `tma eval` and `tma embed` share: the model and the data.
#[derive(Args, Debug, Clone)]
pub struct SavedOpts {
    /// A run directory (its model_best.safetensors, or model_final with --model final) or a
    /// model file (.safetensors) with the run's config.toml next to it: the configuration gives
    /// the model's layers and, with the dataset, the run's split (derived again from its seed).
    #[arg(value_name = "RUN_DIR|MODEL_FILE")]
    pub path: PathBuf,
    /// Which model of a run directory: best (the best validation metric) or final (the last round's).
    #[arg(long = "model", value_name = "best|final", default_value = "best")]
    pub which: Which,
    /// Dataset to use instead of the one the run's config.toml records (same formats as `tma train --dataset`); needed for a run trained on arrays from Python.
    #[arg(long, value_name = "PATH")]
    pub dataset: Option<PathBuf>,
    /// Format of --dataset: tma, ogb, snap, npz or csv. Default: the run's (for its own dataset), else detected from the path.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Read an edge-list dataset as undirected (every arc gets its reverse). Default: as the run read it.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub undirected: Option<bool>,
    /// Which of a dataset's fixed mask splits to use (node task). Default: the run's.
    #[arg(long, value_name = "K")]
    pub split_index: Option<usize>,
    /// Worker threads (0 = all cores). Default: 0. The metrics do not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
}

/// Options of `tma eval`.
#[derive(Args, Debug)]
pub struct EvalOpts {
    #[command(flatten)]
    pub saved: SavedOpts,
    /// Memory evaluation's inference may take (e.g. 256MiB, 2GiB; at least 16MiB); another value than the run's may pick another inference path, whose dense products can round differently in the last bits. Default: the run's --eval-memory.
    #[arg(long, value_name = "SIZE", value_parser = crate::scale_cmd::parse_bytes, allow_hyphen_values = true)]
    pub eval_memory: Option<u64>,
    /// Print one JSON object (model, dataset, val, test, summary_matches) instead of text.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub json: bool,
}

/// Options of `tma embed`.
#[derive(Args, Debug)]
pub struct EmbedOpts {
    #[command(flatten)]
    pub saved: SavedOpts,
    /// The .npy file to write: float32 [N, width], row v for node v (refused if it exists).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// What to write: embeddings (the encoder's output before the head: a link model's node embeddings, a node classifier's hidden layer entering its last layer) or logits (a node classifier's last layer). Default: embeddings.
    #[arg(long, value_name = "embeddings|logits", default_value = "embeddings")]
    pub output: EmbedOutput,
    /// Memory the computation may take (one chunk of nodes' block and activations; layers below the last go through mapped scratch files, the rows are streamed to --out), e.g. 256MiB. Default: 1GiB.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = crate::scale_cmd::parse_bytes, allow_hyphen_values = true)]
    pub memory_budget: u64,
    /// Directory of the scratch files (unnamed, freed on exit). Default: the system's temporary directory.
    #[arg(long, value_name = "DIR")]
    pub scratch_dir: Option<PathBuf>,
}

/// The opened model, its configuration with the flags applied, and the data to read.
struct Opened {
    model: SavedModel,
    cfg: TrainConfig,
    data: DataSource,
    /// The dataset as shown: its path (or partition directory), or "generated graph".
    shown: String,
    /// Whether the data is the run's own (no --dataset, --format, --undirected, --split-index).
    own_data: bool,
}

fn open(o: &SavedOpts) -> Result<Opened> {
    let model = SavedModel::open(&o.path, o.which)?;
    let mut cfg = model.config.train.clone();
    let own_data = o.dataset.is_none()
        && o.format.is_none()
        && o.undirected.is_none()
        && o.split_index.is_none_or(|k| k == cfg.split_index);
    if let Some(k) = o.split_index {
        cfg.split_index = k;
    }
    if let Some(t) = o.threads {
        cfg.threads = t;
    }
    let recorded = model.config.data_source()?;
    let data = match (&o.dataset, recorded) {
        (Some(path), recorded) => {
            // flags win; what they leave out is read as the run read its dataset
            let (rf, ru) = match &recorded {
                Some(DataSource::DatasetAs { read, .. }) => (read.format, read.undirected),
                _ => (None, false),
            };
            DataSource::DatasetAs {
                path: path.clone(),
                read: tma_graph::formats::ReadOptions {
                    format: o.format.or(rf),
                    undirected: o.undirected.unwrap_or(ru),
                },
            }
        }
        (None, Some(DataSource::DatasetAs { path, read })) => DataSource::DatasetAs {
            path,
            read: tma_graph::formats::ReadOptions {
                format: o.format.or(read.format),
                undirected: o.undirected.unwrap_or(read.undirected),
            },
        },
        (None, Some(other)) => {
            if o.format.is_some() || o.undirected.is_some() {
                bail!("--format / --undirected apply to --dataset; the run recorded no dataset path ({}), give --dataset", model.config_path.display());
            }
            other
        }
        (None, None) => bail!(
            "{}: the run recorded no dataset (it trained on arrays given from Python); give the dataset with --dataset",
            model.config_path.display()
        ),
    };
    let shown = match &data {
        DataSource::Dataset(p) | DataSource::DatasetAs { path: p, .. } => p.display().to_string(),
        DataSource::Partitions(p) => format!("partition directory {}", p.display()),
        DataSource::Generated { num_nodes } => format!("generated graph ({num_nodes} nodes)"),
        DataSource::InMemory(ds) => ds.name.clone(),
    };
    Ok(Opened {
        model,
        cfg,
        data,
        shown,
        own_data,
    })
}

/// `summary.json` of the run directory `path` as text (None for a model file or a run
/// without one).
fn run_summary(path: &Path) -> Option<String> {
    if !path.is_dir() {
        return None;
    }
    std::fs::read_to_string(path.join("summary.json")).ok()
}

/// The JSON object under the first `"key":` of `text`, whitespace removed (its strings, metric
/// names, hold none). Values are compared as the text serde_json wrote (the shortest digits
/// that read back to the same f64): serde_json's own parser without its `float_roundtrip`
/// feature may read such a number 1 ulp off, and would report an equal value as different.
pub(crate) fn object_text(text: &str, key: &str) -> Option<String> {
    let at = text.find(&format!("\"{key}\":"))?;
    let rest = &text[at..];
    let open = rest.find('{')?;
    let mut depth = 0usize;
    for (i, c) in rest[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    let obj = &rest[open..open + i + 1];
                    return Some(obj.chars().filter(|c| !c.is_whitespace()).collect());
                }
            }
            _ => {}
        }
    }
    None
}

/// Largest relative difference at which `tma eval` calls a metric the same as the run's:
/// evaluation sums in parallel, and another thread count adds the terms in another order
/// (measured: 2e-17 on an MRR of 0.14, ~1e-16 relative).
const SAME_TO: f64 = 1e-9;

/// The largest `|a - b| / max(|a|, |b|)` over the numbers of two JSON values of the same
/// structure (0 where both are 0); `None` where the structure, a string or a null differs.
fn largest_relative_difference(a: &serde_json::Value, b: &serde_json::Value) -> Option<f64> {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => {
            let (x, y) = (x.as_f64()?, y.as_f64()?);
            let scale = x.abs().max(y.abs());
            Some(if x == y { 0.0 } else { (x - y).abs() / scale })
        }
        (V::Object(x), V::Object(y)) if x.len() == y.len() => {
            x.iter().try_fold(0.0f64, |m, (k, xv)| {
                Some(m.max(largest_relative_difference(xv, y.get(k)?)?))
            })
        }
        (V::Array(x), V::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).try_fold(0.0f64, |m, (xv, yv)| {
                Some(m.max(largest_relative_difference(xv, yv)?))
            })
        }
        _ => (a == b).then_some(0.0),
    }
}

/// `tma eval`.
pub fn eval(o: EvalOpts) -> Result<()> {
    let Opened {
        model: saved,
        mut cfg,
        data,
        shown,
        own_data,
    } = open(&o.saved)?;
    if let Some(m) = o.eval_memory {
        cfg.eval_memory = m;
        cfg.validate().map_err(|e| anyhow::anyhow!("--{e}"))?;
    }
    let (prep, name, warnings) = saved::prepare_eval(&mut cfg, data)?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let (model, params) = saved.model_for(&prep, &shown)?;
    let pool = saved::thread_pool(cfg.threads)?;
    let opts = cfg.infer_options();
    let result = pool.install(|| saved::evaluate_both(&model, &params, &prep, &opts));
    // what the run reported for this model, when evaluated as the run did
    let (kv, kt) = match o.saved.which {
        Which::Best => ("best_val", "best_test"),
        Which::Final => ("final_val", "final_test"),
    };
    // every metric of both splits, as the run wrote them
    let summary = run_summary(&o.saved.path);
    // exact text, else the largest relative difference of a metric (None: another structure)
    let compared = summary.as_deref().map(|s| {
        let ours = |r: &tma_train::EvalResult| {
            let t = serde_json::to_string(r).expect("a result serializes");
            t.chars().filter(|c| !c.is_whitespace()).collect::<String>()
        };
        let (v, t) = (ours(&result.val), ours(&result.test));
        let (sv, st) = (object_text(s, kv), object_text(s, kt));
        if sv.as_deref() == Some(v.as_str()) && st.as_deref() == Some(t.as_str()) {
            return Some(0.0);
        }
        let diff = |a: Option<String>, b: &str| -> Option<f64> {
            let a: serde_json::Value = serde_json::from_str(&a?).ok()?;
            let b: serde_json::Value = serde_json::from_str(b).ok()?;
            largest_relative_difference(&a, &b)
        };
        Some(diff(sv, &v)?.max(diff(st, &t)?))
    });
    // equal up to the order of a sum's terms (another thread count sums in another order)
    let matches = compared.map(|d| d.is_some_and(|d| d <= SAME_TO));
    let reported = summary
        .as_deref()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
        .map(|s| {
            let get = |k: &str| s[k]["value"].as_f64().unwrap_or(f64::NAN);
            (get(kv), get(kt))
        });
    if o.json {
        // a struct, not a `json!` map: the fields in the order summary.json has them
        #[derive(serde::Serialize)]
        struct Out<'a> {
            model: String,
            dataset: &'a str,
            val: &'a tma_train::EvalResult,
            test: &'a tma_train::EvalResult,
            summary_matches: Option<bool>,
        }
        let j = Out {
            model: saved.path.display().to_string(),
            dataset: &shown,
            val: &result.val,
            test: &result.test,
            summary_matches: matches,
        };
        println!("{}", serde_json::to_string_pretty(&j)?);
        return Ok(());
    }
    println!(
        "model {} ({} {}, {} layers, hidden {}) on {name} ({shown})",
        saved.path.display(),
        cfg.model,
        cfg.task,
        cfg.num_layers,
        cfg.hidden
    );
    for (split, r) in [("val ", &result.val), ("test", &result.test)] {
        println!(
            "{split} {} {}  ({})",
            r.metric,
            crate::train_cmd::value_text(r.value),
            crate::train_cmd::metrics_line(&r.all)
        );
    }
    match (reported, matches) {
        (Some(_), Some(true)) if compared == Some(Some(0.0)) => println!(
            "same values as the run's summary.json ({kv} / {kt}, every metric)"
        ),
        (Some(_), Some(true)) => println!(
            "same values as the run's summary.json ({kv} / {kt}, every metric) to {SAME_TO:e} relative (largest difference {:.1e}: the terms of a sum added in another order)",
            compared.flatten().unwrap_or(0.0)
        ),
        (Some((v, t)), Some(false)) => println!(
            "the run's summary.json says {kv} {v} / {kt} {t} (this evaluation: {} / {}, or another of their metrics differs){}",
            result.val.value,
            result.test.value,
            if own_data && o.eval_memory.is_none() {
                " (evaluated on the run's own data and options: please report this difference)"
            } else {
                " (evaluated on other data or options than the run's)"
            }
        ),
        _ => {}
    }
    Ok(())
}

/// `tma embed`.
pub fn embed(o: EmbedOpts) -> Result<()> {
    if o.out.exists() {
        bail!(
            "--out {}: the file exists; remove it or choose another --out",
            o.out.display()
        );
    }
    if let Some(parent) = o.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            bail!(
                "--out {}: its directory {} does not exist",
                o.out.display(),
                parent.display()
            );
        }
    }
    if o.memory_budget < 16 << 20 {
        bail!(
            "--memory-budget {} bytes: at least 16MiB (smaller budgets cut the nodes into so many chunks that it takes far longer)",
            o.memory_budget
        );
    }
    let Opened {
        model: saved,
        mut cfg,
        data,
        shown,
        ..
    } = open(&o.saved)?;
    let (prep, name, warnings) = saved::prepare_embed(&mut cfg, data)?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let (model, params) = saved.model_for(&prep, &shown)?;
    let layers = saved::embed_layers(&model, cfg.task, o.output)?;
    let pool = saved::thread_pool(cfg.threads)?;
    let mut opts = cfg.infer_options();
    opts.memory_budget = o.memory_budget;
    opts.scratch_dir = o.scratch_dir.clone();
    let t = std::time::Instant::now();
    let rep = pool
        .install(|| saved::embed_to_npy(&model, &params, &prep, layers, &o.out, &opts))
        .with_context(|| format!("writing --out {}", o.out.display()))?;
    let what = match (cfg.task, o.output) {
        (tma_train::Task::Link, _) => "node embeddings (the encoder's output the decoder scores)",
        (_, EmbedOutput::Embeddings) => "hidden representations entering the last layer",
        (_, EmbedOutput::Logits) => "logits of the last layer",
    };
    println!(
        "wrote {}: float32 [{}, {}] ({:.1} MiB, sha256 {}), {what} of {} on {name} ({shown}){}, in {:.1}s",
        o.out.display(),
        rep.rows,
        rep.dim,
        rep.bytes as f64 / (1u64 << 20) as f64,
        &rep.sha256[..16],
        saved.path.display(),
        if cfg.task == tma_train::Task::Link {
            "; computed on the training graph (held-out validation/test edges removed), as evaluation reads it"
        } else {
            ""
        },
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // regression: a best check evaluated again by `tma eval` differed from the run's summary
    // by 2e-17 (the evaluator's pool summed in another order) and was reported as a difference
    #[test]
    fn metrics_summed_in_another_order_are_the_same() {
        // one ulp above 0.1394 (2.8e-17)
        let next = f64::from_bits(0.1394f64.to_bits() + 1);
        let run = json!({"metric": "mrr", "value": next, "all": {"hits@3": 0.2}});
        let ours = json!({"metric": "mrr", "value": 0.1394, "all": {"hits@3": 0.2}});
        let d = largest_relative_difference(&run, &ours).unwrap();
        assert!(d > 0.0 && d < 1e-15, "{d}");
        assert!(d <= SAME_TO);
        // a real difference: 0.14 against 0.1394, 0.6 / 140 = 0.004286
        let other = json!({"metric": "mrr", "value": 0.14, "all": {"hits@3": 0.2}});
        let d = largest_relative_difference(&other, &ours).unwrap();
        assert!((d - 0.0006 / 0.14).abs() < 1e-12, "{d}");
        assert!(d > SAME_TO);
        // another metric, another key or a missing value is another structure
        let name = json!({"metric": "hits@50", "value": 0.1394, "all": {"hits@3": 0.2}});
        assert_eq!(largest_relative_difference(&name, &ours), None);
        let key = json!({"metric": "mrr", "value": 0.1394, "all": {"hits@1": 0.2}});
        assert_eq!(largest_relative_difference(&key, &ours), None);
        let null = json!({"metric": "mrr", "value": null, "all": {"hits@3": 0.2}});
        assert_eq!(largest_relative_difference(&null, &ours), None);
        assert_eq!(largest_relative_difference(&ours, &ours), Some(0.0));
    }
}
