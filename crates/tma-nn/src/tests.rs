//! Model-level and kernel-level tests: exact values on hand examples and finite-difference
//! checks of every backward.

use crate::input::*;
use crate::kernels::*;
use crate::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use tma_graph::{Csr, Features};
use tma_sample::{Block, BlockView};

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

fn randn(r: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| r.random_range(-1.0f32..1.0)).collect()
}

/// A random block: every destination gets 0..=max_nb distinct sources (some get none);
/// `src_degree >= sampled` for destinations.
fn rand_block(r: &mut ChaCha8Rng, num_dst: usize, num_src: usize, max_nb: usize) -> Block {
    let mut indptr = vec![0u64];
    let mut indices = Vec::new();
    let mut sampled = vec![0u32; num_dst];
    for (i, s) in sampled.iter_mut().enumerate() {
        let k = if i == 1 {
            0
        } else {
            r.random_range(1..=max_nb)
        };
        let mut nb: Vec<u32> = Vec::new();
        while nb.len() < k.min(num_src) {
            let j = r.random_range(0..num_src as u32);
            if !nb.contains(&j) {
                nb.push(j);
            }
        }
        *s = nb.len() as u32;
        indices.extend(nb);
        indptr.push(indices.len() as u64);
    }
    let src_degree = (0..num_src)
        .map(|j| {
            let base = if j < num_dst { sampled[j] } else { 0 };
            base + r.random_range(0..4)
        })
        .collect();
    Block {
        num_dst,
        num_src,
        indptr,
        indices,
        src_degree,
    }
}

/// Two chained random blocks: 9 -> 5 -> 3 nodes.
fn two_blocks(r: &mut ChaCha8Rng) -> Vec<Block> {
    vec![rand_block(r, 5, 9, 4), rand_block(r, 3, 5, 3)]
}

fn dense(rows: usize, dim: usize, data: Vec<f32>) -> Features {
    Features::Dense {
        num_nodes: rows,
        dim,
        data: data.into(),
    }
}

/// Dense -> sparse (zeros dropped).
fn to_sparse(rows: usize, dim: usize, data: &[f32]) -> Features {
    let mut indptr = vec![0u64];
    let (mut idx, mut val) = (Vec::new(), Vec::new());
    for i in 0..rows {
        for c in 0..dim {
            let v = data[i * dim + c];
            if v != 0.0 {
                idx.push(c as u32);
                val.push(v);
            }
        }
        indptr.push(idx.len() as u64);
    }
    Features::Sparse {
        num_nodes: rows,
        dim,
        indptr,
        indices: idx,
        data: val,
    }
}

/// Central-difference check of `grad` against `f` at `x` (f64 loss, f32 inputs).
fn fd_check(name: &str, f: &mut dyn FnMut(&[f32]) -> f64, x: &[f32], grad: &[f32]) {
    assert_eq!(x.len(), grad.len());
    let eps = 1e-3f32;
    let mut worst = (0.0f64, 0usize);
    for i in 0..x.len() {
        let mut xp = x.to_vec();
        xp[i] += eps;
        let mut xm = x.to_vec();
        xm[i] -= eps;
        let num = (f(&xp) - f(&xm)) / (2.0 * eps as f64);
        let ana = grad[i] as f64;
        let err = (num - ana).abs() / (3e-3 + 1e-2 * num.abs().max(ana.abs()));
        if err > worst.0 {
            worst = (err, i);
        }
        assert!(
            err <= 1.0,
            "{name}[{i}]: numeric {num:.6} vs analytic {ana:.6}"
        );
    }
    // the check must have looked at something non-trivial
    let gn: f64 = grad.iter().map(|&g| (g as f64).abs()).sum();
    assert!(
        gn > 1e-3,
        "{name}: gradient is (almost) zero, test is vacuous"
    );
}

/// The encoder's default options, with GAT's hidden layers at 2 heads, so the small hidden
/// widths of these tests are divisible.
fn test_options(enc: EncoderKind) -> EncoderOptions {
    let mut o = enc.default_options();
    if o.get("heads").is_some() {
        o.set("heads", OptionValue::Int(2)).unwrap();
    }
    o
}

/// A model with [`test_options`].
fn build(cfg: ModelConfig) -> Model {
    let o = test_options(cfg.encoder);
    Model::try_new_with(cfg, o).unwrap()
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&a, &b)| a as f64 * b as f64).sum()
}

// ------------------------------------------------------------------------------------------
// Exact values.

#[test]
fn sage_forward_hand_example() {
    // 3 nodes; in-neighbours: 0 <- {1, 2}, 1 <- {0}, 2 <- {} ; x = [[1,2],[3,4],[5,6]]
    // W_l = [[1, -1]], b_l = [0.1], W_r = [[0.5, 2]]
    // out_0 = W_l·mean(x1, x2) + b + W_r·x0 = (4 - 5) + 0.1 + (0.5 + 4) = 3.6
    // out_1 = W_l·x0 + b + W_r·x1 = (1 - 2) + 0.1 + (1.5 + 8) = 8.6
    // out_2 = 0 (empty neighbourhood) + 0.1 + (2.5 + 12) = 14.6
    let g = Csr::from_edges(3, &[1, 2, 0], &[0, 0, 1]);
    let deg = g.degrees();
    for in_dim_first in [false, true] {
        // also run the aggregate-first path: out_dim 2 >= in_dim 2 with a zero second output
        let classes = if in_dim_first { 2 } else { 1 };
        let m = build(ModelConfig {
            layer_norm: true,
            encoder: EncoderKind::Sage,
            in_dim: 2,
            hidden: 4,
            num_layers: 1,
            dropout: 0.0,
            head: Head::Node {
                num_classes: classes,
            },
        });
        let mut p = m.zero_params();
        let (wl, wr, b) = if classes == 1 {
            (vec![1.0, -1.0], vec![0.5, 2.0], vec![0.1])
        } else {
            (
                vec![1.0, -1.0, 0.0, 0.0],
                vec![0.5, 2.0, 0.0, 0.0],
                vec![0.1, 0.0],
            )
        };
        p.get_mut("encoder.0.lin_l.weight")
            .unwrap()
            .copy_from_slice(&wl);
        p.get_mut("encoder.0.lin_r.weight")
            .unwrap()
            .copy_from_slice(&wr);
        p.get_mut("encoder.0.lin_l.bias")
            .unwrap()
            .copy_from_slice(&b);
        let x = dense(3, 2, vec![1., 2., 3., 4., 5., 6.]);
        let out = m.infer_full(&p, &g, &deg, &x);
        let col0: Vec<f32> = (0..3).map(|i| out.row(i)[0]).collect();
        for (a, e) in col0.iter().zip([3.6f32, 8.6, 14.6]) {
            assert!((a - e).abs() < 1e-5, "{col0:?}");
        }
    }
}

/// Dense reference `D̂^{-1/2}(A+I)D̂^{-1/2} X Wᵀ + b`.
fn gcn_reference(g: &Csr, x: &[f32], din: usize, w: &[f32], b: &[f32]) -> Vec<f32> {
    let n = g.num_nodes();
    let dout = b.len();
    let mut a = vec![0.0f64; n * n];
    for i in 0..n {
        a[i * n + i] += 1.0;
        for &j in g.neighbors(i) {
            a[i * n + j as usize] += 1.0;
        }
    }
    let dhat: Vec<f64> = (0..n).map(|i| g.degree(i) as f64 + 1.0).collect();
    let mut out = vec![0.0f32; n * dout];
    for i in 0..n {
        for o in 0..dout {
            let mut s = b[o] as f64;
            for j in 0..n {
                let ahat = a[i * n + j] / (dhat[i] * dhat[j]).sqrt();
                if ahat == 0.0 {
                    continue;
                }
                let xw: f64 = (0..din)
                    .map(|c| x[j * din + c] as f64 * w[o * din + c] as f64)
                    .sum();
                s += ahat * xw;
            }
            out[i * dout + o] = s as f32;
        }
    }
    out
}

#[test]
fn gcn_full_neighbourhood_equals_normalized_adjacency() {
    let mut r = rng(3);
    // undirected 6-node graph incl. an isolated node 5
    let und = [(0u32, 1u32), (0, 2), (1, 2), (2, 3), (3, 4)];
    let (src, dst): (Vec<u32>, Vec<u32>) = und.iter().flat_map(|&(a, b)| [(a, b), (b, a)]).unzip();
    let g = Csr::from_edges(6, &src, &dst);
    let deg = g.degrees();
    for (din, dout) in [(3usize, 4usize), (4, 2)] {
        // both aggregation orders
        let m = build(ModelConfig {
            layer_norm: true,
            encoder: EncoderKind::Gcn,
            in_dim: din,
            hidden: 8,
            num_layers: 1,
            dropout: 0.0,
            head: Head::Node { num_classes: dout },
        });
        let mut p = m.init_params(&mut r);
        let b = randn(&mut r, dout);
        p.get_mut("encoder.0.bias").unwrap().copy_from_slice(&b);
        let x = randn(&mut r, 6 * din);
        let out = m.infer_full(&p, &g, &deg, &dense(6, din, x.clone()));
        let want = gcn_reference(&g, &x, din, p.get("encoder.0.lin.weight").unwrap(), &b);
        for (a, e) in out.data.iter().zip(&want) {
            assert!((a - e).abs() < 1e-5, "{a} vs {e}");
        }
    }
}

// ------------------------------------------------------------------------------------------
// Kernel gradient checks.

#[test]
fn aggregation_backward_matches_finite_differences() {
    let mut r = rng(5);
    let blk = rand_block(&mut r, 5, 9, 4);
    let b = blk.view();
    let dim = 3;
    let h = randn(&mut r, 9 * dim);
    let w = randn(&mut r, 5 * dim);
    for coefs in [AggCoefs::mean(&b), AggCoefs::gcn(&b)] {
        let t = Transposed::new(&b);
        let mut dh = vec![0.0; 9 * dim];
        aggregate_backward(&b, &t, &coefs, &w, dim, &mut dh, false);
        let mut f = |h: &[f32]| {
            let mut out = vec![0.0; 5 * dim];
            aggregate(&b, &coefs, h, None, dim, &mut out);
            dot(&out, &w)
        };
        fd_check("aggregate", &mut f, &h, &dh);
    }
}

