//! Adam and gradient-norm clipping, with PyTorch's exact semantics.

use crate::ParamSet;
use rayon::prelude::*;

/// Adam (Kingma & Ba 2015) exactly as PyTorch's `torch.optim.Adam` (no weight decay, no
/// amsgrad), per scalar at step `t` (1-based):
/// `m = β1 m + (1−β1) g`, `v = β2 v + (1−β2) g²`,
/// `p −= (lr / (1−β1^t)) · m / (sqrt(v) / sqrt(1−β2^t) + eps)`.
/// Moments are private state; model averaging leaves them alone.
#[derive(Clone, Debug)]
pub struct Adam {
    /// Learning rate.
    pub lr: f32,
    /// Decay of the first moment (0.9).
    pub beta1: f32,
    /// Decay of the second moment (0.999).
    pub beta2: f32,
    /// Added to the denominator (1e-8).
    pub eps: f32,
    m: Vec<f32>,
    v: Vec<f32>,
    t: u64,
}

impl Adam {
    /// Adam over `num_params` scalars, betas (0.9, 0.999), eps 1e-8.
    pub fn new(num_params: usize, lr: f32) -> Adam {
        Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            m: vec![0.0; num_params],
            v: vec![0.0; num_params],
            t: 0,
        }
    }

    /// Number of steps taken.
    pub fn steps(&self) -> u64 {
        self.t
    }

    /// One update of `params` with `grads`.
    ///
    /// # Panics
    /// If `params`, `grads` and the optimizer state differ in length.
    pub fn step(&mut self, params: &mut ParamSet, grads: &ParamSet) {
        assert_eq!(params.data.len(), self.m.len(), "Adam: params length");
        assert_eq!(grads.data.len(), self.m.len(), "Adam: grads length");
        self.t += 1;
        let t = self.t as i32;
        let (b1, b2, eps) = (self.beta1, self.beta2, self.eps);
        let bc1 = 1.0 - (b1 as f64).powi(t);
        let bc2_sqrt = (1.0 - (b2 as f64).powi(t)).sqrt() as f32;
        let step_size = (self.lr as f64 / bc1) as f32;
        const CH: usize = 1 << 14;
        params
            .data
            .par_chunks_mut(CH)
            .zip(grads.data.par_chunks(CH))
            .zip(self.m.par_chunks_mut(CH))
            .zip(self.v.par_chunks_mut(CH))
            .for_each(|(((p, g), m), v)| {
                for i in 0..p.len() {
                    let gi = g[i];
                    m[i] = b1 * m[i] + (1.0 - b1) * gi;
                    v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
                    let denom = v[i].sqrt() / bc2_sqrt + eps;
                    p[i] -= step_size * m[i] / denom;
                }
            });
    }
}

/// Scale `grads` so their global L2 norm is at most `max_norm` (PyTorch
/// `clip_grad_norm_`: coefficient `min(1, max_norm / (norm + 1e-6))`). Returns the norm
/// **before** clipping.
pub fn clip_grad_norm(grads: &mut ParamSet, max_norm: f32) -> f32 {
    let norm = grads.l2_norm();
    let coef = max_norm as f64 / (norm as f64 + 1e-6);
    if coef < 1.0 {
        let c = coef as f32;
        grads.data.iter_mut().for_each(|g| *g *= c);
    }
    norm
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(vals: &[f32]) -> ParamSet {
        let mut p = ParamSet::from_shapes(&[("w".into(), vec![vals.len()])]);
        p.data.copy_from_slice(vals);
        p
    }

    #[test]
    fn adam_first_two_steps_match_pytorch() {
        // torch.optim.Adam([p], lr=0.1), p = [1.0, -2.0], grads g1 = [0.5, -1.0], g2 = [0.3, 2.0],
        // PyTorch's update: p -= (lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps), bc_i = 1 - beta_i^t.
        // Step 1: m = 0.1 g1 = [0.05, -0.1], v = 0.001 g1^2 = [0.00025, 0.001], bc1 = 0.1,
        //   bc2 = 0.001: m/bc1 = g1, sqrt(v/bc2) = |g1| -> p1 = p - 0.1 sign(g1) = [0.9, -1.9].
        // Step 2: m = 0.9 m + 0.1 g2 = [0.075, 0.11], v = 0.999 v + 0.001 g2^2
        //   = [0.00033975, 0.004999], bc1 = 0.19, bc2 = 0.001999:
        //   p2[0] = 0.9 - (0.1/0.19) * 0.075 / (sqrt(0.00033975/0.001999) + 1e-8) = 0.80425099
        //   p2[1] = -1.9 - (0.1/0.19) * 0.11 / (sqrt(0.004999/0.001999) + 1e-8) = -1.93661035
        // (computed in f64 by the same formula.)
        let mut p = one(&[1.0, -2.0]);
        let mut opt = Adam::new(2, 0.1);
        opt.step(&mut p, &one(&[0.5, -1.0]));
        assert!(
            (p.data[0] - 0.9).abs() < 1e-6 && (p.data[1] + 1.9).abs() < 1e-6,
            "{:?}",
            p.data
        );
        opt.step(&mut p, &one(&[0.3, 2.0]));
        assert!((p.data[0] - 0.804_251).abs() < 2e-6, "{:?}", p.data);
        assert!((p.data[1] + 1.936_610_4).abs() < 2e-6, "{:?}", p.data);
        assert_eq!(opt.steps(), 2);
    }

    #[test]
    fn clip_grad_norm_exact() {
        let mut g = one(&[3.0, 4.0]);
        let n = clip_grad_norm(&mut g, 1.0);
        assert_eq!(n, 5.0);
        // coef = 1 / (5 + 1e-6)
        let c = (1.0 / (5.0 + 1e-6f64)) as f32;
        assert!((g.data[0] - 3.0 * c).abs() < 1e-7 && (g.data[1] - 4.0 * c).abs() < 1e-7);
        let mut g = one(&[0.3, 0.4]);
        let n = clip_grad_norm(&mut g, 1.0);
        assert!((n - 0.5).abs() < 1e-7);
        assert_eq!(g.data, vec![0.3, 0.4]); // under the limit: untouched
    }
}
