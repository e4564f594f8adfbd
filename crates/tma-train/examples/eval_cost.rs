//! What one validation costs, by inference path: wall time, core time of the process and peak
//! memory of the evaluation alone (VmHWM reset before it), on a dataset directory or the
//! generated graph, for a freshly initialised model (the cost does not depend on the values).
//! The figures of docs/decisions/0012-restricted-evaluation.md come from it.
//!
//! ```text
//! cargo run --release -p tma-train --example eval_cost -- \
//!     (--dataset DIR | --gen-nodes N) --task node|link \
//!     [--mode auto|full|restricted|sampled:F1,F2] [--eval-memory BYTES] [--repeat R] \
//!     [--threads T] [--hidden H] [--params RUN/model_best.safetensors]
//! ```
//! Link: 1000 validation positives, 1000 fixed negatives each (issue 13's set-up).

use std::path::PathBuf;
use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tma_train::data::EvalData;
use tma_train::evaluation::eval::{evaluate_with, Split};
use tma_train::evaluation::infer::infer_nodes;
use tma_train::run::{load_dataset, DataSource};
use tma_train::{build_model, prepare, Method, Task, TrainConfig};

fn status_kib(key: &str) -> u64 {
    tma_graph::memory::status_bytes(key.trim_end_matches(':')).unwrap_or(0) / 1024
}

fn cpu_s() -> f64 {
    // utime + stime of the process, clock ticks (100 Hz)
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = s
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .map(|i| args[i + 1].clone())
    };
    let task = match get("--task").as_deref() {
        Some("link") => Task::Link,
        _ => Task::Node,
    };
    let mut cfg = TrainConfig {
        task,
        method: Method::Centralized,
        eval_max_edges: 1000,
        eval_num_neg: 1000,
        hidden: get("--hidden").map_or(256, |h| h.parse().unwrap()),
        seed: 0,
        ..TrainConfig::default()
    };
    if let Some(m) = get("--eval-memory") {
        cfg.eval_memory = m.parse().unwrap();
    }
    let mode = get("--mode").unwrap_or_else(|| "auto".into());
    if let Some(f) = mode.strip_prefix("sampled:") {
        cfg.eval_fanouts = f.split(',').map(|x| x.parse().unwrap()).collect();
    } else {
        cfg.eval_inference = mode.parse().unwrap();
    }
    let threads = get("--threads").map_or(0, |t| t.parse().unwrap());
    let repeat: usize = get("--repeat").map_or(3, |r| r.parse().unwrap());
    let source = match (get("--dataset"), get("--gen-nodes")) {
        (Some(d), _) => DataSource::Dataset(PathBuf::from(d)),
        (None, n) => DataSource::Generated {
            num_nodes: n.map_or(10_000, |n| n.parse().unwrap()),
        },
    };
    let t0 = Instant::now();
    let ds = load_dataset(&source, &cfg).unwrap().unwrap();
    let prep = prepare(ds, &cfg).unwrap();
    let model = build_model(&cfg, prep.model_shape()).unwrap();
    // a trained model (`--params RUN/model_best.safetensors`, same options) or a fresh one
    let p = match get("--params") {
        Some(f) => tma_nn::ParamSet::load_safetensors(std::path::Path::new(&f)).unwrap(),
        None => model.init_params(&mut ChaCha8Rng::seed_from_u64(1)),
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let opts = cfg.infer_options();
    let needed: Vec<u32> = match &prep.eval {
        EvalData::Node { split, .. } => split.val.clone(),
        EvalData::Link { split } => {
            let mut e: Vec<u32> = split.val_pos.iter().map(|p| p.0).collect();
            e.extend(split.val_pos.iter().map(|p| p.1));
            e.extend_from_slice(&split.val_neg);
            tma_sample::unique_with_inverse(&e).0
        }
    };
    eprintln!(
        "prepared in {:.1}s: {} nodes, {} arcs, {} nodes to evaluate, mode {mode}, {} threads",
        t0.elapsed().as_secs_f64(),
        prep.graph.num_nodes(),
        prep.graph.num_edges(),
        needed.len(),
        pool.current_num_threads()
    );
    let rss0 = status_kib("VmRSS:");
    let _ = std::fs::write("/proc/self/clear_refs", "5"); // reset VmHWM
    let (_, report) = pool.install(|| {
        infer_nodes(
            &model,
            &p,
            &prep.graph,
            &prep.degrees,
            &prep.features,
            &needed,
            &opts,
        )
    });
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    let mut value = 0.0;
    for _ in 0..repeat {
        let (c0, w0) = (cpu_s(), Instant::now());
        let r = pool.install(|| evaluate_with(&model, &p, &prep, Split::Val, &opts));
        walls.push(w0.elapsed().as_secs_f64());
        cpus.push(cpu_s() - c0);
        value = r.value;
    }
    let peak = status_kib("VmHWM:");
    walls.sort_by(f64::total_cmp);
    cpus.sort_by(f64::total_cmp);
    println!(
        "mode={mode} path={:?} chunks={} est_peak_MiB={:.0} cost/full={:.2} eval_s(median of {repeat})={:.3} cpu_s={:.3} metric={value:.6} rss_before_MiB={:.0} peak_during_eval_MiB={:.0}",
        report.path,
        report.chunks,
        report.peak_bytes as f64 / 1048576.0,
        report.cost / report.full_cost,
        walls[walls.len() / 2],
        cpus[cpus.len() / 2],
        rss0 as f64 / 1024.0,
        (peak.saturating_sub(rss0)) as f64 / 1024.0,
    );
}