#[test]
fn sparse_linear_and_weight_grad_match_dense() {
    // the small case also gets a finite-difference check; the large one (din * dout over
    // BufferPool::MIN_LEN) takes its Wᵀ / dWᵀ buffers from a pool seeded with NaN-filled
    // buffers, which must all be overwritten (regression guard for the pooled buffers)
    for (case, (rows, din, dout, n)) in [(7, 6, 4, 5), (40, 300, 256, 33)].into_iter().enumerate() {
        let mut r = rng(6);
        let pool = BufferPool::default();
        for _ in 0..2 {
            pool.give(vec![f32::NAN; din * dout + 17]);
        }
        let mut x = randn(&mut r, rows * din);
        for (i, v) in x.iter_mut().enumerate() {
            if i % 3 != 0 {
                *v = 0.0;
            }
        }
        let sp = to_sparse(rows, din, &x);
        let de = dense(rows, din, x.clone());
        let w = randn(&mut r, dout * din);
        let dy = randn(&mut r, n * dout);
        let (si, di) = (InputRef::from_features(&sp), InputRef::from_features(&de));
        let (mut ys, mut yd) = (vec![0.0; n * dout], vec![0.0; n * dout]);
        si.linear(&pool, n, &w, dout, &mut ys, false);
        di.linear(&pool, n, &w, dout, &mut yd, false);
        for (a, b) in ys.iter().zip(&yd) {
            assert!((a - b).abs() < 1e-4, "case {case}: {a} vs {b}");
        }
        // the first output of the sparse product, by its definition (row 0's nonzeros in order)
        let y00: f32 = (0..din)
            .filter(|j| j % 3 == 0)
            .fold(0.0, |s, j| s + x[j] * w[j]);
        assert_eq!(ys[0], y00, "case {case}");
        let (mut gs, mut gd) = (vec![0.0; dout * din], vec![0.0; dout * din]);
        si.linear_weight_grad(&pool, n, &dy, dout, &mut gs);
        di.linear_weight_grad(&pool, n, &dy, dout, &mut gd);
        for (a, b) in gs.iter().zip(&gd) {
            assert!((a - b).abs() < 1e-4, "case {case}: {a} vs {b}");
        }
        if case == 0 {
            // and the weight gradient is d/dW of <X[..n] Wᵀ, dy>
            let mut f = |w: &[f32]| {
                let mut y = vec![0.0; n * dout];
                si.linear(&pool, n, w, dout, &mut y, false);
                dot(&y, &dy)
            };
            fd_check("sparse linear dW", &mut f, &w, &gs);
        }
    }
}

/// The fused post kernels give bit-identical values to the unfused composition (bias add,
/// LayerNorm, affine + PReLU; and the backward chain + bias column sums), with and without
/// LayerNorm, on rows spanning several reduction chunks; and the fused backward matches
/// finite differences of the fused forward (bias, gamma, beta, slope, input).
#[test]
fn fused_post_kernels_equal_unfused_and_finite_differences() {
    let mut r = rng(17);
    let cols = 24;
    let rows = 4 * min_rows(cols) * 2 + 37; // more than two backward chunks
    let h0 = randn(&mut r, rows * cols);
    let bias = randn(&mut r, cols);
    let gamma: Vec<f32> = (0..cols).map(|_| r.random_range(0.5f32..1.5)).collect();
    let beta = randn(&mut r, cols);
    let dout = randn(&mut r, rows * cols);
    let slope = 0.3f32;
    for with_ln in [true, false] {
        let ln = with_ln.then_some((&gamma[..], &beta[..]));
        // fused
        let mut h = h0.clone();
        let mut a = vec![f32::NAN; rows * cols];
        let rstd = post_forward(&mut h, &bias, ln, slope, &mut a);
        let mut d = dout.clone();
        let (mut dg, mut db, mut dbias) = (vec![0.0; cols], vec![0.0; cols], vec![0.0; cols]);
        let ds = post_backward(&h, &rstd, ln, slope, &mut d, &mut dg, &mut db, &mut dbias);
        // unfused reference
        let mut y = h0.clone();
        add_bias(&mut y, &bias);
        let (ones, zeros) = (vec![1.0f32; cols], vec![0.0f32; cols]);
        let (g_ref, b_ref) = if with_ln {
            (&gamma[..], &beta[..])
        } else {
            (&ones[..], &zeros[..])
        };
        let rstd_ref = if with_ln {
            layer_norm_forward_inplace(&mut y, cols)
        } else {
            Vec::new()
        };
        let a_ref = affine_prelu_forward(&y, g_ref, b_ref, slope);
        assert_eq!(h, y, "xhat (ln {with_ln})");
        assert_eq!(rstd, rstd_ref);
        assert_eq!(a, a_ref, "activation (ln {with_ln})");
        let mut d_ref = dout.clone();
        let (mut dg_ref, mut db_ref) = (vec![0.0; cols], vec![0.0; cols]);
        let ds_ref = affine_prelu_backward(
            &y,
            g_ref,
            b_ref,
            slope,
            &mut d_ref,
            &mut dg_ref,
            &mut db_ref,
        );
        if with_ln {
            layer_norm_backward_inplace(&y, &rstd_ref, &mut d_ref, cols);
            assert_eq!(dg, dg_ref);
            assert_eq!(db, db_ref);
        } else {
            assert_eq!(dg, vec![0.0; cols], "no LayerNorm: gamma untouched");
        }
        assert_eq!(d, d_ref, "input gradient (ln {with_ln})");
        let mut dbias_ref = vec![0.0; cols];
        add_col_sums(&d_ref, cols, &mut dbias_ref);
        for (x, e) in dbias.iter().zip(&dbias_ref) {
            assert!((x - e).abs() <= 1e-4 * e.abs().max(1.0), "dbias {x} vs {e}");
        }
        assert!(
            (ds - ds_ref).abs() <= 1e-3 * ds_ref.abs().max(1.0),
            "dslope {ds} vs {ds_ref}"
        );
    }
    // finite differences of the fused forward on a small case
    let (rows, cols) = (3, 5);
    let h0 = randn(&mut r, rows * cols);
    let bias = randn(&mut r, cols);
    let gamma: Vec<f32> = (0..cols).map(|_| r.random_range(0.5f32..1.5)).collect();
    let beta = randn(&mut r, cols);
    let w = randn(&mut r, rows * cols);
    for with_ln in [true, false] {
        let f = |h: &[f32], b: &[f32], g: &[f32], be: &[f32], s: f32| {
            let mut h = h.to_vec();
            let mut a = vec![0.0; h.len()];
            post_forward(&mut h, b, with_ln.then_some((g, be)), s, &mut a);
            dot(&a, &w)
        };
        let mut h = h0.clone();
        let mut a = vec![0.0; rows * cols];
        let ln = with_ln.then_some((&gamma[..], &beta[..]));
        let rstd = post_forward(&mut h, &bias, ln, slope, &mut a);
        let mut d = w.clone();
        let (mut dg, mut db, mut dbias) = (vec![0.0; cols], vec![0.0; cols], vec![0.0; cols]);
        let ds = post_backward(&h, &rstd, ln, slope, &mut d, &mut dg, &mut db, &mut dbias);
        fd_check(
            "post dh",
            &mut |x| f(x, &bias, &gamma, &beta, slope),
            &h0,
            &d,
        );
        fd_check(
            "post dbias",
            &mut |x| f(&h0, x, &gamma, &beta, slope),
            &bias,
            &dbias,
        );
        fd_check(
            "post slope",
            &mut |x| f(&h0, &bias, &gamma, &beta, x[0]),
            &[slope],
            &[ds],
        );
        if with_ln {
            fd_check(
                "post dgamma",
                &mut |x| f(&h0, &bias, x, &beta, slope),
                &gamma,
                &dg,
            );
            fd_check(
                "post dbeta",
                &mut |x| f(&h0, &bias, &gamma, x, slope),
                &beta,
                &db,
            );
        }
    }
}

#[test]
fn layernorm_prelu_dropout_backward() {
    let mut r = rng(7);
    let (rows, cols) = (4, 6);
    let x = randn(&mut r, rows * cols);
    let gamma: Vec<f32> = (0..cols).map(|_| r.random_range(0.5f32..1.5)).collect();
    let beta = randn(&mut r, cols);
    let w = randn(&mut r, rows * cols);
    // loss(x, gamma, beta, slope) = <prelu(LN(x)·gamma + beta), w>
    let fwd = |x: &[f32], g: &[f32], b: &[f32], s: f32| {
        let mut h = x.to_vec();
        layer_norm_forward_inplace(&mut h, cols);
        dot(&affine_prelu_forward(&h, g, b, s), &w)
    };
    for slope in [0.25f32, 1.0] {
        // slope 1: pure LayerNorm
        let mut xhat = x.clone();
        let rstd = layer_norm_forward_inplace(&mut xhat, cols);
        let mut d = w.clone();
        let (mut dg, mut db) = (vec![0.0; cols], vec![0.0; cols]);
        let ds = affine_prelu_backward(&xhat, &gamma, &beta, slope, &mut d, &mut dg, &mut db);
        layer_norm_backward_inplace(&xhat, &rstd, &mut d, cols);
        fd_check("LN dx", &mut |x| fwd(x, &gamma, &beta, slope), &x, &d);
        fd_check("LN dgamma", &mut |g| fwd(&x, g, &beta, slope), &gamma, &dg);
        fd_check("LN dbeta", &mut |b| fwd(&x, &gamma, b, slope), &beta, &db);
        if slope != 1.0 {
            fd_check(
                "PReLU slope",
                &mut |s| fwd(&x, &gamma, &beta, s[0]),
                &[slope],
                &[ds],
            );
        }
    }
    // standalone PReLU
    let u = randn(&mut r, 20);
    let wu = randn(&mut r, 20);
    let mut du = wu.clone();
    let ds = prelu_backward(&u, 0.3, &mut du);
    fd_check(
        "prelu dx",
        &mut |u| dot(&prelu_forward(u, 0.3), &wu),
        &u,
        &du,
    );
    fd_check(
        "prelu slope",
        &mut |s| dot(&prelu_forward(&u, s[0]), &wu),
        &[0.3],
        &[ds],
    );
    assert_eq!(prelu_forward(&[2.0, -2.0, 0.0], 0.25), vec![2.0, -0.5, 0.0]);
    // dropout with a fixed mask
    let mask = dropout_mask(&mut rng(1), 20, 0.4);
    assert!(mask.contains(&0) && mask.contains(&1));
    assert_eq!(
        mask,
        dropout_mask(&mut rng(1), 20, 0.4),
        "mask is a function of the rng"
    );
    let mut dd = wu.clone();
    dropout_apply(&mut dd, &mask, 0.4);
    let mut f = |u: &[f32]| {
        let mut v = u.to_vec();
        dropout_apply(&mut v, &mask, 0.4);
        dot(&v, &wu)
    };
    fd_check("dropout", &mut f, &u, &dd);
    let mut v = vec![1.0f32; 20];
    dropout_apply(&mut v, &mask, 0.4);
    for (v, &m) in v.iter().zip(&mask) {
        assert!((v - m as f32 / 0.6).abs() < 1e-6);
    }
    // the kept share is 1 - p over many elements (several 16K chunks, a ragged tail), each
    // chunk on its own stream (no two chunks alike), 0 and 1 keep all / none
    let n = 1_000_003;
    for p in [0.5f32, 0.1, 0.9] {
        let m = dropout_mask(&mut rng(3), n, p);
        let kept = m.iter().map(|&k| k as usize).sum::<usize>() as f64 / n as f64;
        assert!(
            (kept - (1.0 - p as f64)).abs() < 0.002,
            "p {p}: kept {kept}"
        );
        assert_ne!(m[..16384], m[16384..32768]);
        // no run of 64 equal values (a stuck stream; a fair mask of 1M has one with chance ~2^-43)
        if p == 0.5 {
            assert!(m.windows(64).all(|w| w.iter().any(|&x| x != w[0])));
        }
    }
    assert!(dropout_mask(&mut rng(3), 1000, 0.0).iter().all(|&k| k == 1));
    assert!(dropout_mask(&mut rng(3), 1000, 1.0).iter().all(|&k| k == 0));
    // another rng state, another mask
    assert_ne!(
        dropout_mask(&mut rng(4), 1000, 0.5),
        dropout_mask(&mut rng(3), 1000, 0.5)
    );
}

