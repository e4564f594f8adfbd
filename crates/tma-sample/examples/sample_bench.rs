//! Throughput of [`NeighborSampler::sample`] on a generated graph.
//!
//! `cargo run --release -p tma-sample --example sample_bench -- [num_nodes] [avg_degree] [batch]`
//! (run with `RAYON_NUM_THREADS=1` for the per-core figure).

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tma_graph::Csr;
use tma_sample::{shuffled_batches, NeighborSampler};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let n = *args.first().unwrap_or(&500_000);
    let avg = *args.get(1).unwrap_or(&20);
    let batch = *args.get(2).unwrap_or(&1024);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let m = n * avg;
    let src: Vec<u32> = (0..m).map(|_| rng.random_range(0..n as u32)).collect();
    // skewed destinations so degrees vary
    let dst: Vec<u32> = (0..m)
        .map(|_| {
            let x: f64 = rng.random();
            ((x * x) * n as f64) as u32 % n as u32
        })
        .collect();
    let g = Csr::from_edges(n, &src, &dst);
    drop((src, dst));
    let deg = g.degrees();
    println!("graph: {} nodes, {} arcs", g.num_nodes(), g.num_edges());
    for fanouts in [vec![10, 25], vec![usize::MAX, usize::MAX], vec![5, 5, 5]] {
        let s = NeighborSampler::new(fanouts.clone());
        let batches = shuffled_batches(n, batch, &mut rng);
        let t = Instant::now();
        let mut edges = 0usize;
        let mut nb = 0;
        for b in batches.iter().take(200) {
            edges += s.sample(&g, &deg, b, &mut rng).num_edges();
            nb += 1;
            if t.elapsed().as_secs_f64() > 5.0 {
                break;
            }
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "fanouts {:?}: {} batches of {}, {:.2} M sampled edges/s, {:.2} ms/batch",
            fanouts,
            nb,
            batch,
            edges as f64 / secs / 1e6,
            secs * 1e3 / nb as f64
        );
    }
}
