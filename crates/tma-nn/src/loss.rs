//! Losses with their gradients (all means, as PyTorch's default `reduction="mean"`).

use crate::Mat;
use rayon::prelude::*;

/// Binary cross-entropy on logits, mean over the batch (PyTorch `BCEWithLogitsLoss`):
/// `l_i = max(x_i, 0) − x_i t_i + ln(1 + e^{−|x_i|})` — finite for any finite logit.
/// Returns `(mean loss, dL/dx)` with `dL/dx_i = (σ(x_i) − t_i) / n`.
///
/// # Panics
/// If the lengths differ. An empty batch gives `(0, [])`.
pub fn bce_with_logits(logits: &[f32], targets: &[f32]) -> (f32, Vec<f32>) {
    assert_eq!(logits.len(), targets.len(), "bce_with_logits: lengths");
    let n = logits.len();
    if n == 0 {
        return (0.0, Vec::new());
    }
    let inv = 1.0 / n as f64;
    let mut loss = 0.0f64;
    let mut grad = Vec::with_capacity(n);
    for (&x, &t) in logits.iter().zip(targets) {
        let (l, g) = bce_term(x, t, inv);
        loss += l;
        grad.push(g);
    }
    ((loss * inv) as f32, grad)
}

/// One element of [`bce_with_logits`]: `(l_i, dL/dx_i)` for logit `x`, target `t` and
/// `inv = 1 / n` (the loss is `(Σ l_i) · inv`, summed in element order). The fused bf16
/// decoder calls it too, so both give the same bits.
#[inline]
pub(crate) fn bce_term(x: f32, t: f32, inv: f64) -> (f64, f32) {
    let (x, t) = (x as f64, t as f64);
    let l = x.max(0.0) - x * t + (-x.abs()).exp().ln_1p();
    let sig = if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    };
    (l, ((sig - t) * inv) as f32)
}

/// Softmax cross-entropy, mean over rows (PyTorch `CrossEntropyLoss`), `logits: [n, C]`,
/// `labels: [n]` in `0..C`. Returns `(loss, dL/dlogits)` with `(softmax − onehot) / n`.
///
/// # Panics
/// If `labels.len() != logits.rows` or a label is `>= C`.
pub fn softmax_cross_entropy(logits: &Mat, labels: &[u32]) -> (f32, Mat) {
    assert_eq!(
        labels.len(),
        logits.rows,
        "softmax_cross_entropy: labels length"
    );
    let (n, c) = (logits.rows, logits.cols);
    let mut grad = Mat::zeros(n, c);
    if n == 0 {
        return (0.0, grad);
    }
    let inv = 1.0 / n as f64;
    let loss: f64 = grad
        .data
        .par_chunks_mut(c.max(1))
        .with_min_len(256)
        .zip(labels.par_iter())
        .enumerate()
        .map(|(i, (g, &y))| {
            let row = logits.row(i);
            let y = y as usize;
            assert!(y < c, "label {y} out of range for {c} classes");
            let mx = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
            let z: f64 = row.iter().map(|&v| (v as f64 - mx).exp()).sum();
            let lse = mx + z.ln();
            for (k, (g, &v)) in g.iter_mut().zip(row).enumerate() {
                let p = (v as f64 - lse).exp();
                *g = ((p - if k == y { 1.0 } else { 0.0 }) * inv) as f32;
            }
            lse - row[y] as f64
        })
        .sum();
    ((loss * inv) as f32, grad)
}