// ------------------------------------------------------------------------------------------
// Whole-model gradient checks.

fn model(enc: EncoderKind, head: Head, in_dim: usize, dropout: f32) -> Model {
    build(ModelConfig {
        layer_norm: true,
        encoder: enc,
        in_dim,
        hidden: 6,
        num_layers: 2,
        dropout,
        head,
    })
}

/// Check the encoder's gradient w.r.t. every parameter for loss = <out, R>.
fn check_model_grad(m: &Model, x: &Features, blocks: &[Block], training: bool, seed: u64) {
    let views: Vec<BlockView> = blocks.iter().map(|b| b.view()).collect();
    let p = m.init_params(&mut rng(seed));
    // perturb LayerNorm/PReLU/bias params away from their init so all paths matter
    let mut p = p;
    let mut r = rng(seed + 1);
    for s in p.specs.clone() {
        if !(s.name.ends_with("lin_l.weight") || s.name.ends_with("lin_r.weight")) {
            for v in &mut p.data[s.offset..s.offset + s.numel()] {
                *v += r.random_range(-0.3f32..0.3);
            }
        }
    }
    let (out, cache) = m.forward(&p, &views, x, training, &mut rng(99));
    let rmat = Mat::from_vec(out.rows, out.cols, randn(&mut r, out.rows * out.cols));
    let mut g = m.zero_params();
    m.backward(&p, cache, &rmat, &mut g);
    let mut f = |d: &[f32]| {
        let q = ParamSet {
            specs: p.specs.clone(),
            data: d.to_vec(),
        };
        let (o, _) = m.forward(&q, &views, x, training, &mut rng(99));
        dot(&o.data, &rmat.data)
    };
    fd_check(
        &format!("{} {:?}", m.cfg.encoder, m.cfg.head),
        &mut f,
        &p.data,
        &g.data,
    );
    // every encoder tensor receives gradient; the decoder (not used here) none
    for s in &g.specs {
        let v = &g.data[s.offset..s.offset + s.numel()];
        let nz = v.iter().any(|&x| x != 0.0);
        assert_eq!(
            nz,
            !s.name.starts_with("decoder."),
            "gradient reaching {}",
            s.name
        );
    }
}

#[test]
fn model_gradients_all_encoders_and_heads() {
    let mut r = rng(11);
    let blocks = two_blocks(&mut r);
    let x = dense(9, 4, randn(&mut r, 9 * 4));
    for enc in EncoderKind::ALL.iter().copied() {
        for head in [Head::Link, Head::Node { num_classes: 3 }] {
            // in 4 -> hidden 6 (aggregate first), 6 -> 3 (transform first) / 6 -> 6 (aggregate first)
            check_model_grad(&model(enc, head, 4, 0.0), &x, &blocks, true, 21);
        }
    }
}

#[test]
fn model_gradients_without_layer_norm() {
    let mut r = rng(12);
    let blocks = two_blocks(&mut r);
    let x = dense(9, 4, randn(&mut r, 9 * 4));
    for enc in EncoderKind::ALL.iter().copied() {
        for head in [Head::Link, Head::Node { num_classes: 3 }] {
            let m = build(ModelConfig {
                layer_norm: false,
                ..model(enc, head, 4, 0.3).cfg
            });
            assert!(m.param_specs().iter().all(|s| !s.name.contains("norm")));
            check_model_grad(&m, &x, &blocks, true, 23);
        }
    }
    // without LayerNorm a hidden layer is PReLU(conv): check one value by hand on an MLP
    let m = build(ModelConfig {
        layer_norm: false,
        hidden: 1,
        num_layers: 2,
        ..model(EncoderKind::Mlp, Head::Node { num_classes: 1 }, 1, 0.0).cfg
    });
    let mut p = m.zero_params();
    // encoder.0.weight = [2], bias 0, act slope 0.25, encoder.1.weight = [3], bias 1
    p.get_mut("encoder.0.weight").unwrap()[0] = 2.0;
    p.get_mut("encoder.act.0.weight").unwrap()[0] = 0.25;
    p.get_mut("encoder.1.weight").unwrap()[0] = 3.0;
    p.get_mut("encoder.1.bias").unwrap()[0] = 1.0;
    let g = Csr::from_edges(2, &[], &[]);
    let deg = g.degrees();
    let out = m.infer_full(&p, &g, &deg, &dense(2, 1, vec![1.0, -1.0]));
    // x=1: 3*PReLU(2)+1 = 7; x=-1: 3*PReLU(-2)+1 = 3*(-0.5)+1 = -0.5
    assert_eq!(out.data, vec![7.0, -0.5]);
}

#[test]
fn model_gradients_wide_input_and_sparse_input() {
    let mut r = rng(12);
    let blocks = two_blocks(&mut r);
    let mut xd = randn(&mut r, 9 * 10);
    for (i, v) in xd.iter_mut().enumerate() {
        if i % 4 != 1 {
            *v = 0.0;
        }
    }
    let dense_x = dense(9, 10, xd.clone());
    let sparse_x = to_sparse(9, 10, &xd);
    for enc in EncoderKind::ALL.iter().copied() {
        let m = model(enc, Head::Node { num_classes: 3 }, 10, 0.0);
        check_model_grad(&m, &dense_x, &blocks, true, 31); // 10 -> 6: transform first
        check_model_grad(&m, &sparse_x, &blocks, true, 31);
    }
}

#[test]
fn model_gradients_with_dropout() {
    let mut r = rng(13);
    let blocks = two_blocks(&mut r);
    let x = dense(9, 4, randn(&mut r, 9 * 4));
    for enc in [EncoderKind::Sage, EncoderKind::Gcn, EncoderKind::Gat] {
        check_model_grad(&model(enc, Head::Link, 4, 0.3), &x, &blocks, true, 41);
    }
    // eval mode ignores dropout: same as a dropout-free model
    let views: Vec<BlockView> = blocks.iter().map(|b| b.view()).collect();
    let m0 = model(EncoderKind::Sage, Head::Link, 4, 0.0);
    let m1 = model(EncoderKind::Sage, Head::Link, 4, 0.5);
    let p = m0.init_params(&mut rng(1));
    let a = m0.forward(&p, &views, &x, true, &mut rng(2)).0;
    let b = m1.forward(&p, &views, &x, false, &mut rng(2)).0;
    let c = m1.forward(&p, &views, &x, true, &mut rng(2)).0;
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn sparse_and_dense_input_give_same_result() {
    let mut r = rng(14);
    let blocks = two_blocks(&mut r);
    let views: Vec<BlockView> = blocks.iter().map(|b| b.view()).collect();
    let mut xd = randn(&mut r, 9 * 5);
    for (i, v) in xd.iter_mut().enumerate() {
        if i % 3 == 0 {
            *v = 0.0;
        }
    }
    for enc in EncoderKind::ALL.iter().copied() {
        // in 5 < hidden 6: dense input aggregates first, sparse transforms first
        let m = model(enc, Head::Link, 5, 0.0);
        let p = m.init_params(&mut rng(2));
        let de = dense(9, 5, xd.clone());
        let (a, ca) = m.forward(&p, &views, &de, true, &mut rng(0));
        let sp = to_sparse(9, 5, &xd);
        let (b, cb) = m.forward(&p, &views, &sp, true, &mut rng(0));
        for (x, y) in a.data.iter().zip(&b.data) {
            assert!((x - y).abs() < 1e-5);
        }
        let d = Mat::from_vec(a.rows, a.cols, randn(&mut r, a.data.len()));
        let (mut ga, mut gb) = (m.zero_params(), m.zero_params());
        m.backward(&p, ca, &d, &mut ga);
        m.backward(&p, cb, &d, &mut gb);
        for (x, y) in ga.data.iter().zip(&gb.data) {
            assert!((x - y).abs() < 1e-4, "{x} vs {y}");
        }
    }
}

// ------------------------------------------------------------------------------------------
// Decoder.

#[test]
fn decoder_gradients_and_score_agree() {
    let mut r = rng(15);
    let m = model(EncoderKind::Sage, Head::Link, 4, 0.0);
    let mut p = m.init_params(&mut r);
    for n in ["decoder.lin1.bias", "decoder.lin2.bias"] {
        for v in p.get_mut(n).unwrap() {
            *v = r.random_range(-0.5f32..0.5);
        }
    }
    let h = Mat::from_vec(5, 6, randn(&mut r, 30));
    // node 2 appears on both sides and twice; a self pair too
    let src = [0u32, 2, 2, 4, 3];
    let dst = [1u32, 3, 0, 4, 2];
    let w = randn(&mut r, 5);
    let (logits, cache) = m.decode(&p, &h, &src, &dst);
    let mut g = m.zero_params();
    let dh = m.decode_backward(&p, cache, &w, &mut g);
    // score == decode
    let s = m.score(&p, &h, &src, &dst);
    for (a, b) in s.iter().zip(&logits) {
        assert!((a - b).abs() < 1e-5);
    }
    // d/dh
    let mut f = |hd: &[f32]| {
        let hm = Mat::from_vec(5, 6, hd.to_vec());
        dot(&m.decode(&p, &hm, &src, &dst).0, &w)
    };
    fd_check("decoder dh", &mut f, &h.data, &dh.data);
    // d/dθ (decoder part); encoder grads must stay zero
    let mut f = |d: &[f32]| {
        let q = ParamSet {
            specs: p.specs.clone(),
            data: d.to_vec(),
        };
        dot(&m.decode(&q, &h, &src, &dst).0, &w)
    };
    fd_check("decoder dθ", &mut f, &p.data, &g.data);
    for s in &g.specs {
        let nz = g.get(&s.name).unwrap().iter().any(|&v| v != 0.0);
        assert_eq!(nz, s.name.starts_with("decoder."), "{}", s.name);
    }
    // score across several chunks (parallel path) matches decode
    let n = 2000;
    let big_src: Vec<u32> = (0..n).map(|_| r.random_range(0..5)).collect();
    let big_dst: Vec<u32> = (0..n).map(|_| r.random_range(0..5)).collect();
    let a = m.score(&p, &h, &big_src, &big_dst);
    let b = m.decode(&p, &h, &big_src, &big_dst).0;
    for (a, b) in a.iter().zip(&b) {
        assert!((a - b).abs() < 1e-5);
    }
}

/// `|a - b| / |b|` (Euclidean norms).
fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
        .sum();
    let den: f64 = b.iter().map(|&b| (b as f64).powi(2)).sum();
    (num / den).sqrt()
}

