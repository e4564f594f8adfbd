//! One sampled-block training step (forward + backward) of a 2-layer model on synthetic
//! blocks shaped like a 1024-seed node batch with fanouts [10, 25] (input layer: ~11k
//! destinations, ~155k sources, 25 arcs each), dense features read in place
//! (`Input::Indexed`). Prints the process CPU seconds per step (robust to other load).
//!
//! `cargo run --release -p tma-nn --example gat_block [-- ENCODER STEPS]` (default gat 10).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tma_nn::{EncoderKind, Head, Input, Mat, Model, ModelConfig};
use tma_sample::Block;

/// CPU seconds (user + system) of this process, from /proc/self/stat (100 ticks per second).
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let t = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (t(11) + t(12)) / 100.0
}

fn block(r: &mut ChaCha8Rng, nd: usize, ns: usize, fan: usize) -> Block {
    let mut indptr = vec![0u64];
    let mut indices = Vec::new();
    for _ in 0..nd {
        for _ in 0..fan {
            indices.push(r.random_range(0..ns as u32));
        }
        indptr.push(indices.len() as u64);
    }
    Block {
        num_dst: nd,
        num_src: ns,
        indptr,
        indices,
        src_degree: vec![fan as u32; ns],
    }
}

fn main() {
    let enc: EncoderKind = std::env::args()
        .nth(1)
        .map(|e| e.parse().unwrap())
        .unwrap_or(EncoderKind::Gat);
    let steps: usize = std::env::args().nth(2).map_or(10, |s| s.parse().unwrap());
    let mut r = ChaCha8Rng::seed_from_u64(1);
    let (n_all, dim) = (400_000usize, 128usize);
    let all: Vec<f32> = (0..n_all * dim)
        .map(|_| r.random_range(-1.0f32..1.0))
        .collect();
    let (nd1, nd0, ns0) = (1024usize, 11_000usize, 155_000usize);
    let blocks = [block(&mut r, nd0, ns0, 25), block(&mut r, nd1, nd0, 10)];
    let views: Vec<_> = blocks.iter().map(|b| b.view()).collect();
    let rows: Vec<u32> = (0..ns0).map(|_| r.random_range(0..n_all as u32)).collect();
    let m = Model::new(ModelConfig::new(enc, dim, Head::Node { num_classes: 40 }));
    let p = m.init_params(&mut r);
    let mut g = m.zero_params();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let mut times = Vec::new();
    pool.install(|| {
        for _ in 0..=steps {
            let t = cpu_seconds();
            let x = Input::Indexed {
                all: &all,
                dim,
                rows: &rows,
            };
            let (out, cache) = m.forward(&p, &views, x, true, &mut r);
            let d = Mat::from_vec(out.rows, out.cols, vec![1e-3; out.data.len()]);
            m.backward(&p, cache, &d, &mut g);
            m.recycle(out);
            times.push(cpu_seconds() - t);
        }
    });
    times.remove(0);
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{enc}: median {:.3} CPU s/step (min {:.3}) over {steps} steps",
        times[steps / 2],
        times[0]
    );
}