/// Multi-label binary cross-entropy on logits, mean over all `n × C` entries (PyTorch
/// `BCEWithLogitsLoss` on a matrix); `targets: [n * C]` of 0/1, row-major.
///
/// # Panics
/// If `targets.len() != logits.data.len()`.
pub fn multilabel_bce(logits: &Mat, targets: &[u8]) -> (f32, Mat) {
    assert_eq!(
        targets.len(),
        logits.data.len(),
        "multilabel_bce: targets length"
    );
    let t: Vec<f32> = targets.iter().map(|&v| v as f32).collect();
    let (loss, g) = bce_with_logits(&logits.data, &t);
    (loss, Mat::from_vec(logits.rows, logits.cols, g))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bce_exact_values_and_extremes() {
        // l(x,t) = max(x,0) - x t + ln(1 + e^{-|x|})
        let x = [0.0f32, 2.0, -3.0, 100.0, -100.0];
        let t = [1.0f32, 0.0, 1.0, 0.0, 0.0];
        let per = [
            std::f64::consts::LN_2,        // ln 2
            2.0 + (-2.0f64).exp().ln_1p(), // 2.126928
            3.0 + (-3.0f64).exp().ln_1p(), // 3.048587
            100.0,                         // + ln(1+e^-100) ~ 0
            0.0,                           // ~ 3.7e-44
        ];
        let (l, g) = bce_with_logits(&x, &t);
        let want = per.iter().sum::<f64>() / 5.0;
        assert!((l as f64 - want).abs() < 1e-5, "{l} vs {want}");
        assert!(l.is_finite() && g.iter().all(|v| v.is_finite()));
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        let want_g = [
            (0.5 - 1.0) / 5.0,
            sig(2.0) / 5.0,
            (sig(-3.0) - 1.0) / 5.0,
            1.0 / 5.0,
            0.0,
        ];
        for (a, b) in g.iter().zip(want_g) {
            assert!((*a as f64 - b).abs() < 1e-6, "{a} vs {b}");
        }
    }

    fn fd_check(f: impl Fn(&[f32]) -> f32, x: &[f32], g: &[f32]) {
        for i in 0..x.len() {
            let h = 1e-2f32;
            let mut xp = x.to_vec();
            xp[i] += h;
            let mut xm = x.to_vec();
            xm[i] -= h;
            let num = (f(&xp) as f64 - f(&xm) as f64) / (2.0 * h as f64);
            assert!(
                (num - g[i] as f64).abs() <= 1e-3 + 1e-2 * num.abs(),
                "entry {i}: numeric {num} analytic {}",
                g[i]
            );
        }
    }

    #[test]
    fn loss_gradients_match_finite_differences() {
        let x: Vec<f32> = (0..12).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.4).collect();
        let t: Vec<f32> = (0..12).map(|i| (i % 3 == 0) as u8 as f32).collect();
        let (_, g) = bce_with_logits(&x, &t);
        fd_check(|x| bce_with_logits(x, &t).0, &x, &g);

        let labels = [2u32, 0, 3];
        let (_, g) = softmax_cross_entropy(&Mat::from_vec(3, 4, x.clone()), &labels);
        fd_check(
            |x| softmax_cross_entropy(&Mat::from_vec(3, 4, x.to_vec()), &labels).0,
            &x,
            &g.data,
        );

        let tu: Vec<u8> = t.iter().map(|&v| v as u8).collect();
        let (_, g) = multilabel_bce(&Mat::from_vec(3, 4, x.clone()), &tu);
        fd_check(
            |x| multilabel_bce(&Mat::from_vec(3, 4, x.to_vec()), &tu).0,
            &x,
            &g.data,
        );
    }

    #[test]
    fn softmax_ce_exact() {
        // logits [0, ln 3] label 1: p = [1/4, 3/4], loss = -ln(3/4)
        let (l, g) = softmax_cross_entropy(&Mat::from_vec(1, 2, vec![0.0, 3f32.ln()]), &[1]);
        assert!((l - (4.0f32 / 3.0).ln()).abs() < 1e-6);
        assert!((g.data[0] - 0.25).abs() < 1e-6 && (g.data[1] + 0.25).abs() < 1e-6);
        // huge logits stay finite
        let (l, g) = softmax_cross_entropy(&Mat::from_vec(1, 2, vec![1e4, -1e4]), &[1]);
        assert!((l - 2e4).abs() < 1.0 && g.data.iter().all(|v| v.is_finite()));
    }
}