/// The bf16 decoder's math in f64 from the rounded operands (`z`, `W1`, `du` rounded to bf16,
/// everything else exact): logits, `dL/dh` and the decoder's gradients `[W1 | b1 | slope | w2]`.
fn bf16_decoder_reference(
    p: &ParamSet,
    h: &Mat,
    src: &[u32],
    dst: &[u32],
    w: &[f32],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    use crate::bf16::{from_bf16, to_bf16};
    let bf = |x: f32| from_bf16(to_bf16(x)) as f64;
    let d = h.cols;
    let w1 = p.get("decoder.lin1.weight").unwrap();
    let (b1, w2) = (
        p.get("decoder.lin1.bias").unwrap(),
        p.get("decoder.lin2.weight").unwrap(),
    );
    let (slope, b2) = (
        p.get("decoder.act.weight").unwrap()[0] as f64,
        p.get("decoder.lin2.bias").unwrap()[0] as f64,
    );
    let mut logits = Vec::new();
    let mut dh = vec![0.0f64; h.rows * d];
    let mut g = vec![0.0f64; d * d + 2 * d + 1];
    for i in 0..src.len() {
        let (a, b) = (h.row(src[i] as usize), h.row(dst[i] as usize));
        let z: Vec<f64> = (0..d).map(|j| bf(a[j] * b[j])).collect();
        let u: Vec<f64> = (0..d)
            .map(|o| b1[o] as f64 + (0..d).map(|j| z[j] * bf(w1[o * d + j])).sum::<f64>())
            .collect();
        let pr = |x: f64| if x > 0.0 { x } else { slope * x };
        logits.push(b2 + (0..d).map(|o| w2[o] as f64 * pr(u[o])).sum::<f64>());
        let dl = w[i] as f64;
        let du: Vec<f64> = (0..d)
            .map(|o| {
                let gw = dl * w2[o] as f64;
                g[d * d + o] += gw * if u[o] > 0.0 { 1.0 } else { slope }; // db1
                g[d * d + d] += gw * u[o].min(0.0); // dslope
                g[d * d + d + 1 + o] += dl * pr(u[o]); // dw2
                bf((gw * if u[o] > 0.0 { 1.0 } else { slope }) as f32)
            })
            .collect();
        for o in 0..d {
            for j in 0..d {
                g[o * d + j] += du[o] * z[j];
            }
        }
        for j in 0..d {
            let dz: f64 = (0..d).map(|o| du[o] * bf(w1[o * d + j])).sum();
            dh[src[i] as usize * d + j] += dz * b[j] as f64;
            dh[dst[i] as usize * d + j] += dz * a[j] as f64;
        }
    }
    (logits, dh, g)
}

/// A link model of width `d` (random decoder biases), `h` of 300 rows and 5000 random pairs:
/// the set-up of the bf16 decoder tests; the rng goes on for what a test draws next.
fn link_decoder_case(
    d: usize,
    seed: u64,
) -> (Model, ParamSet, Mat, Vec<u32>, Vec<u32>, ChaCha8Rng) {
    let mut r = rng(seed);
    let m32 = build(ModelConfig {
        hidden: d,
        ..ModelConfig::new(EncoderKind::Sage, 4, Head::Link)
    });
    let mut p = m32.init_params(&mut r);
    for n in ["decoder.lin1.bias", "decoder.lin2.bias"] {
        for v in p.get_mut(n).unwrap() {
            *v = r.random_range(-0.5f32..0.5);
        }
    }
    let n = 300;
    let h = Mat::from_vec(n, d, randn(&mut r, n * d));
    let src: Vec<u32> = (0..5000).map(|_| r.random_range(0..n as u32)).collect();
    let dst: Vec<u32> = (0..5000).map(|_| r.random_range(0..n as u32)).collect();
    (m32, p, h, src, dst, r)
}

/// `--matmul-precision medium`: the bf16 decoder (decode, decode_backward, score) against (1)
/// the same math in f64 from the bf16-rounded operands (to 1e-4: only summation order and f32
/// sums differ), and (2) the f32 decoder, whose gradients the test above checks by finite
/// differences: bf16 rounds each operand to 8 mantissa bits, so they differ by ~0.05-2% (most
/// in `dL/dh`, where PReLU's derivative flips for `u` near 0); they must differ (the bf16 path
/// ran) and stay within 3%. Widths 40 (padding to 64) and 256; 5000 pairs make three chunks,
/// the last with short sub-blocks. The emulated tile product runs everywhere; AMX where
/// present, and then it agrees with the emulation up to summation order. The bf16 gradients
/// are the same bytes in a 1-thread and a 3-thread pool.
#[test]
fn decoder_bf16_matches_f32_within_rounding() {
    for (d, seed) in [(40usize, 31u64), (256, 32)] {
        let (m32, p, h, src, dst, mut r) = link_decoder_case(d, seed);
        let bsz = src.len();
        let w = randn(&mut r, bsz);
        let run = |m: &Model| {
            let (logits, cache) = m.decode(&p, &h, &src, &dst);
            let mut g = m.zero_params();
            let dh = m.decode_backward(&p, cache, &w, &mut g);
            (logits, dh.data, g.data, m.score(&p, &h, &src, &dst))
        };
        let f32_run = run(&m32);
        let mut emulated = m32.clone();
        emulated.use_emulated_bf16();
        assert_eq!(emulated.matmul_precision(), MatmulPrecision::Medium);
        let em = run(&emulated);
        let mut amx = m32.clone();
        let amx_run = (amx.set_matmul_precision(MatmulPrecision::Medium)
            == MatmulPrecision::Medium)
            .then(|| run(&amx));
        assert_eq!(amx_run.is_some(), crate::bf16_products().is_some());
        for (name, got) in std::iter::once(("emulated", &em))
            .chain(amx_run.iter().map(|r| (crate::bf16_products().unwrap(), r)))
        {
            for (what, a, b) in [
                ("logits", &got.0, &f32_run.0),
                ("dL/dh", &got.1, &f32_run.1),
                ("grads", &got.2, &f32_run.2),
                ("score", &got.3, &f32_run.3),
            ] {
                let e = rel_err(a, b);
                assert!(
                    e > 0.0 && e < 0.03,
                    "{name} d {d} {what}: relative error {e}"
                );
            }
            // score is decode's logits
            assert!(
                rel_err(&got.3, &got.0) < 1e-6,
                "{name} d {d}: score vs decode"
            );
            // the rounded math in f64 (a few hundred pairs: the reference is O(B d²))
            // (enough pairs that AMX takes the tile path: small products stay f32)
            let k = 512.max((1usize << 22).div_ceil(d * d));
            let (rl, rdh, rg) = bf16_decoder_reference(&p, &h, &src[..k], &dst[..k], &w[..k]);
            let mk = if name == "amx" {
                amx.clone()
            } else {
                emulated.clone()
            };
            mk.release_buffers();
            let (l, c) = mk.decode(&p, &h, &src[..k], &dst[..k]);
            let mut gk = mk.zero_params();
            let dhk = mk.decode_backward(&p, c, &w[..k], &mut gk);
            let dec: Vec<f32> = [
                "decoder.lin1.weight",
                "decoder.lin1.bias",
                "decoder.act.weight",
                "decoder.lin2.weight",
            ]
            .iter()
            .flat_map(|n| gk.get(n).unwrap().to_vec())
            .collect();
            let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            for (what, a, b) in [
                ("logits", l, f(&rl)),
                ("dL/dh", dhk.data, f(&rdh)),
                ("grads", dec, f(&rg)),
            ] {
                let e = rel_err(&a, &b);
                assert!(
                    e < 1e-4,
                    "{name} d {d} {what}: vs the rounded f64 reference {e}"
                );
            }
        }
        if let Some(a) = &amx_run {
            for (what, x, y) in [
                ("logits", &a.0, &em.0),
                ("dL/dh", &a.1, &em.1),
                ("grads", &a.2, &em.2),
            ] {
                let e = rel_err(x, y);
                assert!(e < 1e-4, "d {d} {what}: AMX vs emulated {e}");
            }
        }
        let m = if amx_run.is_some() { &amx } else { &emulated };
        let pool = |t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
        };
        let one = pool(1).install(|| run(m));
        let three = pool(3).install(|| run(m));
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&one.2),
            bits(&three.2),
            "d {d}: grads depend on the thread count"
        );
        assert_eq!(
            bits(&one.1),
            bits(&three.1),
            "d {d}: dL/dh depends on the thread count"
        );
    }
    // a tiny batch stays f32 on AMX and AVX512_BF16: the same bytes as the f32 model
    if crate::bf16_products().is_some() {
        let mut r = rng(33);
        let m32 = build(ModelConfig {
            hidden: 64,
            ..ModelConfig::new(EncoderKind::Sage, 4, Head::Link)
        });
        let p = m32.init_params(&mut r);
        let h = Mat::from_vec(10, 64, randn(&mut r, 640));
        let (src, dst, w) = ([0u32, 3, 5], [1u32, 9, 5], [0.5f32, -1.0, 2.0]);
        let mut amx = m32.clone();
        amx.set_matmul_precision(MatmulPrecision::Medium);
        let run = |m: &Model| {
            let (l, c) = m.decode(&p, &h, &src, &dst);
            let mut g = m.zero_params();
            let dh = m.decode_backward(&p, c, &w, &mut g);
            (l, dh.data, g.data, m.score(&p, &h, &src, &dst))
        };
        assert_eq!(run(&amx), run(&m32));
    }
    // medium is granted exactly where a bf16 product is (any head), highest always
    let mut node = model(EncoderKind::Sage, Head::Node { num_classes: 3 }, 4, 0.0);
    let got = node.set_matmul_precision(MatmulPrecision::Medium);
    assert_eq!(
        got == MatmulPrecision::Medium,
        crate::bf16_products().is_some()
    );
    assert_eq!(
        node.set_matmul_precision(MatmulPrecision::Highest),
        MatmulPrecision::Highest
    );
}

