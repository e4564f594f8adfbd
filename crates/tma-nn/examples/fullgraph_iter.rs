//! Full-graph GraphSAGE training-iteration benchmark (the `fullgraph.iter` workload of `tma bench`):
//! N = 200k nodes, E = 4M edges (20 random in-neighbours each), 128-d dense input, hidden 256,
//! 40 classes, 2 layers; forward + softmax cross-entropy + backward + Adam per iteration.
//!
//! `cargo run --release -p tma-nn --example fullgraph_iter [-- N AVG_DEG ITERS THREADS [ENCODER]]`
//! (ENCODER: sage (default), gcn, mlp or gat; the env var `TMA_LAYER_NORM=0` turns LayerNorm off).
//! Prints per-iteration seconds (forward / backward / total), the median, and peak RSS.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;
use tma_graph::{Csr, Features};
use tma_nn::{softmax_cross_entropy, Adam, EncoderKind, Head, Model, ModelConfig};
use tma_sample::BlockView;

fn peak_rss_mib() -> Option<f64> {
    tma_graph::memory::peak_rss_bytes().map(tma_graph::memory::mib)
}

/// CPU seconds (user + system) used by this process so far, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    // fields 14 and 15 (utime, stime) are at 11, 12 after the ")"; 100 ticks per second
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .take(4)
        .map(|a| a.parse().unwrap())
        .collect();
    let n = *args.first().unwrap_or(&200_000);
    let avg_deg = *args.get(1).unwrap_or(&20);
    let iters = *args.get(2).unwrap_or(&5);
    let threads = *args.get(3).unwrap_or(&2);
    let encoder: EncoderKind = std::env::args()
        .nth(5)
        .map(|e| e.parse().expect("encoder: sage, gcn, mlp or gat"))
        .unwrap_or(EncoderKind::Sage);
    let layer_norm = std::env::var("TMA_LAYER_NORM").map_or(true, |v| v != "0");
    let (in_dim, hidden, classes) = (128, 256, 40);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    // CSR directly: every node gets `avg_deg` sorted random in-neighbours.
    let mut indptr = Vec::with_capacity(n + 1);
    let mut indices = Vec::with_capacity(n * avg_deg);
    indptr.push(0u64);
    for _ in 0..n {
        let start = indices.len();
        for _ in 0..avg_deg {
            indices.push(rng.random_range(0..n as u32));
        }
        indices[start..].sort_unstable();
        indptr.push(indices.len() as u64);
    }
    let graph = Csr {
        indptr: indptr.into(),
        indices: indices.into(),
    };
    let degrees = graph.degrees();
    let x = Features::Dense {
        num_nodes: n,
        dim: in_dim,
        data: (0..n * in_dim)
            .map(|_| rng.random_range(-1.0f32..1.0))
            .collect(),
    };
    let labels: Vec<u32> = (0..n)
        .map(|_| rng.random_range(0..classes as u32))
        .collect();
    let model = Model::new(ModelConfig {
        layer_norm,
        encoder,
        in_dim,
        hidden,
        num_layers: 2,
        dropout: 0.0,
        head: Head::Node {
            num_classes: classes,
        },
    });
    let mut params = model.init_params(&mut rng);
    let mut grads = model.zero_params();
    let mut adam = Adam::new(model.num_params(), 1e-3);
    let full = BlockView::full(&graph, &degrees);
    let blocks = [full, full];
    println!(
        "graph: {n} nodes, {} edges; {} params; {threads} threads",
        graph.num_edges(),
        model.num_params()
    );
    let mut totals = Vec::new();
    let mut cpus = Vec::new();
    pool.install(|| {
        for it in 0..iters {
            let c0 = cpu_seconds();
            let t0 = Instant::now();
            let (out, cache) = model.forward(&params, &blocks, &x, true, &mut rng);
            let (loss, d_out) = softmax_cross_entropy(&out, &labels);
            drop(out);
            let t1 = Instant::now();
            grads.fill_zero();
            model.backward(&params, cache, &d_out, &mut grads);
            adam.step(&mut params, &grads);
            let t2 = Instant::now();
            let total = (t2 - t0).as_secs_f64();
            let cpu = cpu_seconds() - c0;
            println!(
                "iter {it}: loss {loss:.4}  forward+loss {:.3} s  backward+adam {:.3} s  total {total:.3} s  (cpu {cpu:.2} s)",
                (t1 - t0).as_secs_f64(),
                (t2 - t1).as_secs_f64()
            );
            totals.push(total);
            cpus.push(cpu);
        }
    });
    totals.sort_by(|a, b| a.partial_cmp(b).unwrap());
    cpus.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "median {:.3} s/iter (median cpu {:.2} s/iter); peak RSS {:.0} MiB",
        totals[totals.len() / 2],
        cpus[cpus.len() / 2],
        peak_rss_mib().unwrap_or(f64::NAN)
    );
}