/// `Model::decode_bce` gives the same bits as `decode`, `bce_with_logits` and
/// `decode_backward` called in turn: loss, decoder gradients and `dL/dh`, in f32 and in bf16
/// (where the three run fused), emulated and on AMX where present. Widths 40 (portable row
/// code), 48 and 256 (AVX-512 row code on AMX); 5000 pairs make three chunks, the last with
/// short sub-blocks; positives and negatives mixed.
#[test]
fn fused_decoder_bce_matches_the_three_calls() {
    for (d, seed) in [(40usize, 51u64), (48, 52), (256, 53)] {
        let (m32, p, h, src, dst, _) = link_decoder_case(d, seed);
        let bsz = src.len();
        let targets: Vec<f32> = (0..bsz).map(|i| (i % 3 == 0) as u32 as f32).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut models = vec![("f32", m32.clone())];
        let mut em = m32.clone();
        em.use_emulated_bf16();
        models.push(("emulated", em));
        let mut amx = m32.clone();
        if amx.set_matmul_precision(MatmulPrecision::Medium) == MatmulPrecision::Medium {
            models.push(("amx", amx));
        }
        for (name, m) in &models {
            let mut g1 = m.zero_params();
            let (l1, dh1) = m.decode_bce(&p, &h, &src, &dst, &targets, &mut g1);
            let mut g2 = m.zero_params();
            let (logits, cache) = m.decode(&p, &h, &src, &dst);
            let (l2, dl) = bce_with_logits(&logits, &targets);
            let dh2 = m.decode_backward(&p, cache, &dl, &mut g2);
            assert_eq!(
                l1.to_bits(),
                l2.to_bits(),
                "{name} d {d}: loss {l1} vs {l2}"
            );
            assert_eq!(bits(&g1.data), bits(&g2.data), "{name} d {d}: gradients");
            assert_eq!(bits(&dh1.data), bits(&dh2.data), "{name} d {d}: dL/dh");
            assert!(l1 > 0.3 && l1 < 3.0, "{name} d {d}: loss {l1}");
        }
    }
}

/// `--matmul-precision medium` in the encoder: every layer type's node model, forward and
/// backward (dense input, both layers' linear products under the model's precision scope),
/// against f32: within bf16 rounding (< 2%), and not equal (the bf16 path ran).
#[test]
fn encoder_bf16_matches_f32_within_rounding() {
    let mut r = rng(41);
    let blocks = two_blocks(&mut r);
    let views: Vec<BlockView> = blocks.iter().map(|b| b.view()).collect();
    let x = dense(9, 4, randn(&mut r, 36));
    for enc in EncoderKind::ALL.iter().copied() {
        let m32 = model(enc, Head::Node { num_classes: 3 }, 4, 0.0);
        let p = m32.init_params(&mut r);
        let run = |m: &Model| {
            let (out, cache) = m.forward(&p, &views, &x, true, &mut rng(1));
            let d = Mat::from_vec(
                out.rows,
                out.cols,
                (0..out.data.len())
                    .map(|i| (i as f32 * 0.37).sin())
                    .collect(),
            );
            let mut g = m.zero_params();
            m.backward(&p, cache, &d, &mut g);
            (out.data, g.data)
        };
        let (o32, g32) = run(&m32);
        let mut mb = m32.clone();
        mb.use_emulated_bf16();
        let (ob, gb) = run(&mb);
        for (what, a, b) in [("output", &ob, &o32), ("grads", &gb, &g32)] {
            let e = rel_err(a, b);
            assert!(e > 0.0 && e < 0.02, "{enc:?} {what}: relative error {e}");
        }
    }
}

#[test]
fn link_training_loss_decreases_with_adam() {
    // end to end: encoder + decoder + BCE + clipping + Adam on a tiny graph
    let mut r = rng(16);
    let blocks = two_blocks(&mut r);
    let views: Vec<BlockView> = blocks.iter().map(|b| b.view()).collect();
    let x = dense(9, 4, randn(&mut r, 36));
    let m = model(EncoderKind::Sage, Head::Link, 4, 0.0);
    let mut p = m.init_params(&mut r);
    let mut opt = Adam::new(m.num_params(), 0.01);
    let (src, dst, t) = ([0u32, 1, 2, 0], [1u32, 2, 0, 2], [1.0f32, 1.0, 0.0, 0.0]);
    let mut losses = Vec::new();
    for _ in 0..50 {
        let (h, cache) = m.forward(&p, &views, &x, true, &mut r);
        let (logits, dc) = m.decode(&p, &h, &src, &dst);
        let (loss, dl) = bce_with_logits(&logits, &t);
        losses.push(loss);
        let mut g = m.zero_params();
        let dh = m.decode_backward(&p, dc, &dl, &mut g);
        m.backward(&p, cache, &dh, &mut g);
        clip_grad_norm(&mut g, 1.0);
        opt.step(&mut p, &g);
    }
    assert!(losses[49] < 0.5 * losses[0], "{losses:?}");
}

// ------------------------------------------------------------------------------------------
// Full-graph inference vs sampled-block forward.

/// Full-neighbour blocks for `seeds` (as a sampler with fanout = all would build them, with
/// destinations as the source prefix), input layer first, plus the input node ids.
fn full_blocks(g: &Csr, deg: &[u32], seeds: &[u32], layers: usize) -> (Vec<Block>, Vec<u32>) {
    let mut blocks = Vec::new();
    let mut dst: Vec<u32> = seeds.to_vec();
    for _ in 0..layers {
        let mut src = dst.clone();
        let mut local: HashMap<u32, u32> = src
            .iter()
            .enumerate()
            .map(|(i, &v)| (v, i as u32))
            .collect();
        let mut indptr = vec![0u64];
        let mut indices = Vec::new();
        for &v in &dst {
            for &u in g.neighbors(v as usize) {
                let id = *local.entry(u).or_insert_with(|| {
                    src.push(u);
                    (src.len() - 1) as u32
                });
                indices.push(id);
            }
            indptr.push(indices.len() as u64);
        }
        blocks.push(Block {
            num_dst: dst.len(),
            num_src: src.len(),
            indptr,
            indices,
            src_degree: src.iter().map(|&v| deg[v as usize]).collect(),
        });
        dst = src;
    }
    blocks.reverse();
    (blocks, dst)
}

#[test]
fn infer_full_equals_forward_on_full_neighbour_blocks() {
    let mut r = rng(17);
    let n = 40;
    let (mut s, mut d) = (Vec::new(), Vec::new());
    for _ in 0..120 {
        let (a, b) = (r.random_range(0..n as u32), r.random_range(0..n as u32));
        if a != b {
            s.push(a);
            d.push(b);
        }
    }
    let g = Csr::from_edges(n, &s, &d);
    let deg = g.degrees();
    let xall = randn(&mut r, n * 7);
    let feats = dense(n, 7, xall);
    let seeds = [3u32, 17, 0, 39, 22];
    for enc in EncoderKind::ALL.iter().copied() {
        for head in [Head::Link, Head::Node { num_classes: 4 }] {
            let m = build(ModelConfig {
                layer_norm: true,
                encoder: enc,
                in_dim: 7,
                hidden: 8,
                num_layers: 2,
                dropout: 0.5, // eval mode must ignore it
                head,
            });
            let p = m.init_params(&mut r);
            let full = m.infer_full(&p, &g, &deg, &feats);
            assert_eq!((full.rows, full.cols), (n, m.out_dim()));
            let (blocks, input) = full_blocks(&g, &deg, &seeds, 2);
            let views: Vec<BlockView> = blocks.iter().map(|b| b.view()).collect();
            let x = feats.gather(&input);
            let (out, _) = m.forward(&p, &views, &x, false, &mut r);
            for (i, &v) in seeds.iter().enumerate() {
                for (a, b) in out.row(i).iter().zip(full.row(v as usize)) {
                    assert!((a - b).abs() < 1e-4, "{enc} node {v}: {a} vs {b}");
                }
            }
        }
    }
}

#[test]
fn init_params_layout_and_values() {
    let m = Model::new(ModelConfig::new(EncoderKind::Sage, 128, Head::Link));
    let p = m.init_params(&mut rng(0));
    let names: Vec<&str> = p.specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "encoder.0.lin_l.weight",
            "encoder.0.lin_l.bias",
            "encoder.0.lin_r.weight",
            "encoder.norm.0.weight",
            "encoder.norm.0.bias",
            "encoder.act.0.weight",
            "encoder.1.lin_l.weight",
            "encoder.1.lin_l.bias",
            "encoder.1.lin_r.weight",
            "decoder.lin1.weight",
            "decoder.lin1.bias",
            "decoder.act.weight",
            "decoder.lin2.weight",
            "decoder.lin2.bias",
        ]
    );
    assert_eq!(
        p.spec("encoder.0.lin_l.weight").unwrap().shape,
        vec![256, 128]
    );
    assert_eq!(p.get("encoder.act.0.weight").unwrap(), &[0.25]);
    assert_eq!(p.get("decoder.act.weight").unwrap(), &[0.25]);
    assert!(p
        .get("encoder.norm.0.weight")
        .unwrap()
        .iter()
        .all(|&v| v == 1.0));
    // SAGE weights: Xavier-uniform with gain sqrt(2), as DGL's SAGEConv
    let uniform = |name: &str, a: f32| {
        let w = p.get(name).unwrap();
        assert!(w.iter().all(|&v| v.abs() <= a), "{name}: bound {a}");
        let var = w.iter().map(|&v| v * v).sum::<f32>() / w.len() as f32;
        // a uniform draw on (-a, a) has variance a²/3; 256 values already land within 25%
        let tol = if w.len() >= 10_000 { 0.05 } else { 0.25 };
        assert!(
            (var - a * a / 3.0).abs() < tol * a * a / 3.0,
            "{name}: variance {var} vs {}",
            a * a / 3.0
        );
    };
    let sage = 2f32.sqrt() * (6.0f32 / (256.0 + 128.0)).sqrt();
    uniform("encoder.0.lin_l.weight", sage);
    uniform("encoder.0.lin_r.weight", sage);
    uniform(
        "encoder.1.lin_l.weight",
        2f32.sqrt() * (6.0f32 / 512.0).sqrt(),
    );
    // SAGE bias 0 (DGL's U(±1/sqrt(in)) measured and not kept: docs/decisions/0006)
    for name in ["encoder.0.lin_l.bias", "encoder.1.lin_l.bias"] {
        assert!(p.get(name).unwrap().iter().all(|&v| v == 0.0), "{name}");
    }
    // decoder: PyTorch's nn.Linear default U(±1/sqrt(fan_in)), weights and biases (fan_in 256)
    for name in [
        "decoder.lin1.weight",
        "decoder.lin1.bias",
        "decoder.lin2.weight",
    ] {
        uniform(name, 1.0 / 16.0);
    }
    let b2 = p.get("decoder.lin2.bias").unwrap()[0];
    assert!(b2.abs() <= 1.0 / 16.0 && b2 != 0.0, "{b2}");
    // deterministic in the seed
    assert_eq!(p, m.init_params(&mut rng(0)));
    assert_eq!("gcn".parse::<EncoderKind>().unwrap(), EncoderKind::Gcn);
    assert_eq!(EncoderKind::Mlp.to_string(), "mlp");
    assert_eq!("GAT".parse::<EncoderKind>().unwrap(), EncoderKind::Gat);
    assert_eq!(
        "graphsage".parse::<EncoderKind>().unwrap(),
        EncoderKind::Sage
    );
    // the list of the message is the registry's
    assert_eq!(
        "gin".parse::<EncoderKind>().unwrap_err(),
        format!(
            "unknown encoder \"gin\" (expected {})",
            EncoderKind::names_list()
        )
    );
    let names: Vec<&str> = EncoderKind::ALL.iter().map(|k| k.name()).collect();
    let (last, rest) = names.split_last().unwrap();
    assert_eq!(
        EncoderKind::names_list(),
        format!("{} or {last}", rest.join(", "))
    );
    for &k in EncoderKind::ALL {
        assert_eq!(k.to_string().parse::<EncoderKind>().unwrap(), k);
    }
}

/// Regression (facebook node steps, ~6% of a step in zero fills): a large pooled buffer handed
/// out for a small request came back short and was grown (its tail zero-filled) by the next
/// large request, every step. A request now takes only a buffer of about its size.
#[test]
fn pool_keeps_large_buffers_for_large_requests() {
    let pool = BufferPool::default();
    let big = vec![1.0f32; 1 << 20];
    let big_ptr = big.as_ptr();
    pool.give(big);
    let small = pool.take(1 << 16);
    assert_ne!(small.as_ptr(), big_ptr, "a 1 M buffer for a 64 K request");
    assert!(small.capacity() < 1 << 17, "{}", small.capacity());
    let again = pool.take((1 << 20) - 5);
    assert_eq!(again.as_ptr(), big_ptr, "the 1 M buffer is still pooled");
    assert_eq!(again.len(), (1 << 20) - 5);
    // a buffer shortened by a nearby request is grown by at most what it lost
    pool.give(again);
    let near = pool.take(800_000);
    assert_eq!(near.as_ptr(), big_ptr);
    pool.give(near);
    let full = pool.take(1 << 20);
    assert_eq!(full.as_ptr(), big_ptr);
    assert!(full[..800_000].iter().all(|&v| v == 1.0));
    assert!(full[800_000..].iter().all(|&v| v == 0.0));
}

#[test]
fn pooled_buffers_never_leak_stale_values() {
    // blocks large enough (>= 65536-element activations) to go through the buffer pool
    let mut r = rng(18);
    let blocks = [
        rand_block(&mut r, 2500, 4000, 6),
        rand_block(&mut r, 1200, 2500, 6),
    ];
    let views: Vec<BlockView> = blocks.iter().map(|b| b.view()).collect();
    let mut xd = randn(&mut r, 4000 * 40);
    for (i, v) in xd.iter_mut().enumerate() {
        if i % 5 != 0 {
            *v = 0.0;
        }
    }
    let de = dense(4000, 40, xd.clone());
    let sp = to_sparse(4000, 40, &xd);
    for enc in EncoderKind::ALL.iter().copied() {
        for x in [&de, &sp] {
            let m = build(ModelConfig {
                layer_norm: true,
                encoder: enc,
                in_dim: 40,
                hidden: 64,
                num_layers: 2,
                dropout: 0.0,
                head: Head::Link,
            });
            let p = m.init_params(&mut rng(3));
            let run = |m: &Model| {
                let (out, cache) = m.forward(&p, &views, x, true, &mut rng(0));
                let mut g = m.zero_params();
                m.backward(&p, cache, &out, &mut g); // d_out = out: a non-trivial gradient
                (out, g)
            };
            let (o1, g1) = run(&m);
            m.poison_pool();
            let (o2, g2) = run(&m);
            let (o3, g3) = run(&m); // buffers recycled from the previous iteration
            assert!(o1.data.iter().all(|v| v.is_finite()));
            assert!(g1.data.iter().all(|v| v.is_finite()));
            // (assert! rather than assert_eq!: the values are too long to print)
            assert!(
                o1 == o2 && g1 == g2,
                "{enc}: poisoned pool changed the result"
            );
            assert!(
                o1 == o3 && g1 == g3,
                "{enc}: recycled buffers changed the result"
            );
            let full = m.infer_full(&p, &Csr::from_edges(4000, &[1, 2], &[0, 0]), &[0; 4000], x);
            m.poison_pool();
            let full2 = m.infer_full(&p, &Csr::from_edges(4000, &[1, 2], &[0, 0]), &[0; 4000], x);
            assert!(full == full2, "{enc}: infer_full with a poisoned pool");
        }
    }
}

/// `Input::Indexed` (rows of a larger matrix read in place) gives the same bytes as the
/// gathered rows, forward and backward: SAGE, GCN and MLP encoders, with the first layer on the
/// fused gather-aggregate path (few destinations: only they are gathered) and on the
/// gather-everything paths (transform first: `hidden < in_dim`; destinations >= half the
/// sources).
#[test]
fn indexed_input_equals_gathered_rows() {
    let mut r = rng(23);
    let n_all = 30;
    for (in_dim, nd0) in [(4usize, 4usize), (10, 4), (4, 6)] {
        let all = randn(&mut r, n_all * in_dim);
        let mut ids: Vec<u32> = (0..n_all as u32).collect();
        ids.shuffle(&mut r);
        let rows: Vec<u32> = ids[..9].to_vec();
        let gathered: Vec<f32> = rows
            .iter()
            .flat_map(|&i| all[i as usize * in_dim..(i as usize + 1) * in_dim].to_vec())
            .collect();
        let xg = dense(9, in_dim, gathered);
        let blocks = [rand_block(&mut r, nd0, 9, 4), rand_block(&mut r, 3, nd0, 3)];
        let views: Vec<BlockView> = blocks.iter().map(|b| b.view()).collect();
        for enc in EncoderKind::ALL.iter().copied() {
            let m = model(enc, Head::Node { num_classes: 3 }, in_dim, 0.3);
            let p = m.init_params(&mut rng(5));
            let run = |x: Input| {
                let (out, cache) = m.forward(&p, &views, x, true, &mut rng(7));
                let d = Mat::from_vec(out.rows, out.cols, randn(&mut rng(8), out.data.len()));
                let mut g = m.zero_params();
                m.backward(&p, cache, &d, &mut g);
                (out.data, g.data)
            };
            let indexed = run(Input::Indexed {
                all: &all,
                dim: in_dim,
                rows: &rows,
            });
            let (o_ref, g_ref) = run(Input::Rows(&xg));
            assert!(o_ref.iter().all(|v| v.is_finite()));
            assert_eq!(indexed.0, o_ref, "{enc} in_dim {in_dim} nd {nd0}: output");
            assert_eq!(
                indexed.1, g_ref,
                "{enc} in_dim {in_dim} nd {nd0}: gradients"
            );
        }
    }
}

// ------------------------------------------------------------------------------------------
// GAT.

#[test]
fn gat_forward_hand_example() {
    // 3 nodes; in-neighbours 0 <- {1, 2}, 1 <- {0, 1 (a self arc, ignored: one self-loop)},
    // 2 <- {}. x = [[1,0],[0,1],[1,1]], W = [[1, 2]] -> t = x Wᵀ = [1, 2, 3];
    // att_src = [-1] -> s_src = [-1, -2, -3]; att_dst = [0.5] -> s_dst = [0.5, 1, 1.5]; b = 0.1.
    // Node 0 over {0, 1, 2}: LeakyReLU(s_src_j + 0.5) = [-0.1, -0.3, -0.5];
    //   α = softmax = [0.40175958, 0.32893292, 0.26930750]; out = α·[1,2,3] + 0.1 = 1.96754792
    // Node 1 over {1, 0}: LeakyReLU([-2 + 1, -1 + 1]) = [-0.2, 0];
    //   α = [0.45016600, 0.54983400]; out = 0.450166·2 + 0.549834·1 + 0.1 = 1.55016600
    // Node 2 over {2}: α = 1; out = 3 + 0.1 = 3.1
    let g = Csr::from_edges(3, &[1, 2, 0, 1], &[0, 0, 1, 1]);
    let deg = g.degrees();
    let m = Model::new(ModelConfig {
        layer_norm: true,
        encoder: EncoderKind::Gat,
        in_dim: 2,
        hidden: 8,
        num_layers: 1,
        dropout: 0.0,
        head: Head::Node { num_classes: 1 },
    });
    let names: Vec<(&str, &[usize])> = m
        .param_specs()
        .iter()
        .map(|s| (s.name.as_str(), s.shape.as_slice()))
        .collect();
    let want: [(&str, &[usize]); 4] = [
        ("encoder.0.lin.weight", &[1, 2]),
        ("encoder.0.att_src", &[1, 1, 1]),
        ("encoder.0.att_dst", &[1, 1, 1]),
        ("encoder.0.bias", &[1]),
    ];
    assert_eq!(names, want);
    let mut p = m.zero_params();
    p.get_mut("encoder.0.lin.weight")
        .unwrap()
        .copy_from_slice(&[1.0, 2.0]);
    p.get_mut("encoder.0.att_src").unwrap()[0] = -1.0;
    p.get_mut("encoder.0.att_dst").unwrap()[0] = 0.5;
    p.get_mut("encoder.0.bias").unwrap()[0] = 0.1;
    let x = dense(3, 2, vec![1., 0., 0., 1., 1., 1.]);
    let out = m.infer_full(&p, &g, &deg, &x);
    for (a, e) in out.data.iter().zip([1.967_547_9f32, 1.550_166, 3.1]) {
        assert!((a - e).abs() < 1e-5, "{:?}", out.data);
    }
}

#[test]
fn gat_heads_layout_and_config_errors() {
    let cfg = ModelConfig {
        hidden: 64,
        ..ModelConfig::new(EncoderKind::Gat, 10, Head::Node { num_classes: 7 })
    };
    // default: 8 heads of 8 channels on the hidden layer, 1 head on the last
    let m = Model::new(cfg.clone());
    let shape = |n: &str| {
        m.param_specs()
            .iter()
            .find(|s| s.name == n)
            .unwrap()
            .shape
            .clone()
    };
    assert_eq!(shape("encoder.0.lin.weight"), vec![64, 10]);
    assert_eq!(shape("encoder.0.att_src"), vec![1, 8, 8]);
    assert_eq!(shape("encoder.0.att_dst"), vec![1, 8, 8]);
    assert_eq!(shape("encoder.0.bias"), vec![64]);
    assert_eq!(shape("encoder.1.lin.weight"), vec![7, 64]);
    assert_eq!(shape("encoder.1.att_src"), vec![1, 1, 7]);
    // attention vectors are Glorot-initialised over (heads, channels), not zero
    let p = m.init_params(&mut rng(0));
    let att = p.get("encoder.0.att_src").unwrap();
    let a = (6.0f32 / 16.0).sqrt();
    assert!(att.iter().all(|&v| v.abs() <= a) && att.iter().any(|&v| v != 0.0));
    let err = Model::try_new(ModelConfig {
        hidden: 60,
        ..cfg.clone()
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid model configuration: gat: layer 0 width 60 is not divisible by its 8 attention \
         heads (choose a hidden size that is a multiple of 8)"
    );
    let mut zero = EncoderKind::Gat.default_options();
    zero.set("heads", OptionValue::Int(0)).unwrap();
    let err = Model::try_new_with(cfg.clone(), zero).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid model configuration: gat: heads must be >= 1"
    );
    assert!(Model::try_new(ModelConfig {
        dropout: 1.0,
        ..cfg
    })
    .is_err());
    // a one-layer GAT has only the last layer: one head, any width
    assert!(Model::try_new(ModelConfig {
        hidden: 60,
        num_layers: 1,
        ..ModelConfig::new(EncoderKind::Gat, 10, Head::Link)
    })
    .is_ok());
}

/// GAT layer alone: gradients w.r.t. `lin.weight`, `att_src`, `att_dst` and the input, by
/// central differences, for 2 heads (hidden) and 1 head (last), dense and sparse input, on a
/// block with a self arc and a destination without neighbours.
#[test]
fn gat_layer_backward_matches_finite_differences() {
    use crate::conv::{ConvArgs, ParamAlloc};
    let mut r = rng(31);
    let mut block = rand_block(&mut r, 5, 9, 4);
    // destination 0 also lists itself as a source (ignored: exactly one self-loop)
    block.indices[0] = 0;
    let bv = block.view();
    for (last, af) in [(false, false), (true, false), (false, true), (true, true)] {
        crate::conv::set_gat_aggregate_first(Some(af));
        let (din, dout) = (4usize, 6usize);
        let args = ConvArgs {
            layer: 0,
            in_dim: din,
            out_dim: dout,
            last,
            opts: test_options(EncoderKind::Gat),
        };
        let mut alloc = ParamAlloc::default();
        let conv = EncoderKind::Gat.build(&args, &mut alloc).unwrap();
        let shapes = alloc.shapes.clone();
        let np: usize = shapes
            .iter()
            .map(|(_, s)| s.iter().product::<usize>())
            .sum();
        // scale up so some scores are positive and some negative (both LeakyReLU branches)
        let p: Vec<f32> = randn(&mut r, np).iter().map(|v| 1.5 * v).collect();
        let mut xd = randn(&mut r, 9 * din);
        for (i, v) in xd.iter_mut().enumerate() {
            if i % 3 == 2 {
                *v = 0.0;
            }
        }
        let rmat = randn(&mut r, 5 * dout);
        for sparse in [false, true] {
            let feats = |x: &[f32]| {
                if sparse {
                    to_sparse(9, din, x)
                } else {
                    dense(9, din, x.to_vec())
                }
            };
            let pool = BufferPool::default();
            let loss = |p: &[f32], x: &[f32]| {
                let f = feats(x);
                let (o, _) = conv.forward(&pool, p, &bv, InputRef::from_features(&f), false);
                assert_eq!((o.rows, o.cols), (5, dout));
                dot(&o.data, &rmat)
            };
            let f = feats(&xd);
            let x0 = InputRef::from_features(&f);
            let (o, cache) = conv.forward(&pool, &p, &bv, x0, true);
            assert!(o.data.iter().all(|v| v.is_finite()));
            let mut g = vec![0.0f32; np];
            let d = Mat::from_vec(5, dout, rmat.clone());
            let dx = conv
                .backward(&pool, &p, &bv, x0, cache, &d, &mut g, true)
                .unwrap();
            let tag = format!("gat last={last} aggregate_first={af} sparse={sparse}");
            // the bias is the model's: its gradient is not formed here
            let nb = dout;
            fd_check(&format!("{tag} params"), &mut |q| loss(q, &xd), &p, &g);
            assert!(g[np - nb..].iter().all(|&v| v == 0.0));
            for (name, _) in &shapes[..3] {
                let s = shapes.iter().position(|(n, _)| n == name).unwrap();
                let off: usize = shapes[..s]
                    .iter()
                    .map(|(_, s)| s.iter().product::<usize>())
                    .sum();
                let len: usize = shapes[s].1.iter().product();
                assert!(
                    g[off..off + len].iter().any(|&v| v != 0.0),
                    "{tag}: no gradient for {name}"
                );
            }
            if !sparse {
                fd_check(
                    &format!("{tag} input"),
                    &mut |xq| loss(&p, xq),
                    &xd,
                    &dx.data,
                );
            }
        }
    }
    crate::conv::set_gat_aggregate_first(None);
}

/// GAT's aggregate-first path (per-head sums of input rows, then `W^h` on destinations),
/// forced on: whole-model gradients by finite differences (node and link heads), and the same
/// values as the transform-first path, for gathered and indexed input and full-graph inference.
#[test]
fn gat_aggregate_first_equals_transform_first() {
    let mut r = rng(37);
    let blocks = two_blocks(&mut r);
    let views: Vec<BlockView> = blocks.iter().map(|b| b.view()).collect();
    let all = randn(&mut r, 30 * 4);
    let rows: Vec<u32> = (0..9u32).map(|i| 3 * i + 1).collect();
    let gathered: Vec<f32> = rows
        .iter()
        .flat_map(|&i| all[i as usize * 4..(i as usize + 1) * 4].to_vec())
        .collect();
    let x = dense(9, 4, gathered);
    let g = Csr::from_edges(30, &[1, 2, 0, 5, 7, 7], &[0, 0, 1, 4, 4, 6]);
    let deg = g.degrees();
    let xall = dense(30, 4, all.clone());
    for head in [Head::Link, Head::Node { num_classes: 3 }] {
        let m = model(EncoderKind::Gat, head, 4, 0.0);
        crate::conv::set_gat_aggregate_first(Some(true));
        check_model_grad(&m, &x, &blocks, true, 43);
        let p = m.init_params(&mut rng(4));
        let run = |af: bool, x: Input| {
            crate::conv::set_gat_aggregate_first(Some(af));
            let (out, cache) = m.forward(&p, &views, x, true, &mut rng(7));
            let d = Mat::from_vec(out.rows, out.cols, randn(&mut rng(8), out.data.len()));
            let mut gr = m.zero_params();
            m.backward(&p, cache, &d, &mut gr);
            let full = m.infer_full(&p, &g, &deg, &xall);
            (out.data, gr.data, full.data)
        };
        let tf = run(false, Input::Rows(&x));
        let indexed = Input::Indexed {
            all: &all,
            dim: 4,
            rows: &rows,
        };
        for (name, af) in [
            ("rows", run(true, Input::Rows(&x))),
            ("indexed", run(true, indexed)),
        ] {
            for (what, a, b, tol) in [
                ("output", &af.0, &tf.0, 1e-5),
                ("gradients", &af.1, &tf.1, 1e-4),
                ("infer_full", &af.2, &tf.2, 1e-5),
            ] {
                assert_eq!(a.len(), b.len());
                for (u, v) in a.iter().zip(b.iter()) {
                    assert!((u - v).abs() < tol, "{name} {what}: {u} vs {v}");
                }
            }
        }
    }
    crate::conv::set_gat_aggregate_first(None);
}

#[test]
fn gat_softmax_is_stable_for_large_scores() {
    // scores of ±1e4 overflow a naive exp; with the row maximum subtracted the output stays a
    // convex combination of the transformed rows
    let g = Csr::from_edges(3, &[1, 2, 0], &[0, 0, 1]);
    let deg = g.degrees();
    let m = Model::new(ModelConfig {
        layer_norm: true,
        encoder: EncoderKind::Gat,
        in_dim: 1,
        hidden: 8,
        num_layers: 1,
        dropout: 0.0,
        head: Head::Node { num_classes: 1 },
    });
    let mut p = m.zero_params();
    p.get_mut("encoder.0.lin.weight").unwrap()[0] = 1.0;
    p.get_mut("encoder.0.att_src").unwrap()[0] = 1e4;
    p.get_mut("encoder.0.att_dst").unwrap()[0] = 1e4;
    let x = dense(3, 1, vec![1.0, 2.0, 3.0]);
    let out = m.infer_full(&p, &g, &deg, &x);
    // node 0: source 2 (score 1e4·(3+1)) dominates; node 1: source 1 itself (1e4·(2+2)) over
    // source 0 (1e4·(1+2)); node 2: only itself
    assert_eq!(out.data, vec![3.0, 2.0, 3.0]);
}

/// The blocked transpose against the element-wise definition: odd shapes (partial blocks on
/// both sides), overwrite and add.
#[test]
fn blocked_transpose_matches_the_definition() {
    let mut r = rng(61);
    for (rows, cols) in [
        (45usize, 70usize),
        (1, 3),
        (33, 100),
        (100, 33),
        (64, 64),
        (4714, 5),
        (300, 37),
        (256, 515),
    ] {
        let a = randn(&mut r, rows * cols);
        let init = randn(&mut r, rows * cols);
        for add in [false, true] {
            let mut t = init.clone();
            transpose_into(&a, rows, cols, &mut t, add);
            for i in 0..rows {
                for j in 0..cols {
                    let want = a[i * cols + j] + if add { init[j * rows + i] } else { 0.0 };
                    assert_eq!(t[j * rows + i], want, "{rows}x{cols} add {add} ({i}, {j})");
                }
            }
        }
    }
}

/// The toy encoder (`conv/toy.rs`, registered in tests only by one line of `conv/mod.rs`)
/// brings its own option: the registry lists it, the generated `--model` help names it and its
/// flag, its check refuses a bad value, the model is built with it (`gain` 3 = three times the
/// MLP on the same parameters) and the model file's metadata records it. (Its gradients are
/// checked by the tests that run every registered encoder.)
#[test]
fn a_registered_toy_encoder_brings_its_option_help_and_export() {
    let toy: EncoderKind = "toy".parse().unwrap();
    assert_eq!(EncoderKind::ALL.last(), Some(&toy));
    let names: Vec<&str> = toy.options().iter().map(|o| o.name).collect();
    assert_eq!(names, ["gain"]);
    assert_eq!(
        EncoderKind::model_help(EncoderKind::Sage),
        "Encoder: sage (GraphSAGE, mean aggregator; also graphsage), gcn (Kipf and Welling's \
         graph convolution), mlp (no edges: a linear layer per node), gat (graph attention; \
         options --heads) or toy (a scaled linear layer, tests only; options --gain). Default: \
         sage."
    );
    let all: Vec<(&str, Vec<EncoderKind>)> = EncoderKind::all_options()
        .into_iter()
        .map(|(o, ks)| (o.name, ks))
        .collect();
    assert_eq!(
        all,
        vec![("heads", vec![EncoderKind::Gat]), ("gain", vec![toy])]
    );
    let shape = EncoderShape {
        hidden: 8,
        num_layers: 1,
    };
    let mut o = toy.default_options();
    assert_eq!(o.get("gain"), Some(OptionValue::Int(2)));
    o.set("gain", OptionValue::Int(0)).unwrap();
    assert_eq!(
        o.check(&shape).unwrap_err(),
        "--gain must be an integer >= 1, got 0"
    );
    assert_eq!(
        o.set("heads", OptionValue::Int(2)).unwrap_err(),
        "encoder toy has no option 'heads' (its options: gain)"
    );
    o.set("gain", OptionValue::Int(3)).unwrap();
    assert!(o.check(&shape).is_ok());
    let cfg = |encoder| ModelConfig {
        num_layers: 1,
        layer_norm: false,
        ..ModelConfig::new(encoder, 5, Head::Node { num_classes: 3 })
    };
    // options of one encoder do not build another
    assert_eq!(
        Model::try_new_with(cfg(EncoderKind::Mlp), o.clone())
            .unwrap_err()
            .to_string(),
        "invalid model configuration: options of encoder toy given for encoder mlp"
    );
    let m = Model::try_new_with(cfg(toy), o).unwrap();
    let mlp = Model::new(cfg(EncoderKind::Mlp));
    let p = m.init_params(&mut rng(4));
    let g = Csr::from_edges(4, &[0, 1, 2], &[1, 2, 3]);
    let feats = dense(4, 5, randn(&mut rng(5), 20));
    let (a, b) = (
        m.infer_full(&p, &g, &g.degrees(), &feats),
        mlp.infer_full(&p, &g, &g.degrees(), &feats),
    );
    assert!(b.data.iter().any(|&v| v != 0.0));
    for (x, y) in a.data.iter().zip(&b.data) {
        assert_eq!(*x, 3.0 * y);
    }
    assert_eq!(
        m.file_metadata(),
        "{\"format\":1,\"encoder\":\"toy\",\"options\":{\"gain\":3},\"in_dim\":5,\"hidden\":256,\
         \"num_layers\":1,\"out_dim\":3,\"head\":\"node\",\"num_classes\":3,\"layer_norm\":false,\
         \"dropout\":0,\"layers\":[{\"module\":\"ToyLinear\",\"in_channels\":5,\"out_channels\":3,\
         \"gain\":3}]}"
    );
}

/// A model file carries what the model is: its metadata is written with the parameters and
/// read back unchanged (GAT with its heads, the layers' PyTorch descriptions).
#[test]
fn model_metadata_is_written_with_the_parameters_and_read_back() {
    let mut o = EncoderKind::Gat.default_options();
    o.set("heads", OptionValue::Int(4)).unwrap();
    let m = Model::try_new_with(
        ModelConfig {
            hidden: 16,
            dropout: 0.5,
            ..ModelConfig::new(EncoderKind::Gat, 6, Head::Link)
        },
        o,
    )
    .unwrap();
    let meta = m.file_metadata();
    assert_eq!(
        meta,
        "{\"format\":1,\"encoder\":\"gat\",\"options\":{\"heads\":4},\"in_dim\":6,\"hidden\":16,\
         \"num_layers\":2,\"out_dim\":16,\"head\":\"link\",\"layer_norm\":true,\"dropout\":0.5,\
         \"layers\":[{\"module\":\"GATConv\",\"in_channels\":6,\"out_channels\":4,\"heads\":4,\
         \"negative_slope\":0.2},{\"module\":\"GATConv\",\"in_channels\":16,\"out_channels\":16,\
         \"heads\":1,\"negative_slope\":0.2}]}"
    );
    let dir = std::env::temp_dir().join(format!("tma-nn-meta-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.safetensors");
    let p = m.init_params(&mut rng(1));
    p.save_safetensors_with(&path, &[(Model::METADATA_KEY, meta.clone())])
        .unwrap();
    let (q, read) = ParamSet::load_safetensors_with(&path).unwrap();
    assert_eq!(q, p);
    assert_eq!(read.get(Model::METADATA_KEY), Some(&meta));
    assert!(read.contains_key("tma.param_order"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// GAT's evaluation cost model follows the path GAT itself chooses: aggregate first on a
/// sampled-like input block (`src ≫ dst`, dense), transform first with sparse input; counts
/// worked out by hand from the formulas of `conv/gat.rs`.
#[test]
fn gat_evaluation_cost_model_follows_its_own_path() {
    let m = Model::new(ModelConfig {
        hidden: 64,
        ..ModelConfig::new(EncoderKind::Gat, 10, Head::Node { num_classes: 7 })
    });
    let layers = m.eval_layers();
    assert_eq!((layers[0].in_dim(), layers[0].out_dim()), (10, 64));
    let mut c = LayerCounts {
        src: 1000,
        dst: 10,
        arcs: 1000,
        input_layer: true,
        sparse_input: false,
    };
    // transform first 1000·10·64 + 1000·64 = 704000; aggregate first 2·1000·10·8 +
    // 1000·8·10 + 10·10·64 = 246400
    assert_eq!(layers[0].cost(&c), 246400.0);
    // 4·(10·10 + 2·10·64 + 8·(2·1000 + 1000 + 2·10) + 8·10·10 + 2·8·10)
    assert_eq!(layers[0].bytes(&c), 106000);
    c.sparse_input = true;
    assert_eq!(layers[0].cost(&c), 704000.0);
    // 4·(1000·10 + 2·10·64 + 8·3020 + 1000·64)
    assert_eq!(layers[0].bytes(&c), 397760);
    // the other encoders keep the shared model
    let s = Model::new(ModelConfig::new(EncoderKind::Sage, 10, Head::Link));
    let l = s.eval_layers()[1];
    assert_eq!(l.cost(&c), linear_eval_cost_of(&c, 256, 256));
    assert_eq!(l.bytes(&c), crate::conv::linear_eval_bytes(&c, 256, 256));
}

fn linear_eval_cost_of(c: &LayerCounts, din: usize, dout: usize) -> f64 {
    // arcs·min(din, dout) + (src + dst)·din·dout
    c.arcs as f64 * din.min(dout) as f64 + (c.src + c.dst) as f64 * (din * dout) as f64
}
