//! Evaluation: metrics (MRR and Hits@K for link prediction, OGB style; accuracy with the
//! majority-class rate beside it, and top-k micro-/macro-F1 for multi-label node
//! classification) and [`evaluate`], which applies them to a model on the validation or test
//! split.

use crate::data::{EvalData, NodeTargets, Prepared};
use crate::infer::{infer_nodes, InferOptions};
use serde::Serialize;
use std::collections::BTreeMap;
use tma_nn::{Model, ParamSet};
use tma_sample::unique_with_inverse;

/// Metrics of one evaluation (validation or test).
#[derive(Clone, Debug, Serialize, Default, PartialEq)]
pub struct EvalResult {
    /// Name of the primary metric: "mrr", "accuracy" or "micro_f1".
    pub metric: String,
    /// Value of the primary metric.
    pub value: f64,
    /// All metrics computed (e.g. mrr, hits@1, hits@10, ...).
    pub all: BTreeMap<String, f64>,
}

/// Which split to evaluate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// The validation split (model selection, every round).
    Val,
    /// The test split (final and best model, once).
    Test,
}

/// Link-prediction ranking metrics over positives, each ranked against its own negatives.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RankMetrics {
    /// Mean reciprocal rank in [0, 1].
    pub mrr: f64,
    /// Fraction of positives ranked within the top 1, 10, 50, 100.
    pub hits_at_1: f64,
    /// Fraction of positives ranked within the top 10.
    pub hits_at_10: f64,
    /// ... within the top 50.
    pub hits_at_50: f64,
    /// ... within the top 100.
    pub hits_at_100: f64,
    /// Number of positives evaluated.
    pub count: usize,
}

/// Ranks each positive score against its negatives, OGB's convention (ogbl-citation2): rank =
/// 1 + (#negatives scoring higher) + (#negatives tying) / 2, i.e. the mean of the optimistic
/// and pessimistic ranks.
///
/// Shapes: `pos: [P]`, `neg: [P * k]` row-major (`neg[i*k..(i+1)*k]` belong to `pos[i]`).
///
/// # Panics
/// If `neg.len() != pos.len() * k`.
pub fn rank_metrics(pos: &[f32], neg: &[f32], k: usize) -> RankMetrics {
    assert_eq!(neg.len(), pos.len() * k, "negatives must be [P * k]");
    if pos.is_empty() {
        return RankMetrics::default();
    }
    let (mut rr, mut h1, mut h10, mut h50, mut h100) = (0f64, 0usize, 0usize, 0usize, 0usize);
    for (i, &p) in pos.iter().enumerate() {
        let row = &neg[i * k..(i + 1) * k];
        let greater = row.iter().filter(|&&n| n > p).count();
        let ties = row.iter().filter(|&&n| n == p).count();
        let rank = 1.0 + greater as f64 + ties as f64 / 2.0;
        rr += 1.0 / rank;
        h1 += (rank <= 1.0) as usize;
        h10 += (rank <= 10.0) as usize;
        h50 += (rank <= 50.0) as usize;
        h100 += (rank <= 100.0) as usize;
    }
    let n = pos.len() as f64;
    RankMetrics {
        mrr: rr / n,
        hits_at_1: h1 as f64 / n,
        hits_at_10: h10 as f64 / n,
        hits_at_50: h50 as f64 / n,
        hits_at_100: h100 as f64 / n,
        count: pos.len(),
    }
}

/// Fraction of the labelled `nodes` (label >= 0; unlabelled ones are skipped) whose arg-max
/// logit equals the label. `logits: [N, C]` row-major.
pub fn accuracy(logits: &[f32], num_classes: usize, labels: &[i32], nodes: &[u32]) -> f64 {
    let labelled: Vec<u32> = nodes
        .iter()
        .copied()
        .filter(|&v| labels[v as usize] >= 0)
        .collect();
    let nodes = &labelled;
    if nodes.is_empty() {
        return 0.0;
    }
    let correct = nodes
        .iter()
        .filter(|&&v| {
            let row = &logits[v as usize * num_classes..(v as usize + 1) * num_classes];
            let mut best = 0;
            for c in 1..num_classes {
                if row[c] > row[best] {
                    best = c;
                }
            }
            labels[v as usize] == best as i32
        })
        .count();
    correct as f64 / nodes.len() as f64
}

/// Micro-averaged F1 for multi-label prediction (a label is predicted when its logit > 0).
/// `logits: [N, L]`, `targets: [N, L]` (0/1), both row-major; only rows in `nodes` count.
pub fn micro_f1(logits: &[f32], targets: &[u8], num_labels: usize, nodes: &[u32]) -> f64 {
    let (mut tp, mut fp, mut fneg) = (0usize, 0usize, 0usize);
    for &v in nodes {
        let r = v as usize * num_labels;
        for j in 0..num_labels {
            let pred = logits[r + j] > 0.0;
            let truth = targets[r + j] != 0;
            match (pred, truth) {
                (true, true) => tp += 1,
                (true, false) => fp += 1,
                (false, true) => fneg += 1,
                _ => {}
            }
        }
    }
    if tp == 0 {
        return 0.0;
    }
    2.0 * tp as f64 / (2 * tp + fp + fneg) as f64
}

/// Micro- and macro-averaged F1 for multi-label prediction the way the field reports it
/// (DeepWalk, LINE, node2vec on BlogCatalog): each node predicts its `k` highest-scoring labels,
/// `k` = its number of true labels (ties: the lower label index first), so no threshold is
/// involved. Macro-F1 is the mean over all `num_labels` labels of each label's F1 (0 for a label
/// neither present nor predicted among `nodes`, as scikit-learn's `f1_score(average="macro")`).
/// `logits: [N, L]`, `targets: [N, L]` (0/1), both row-major; only rows in `nodes` count.
/// Returns `(micro, macro)`.
pub fn multilabel_topk_f1(
    logits: &[f32],
    targets: &[u8],
    num_labels: usize,
    nodes: &[u32],
) -> (f64, f64) {
    let l = num_labels;
    let (mut tp, mut fp, mut fneg) = (vec![0usize; l], vec![0usize; l], vec![0usize; l]);
    let mut order: Vec<usize> = Vec::with_capacity(l);
    for &v in nodes {
        let r = v as usize * l;
        let (row, truth) = (&logits[r..r + l], &targets[r..r + l]);
        let k = truth.iter().filter(|&&t| t != 0).count();
        order.clear();
        order.extend(0..l);
        // stable sort: equal scores keep the lower label index first
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
        let mut pred = vec![false; l];
        for &j in &order[..k] {
            pred[j] = true;
        }
        for j in 0..l {
            match (pred[j], truth[j] != 0) {
                (true, true) => tp[j] += 1,
                (true, false) => fp[j] += 1,
                (false, true) => fneg[j] += 1,
                _ => {}
            }
        }
    }
    let f1 = |tp: usize, fp: usize, fneg: usize| {
        if tp == 0 {
            0.0
        } else {
            2.0 * tp as f64 / (2 * tp + fp + fneg) as f64
        }
    };
    let sum = |x: &[usize]| x.iter().sum::<usize>();
    let micro = f1(sum(&tp), sum(&fp), sum(&fneg));
    let macro_ = if l == 0 {
        0.0
    } else {
        (0..l).map(|j| f1(tp[j], fp[j], fneg[j])).sum::<f64>() / l as f64
    };
    (micro, macro_)
}

/// Accuracy of always predicting the most frequent class among the labelled `train` nodes
/// (ties: the lower class), over the labelled `nodes`: the floor a classifier must beat. 0 when
/// either set has no labelled node.
pub fn majority_rate(labels: &[i32], num_classes: usize, train: &[u32], nodes: &[u32]) -> f64 {
    let mut count = vec![0usize; num_classes];
    for &v in train {
        let y = labels[v as usize];
        if y >= 0 && (y as usize) < num_classes {
            count[y as usize] += 1;
        }
    }
    let Some(major) = (0..num_classes).rev().max_by_key(|&c| count[c]) else {
        return 0.0;
    };
    if count[major] == 0 {
        return 0.0;
    }
    let labelled: Vec<i32> = nodes
        .iter()
        .map(|&v| labels[v as usize])
        .filter(|&y| y >= 0)
        .collect();
    if labelled.is_empty() {
        return 0.0;
    }
    labelled.iter().filter(|&&y| y == major as i32).count() as f64 / labelled.len() as f64
}

/// Evaluates `params` on the validation or test split with the default [`InferOptions`]
/// (exact inference, restricted to what the split needs where that is cheaper):
/// [`evaluate_with`].
pub fn evaluate(model: &Model, params: &ParamSet, prep: &Prepared, split: Split) -> EvalResult {
    evaluate_with(model, params, prep, split, &InferOptions::default())
}

/// Evaluates `params` on the validation or test split: the model's outputs on the nodes the
/// split reads (the split's nodes; the endpoints of its positives and their negatives), by
/// [`infer_nodes`] on the evaluation graph (`prep.graph`) as `opts` says, then MRR/Hits@K
/// against the fixed negatives (link) or accuracy/micro-F1 over the split's labelled nodes
/// (node).
pub fn evaluate_with(
    model: &Model,
    params: &ParamSet,
    prep: &Prepared,
    split: Split,
    opts: &InferOptions,
) -> EvalResult {
    // rows of `h` are the distinct nodes the split reads; ids below are local to them
    let infer = |nodes: &[u32]| {
        let (uniq, local) = unique_with_inverse(nodes);
        let (h, _) = infer_nodes(
            model,
            params,
            &prep.graph,
            &prep.degrees,
            &prep.features,
            &uniq,
            opts,
        );
        (h, uniq, local)
    };
    let mut all = BTreeMap::new();
    match &prep.eval {
        EvalData::Link { split: ls } => {
            let (pos, neg) = match split {
                Split::Val => (&ls.val_pos, &ls.val_neg),
                Split::Test => (&ls.test_pos, &ls.test_neg),
            };
            let k = ls.num_neg;
            // endpoints: sources, destinations, negatives
            let mut ends: Vec<u32> = pos.iter().map(|p| p.0).collect();
            ends.extend(pos.iter().map(|p| p.1));
            ends.extend_from_slice(neg);
            let (h, _, local) = infer(&ends);
            let (src, rest) = local.split_at(pos.len());
            let (dst, neg) = rest.split_at(pos.len());
            let pos_scores = model.score(params, &h, src, dst);
            let mut nsrc = Vec::with_capacity(neg.len());
            for &s in src {
                nsrc.extend(std::iter::repeat_n(s, k));
            }
            let neg_scores = model.score(params, &h, &nsrc, neg);
            let m = rank_metrics(&pos_scores, &neg_scores, k);
            all.insert("mrr".into(), m.mrr);
            all.insert("hits@1".into(), m.hits_at_1);
            all.insert("hits@10".into(), m.hits_at_10);
            all.insert("hits@50".into(), m.hits_at_50);
            all.insert("hits@100".into(), m.hits_at_100);
            EvalResult {
                metric: "mrr".into(),
                value: m.mrr,
                all,
            }
        }
        EvalData::Node { split: ns, targets } => {
            let split_nodes = match split {
                Split::Val => &ns.val,
                Split::Test => &ns.test,
            };
            // logits of the split's distinct nodes; `nodes` and the targets below are local
            let (h, uniq, local) = infer(split_nodes);
            let nodes = &local;
            let (metric, value) = match targets {
                NodeTargets::Classes { y, num_classes } => {
                    let y_local: Vec<i32> = uniq.iter().map(|&v| y[v as usize]).collect();
                    let acc = accuracy(&h.data, *num_classes, &y_local, nodes);
                    all.insert(
                        "majority_rate".into(),
                        majority_rate(y, *num_classes, &ns.train, split_nodes),
                    );
                    ("accuracy", acc)
                }
                NodeTargets::MultiLabel { y, num_labels } => {
                    let l = *num_labels;
                    let mut y_local = Vec::with_capacity(uniq.len() * l);
                    for &v in &uniq {
                        y_local.extend_from_slice(&y[v as usize * l..(v as usize + 1) * l]);
                    }
                    let y = &y_local;
                    let (micro, macro_) = multilabel_topk_f1(&h.data, y, l, nodes);
                    all.insert("macro_f1".into(), macro_);
                    all.insert("micro_f1_at_logit0".into(), micro_f1(&h.data, y, l, nodes));
                    ("micro_f1", micro)
                }
            };
            all.insert(metric.into(), value);
            EvalResult {
                metric: metric.into(),
                value,
                all,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_metrics_exact() {
        // positive 0 beats all 3 negatives (rank 1); positive 1 loses to two, ties one (rank 3.5)
        let pos = [0.9f32, 0.1];
        let neg = [0.1f32, 0.2, 0.3, 0.5, 0.1, 0.7];
        let m = rank_metrics(&pos, &neg, 3);
        assert!((m.mrr - (1.0 + 1.0 / 3.5) / 2.0).abs() < 1e-12);
        assert_eq!(m.hits_at_1, 0.5);
        assert_eq!(m.hits_at_10, 1.0);
        assert_eq!(m.count, 2);
    }

    #[test]
    fn accuracy_and_f1_exact() {
        let logits = [1.0f32, 0.0, 0.0, 2.0, 5.0, 1.0];
        let labels = [0, 1, 1];
        assert_eq!(accuracy(&logits, 2, &labels, &[0, 1, 2]), 2.0 / 3.0);
        assert_eq!(accuracy(&logits, 2, &labels, &[1]), 1.0);
        // an unlabelled node does not count either way
        assert_eq!(accuracy(&logits, 2, &[0, -1, 1], &[0, 1, 2]), 0.5);
        // 2 nodes, 2 labels: preds [1,0],[1,1]; truth [1,1],[0,1] -> tp 2, fp 1, fn 1
        let l = [1.0f32, -1.0, 2.0, 3.0];
        let t = [1u8, 1, 0, 1];
        assert!((micro_f1(&l, &t, 2, &[0, 1]) - 4.0 / 6.0).abs() < 1e-12);
    }

    #[test]
    fn multilabel_topk_f1_exact() {
        // 3 nodes, 3 labels, all logits negative (thresholding at 0 would predict nothing)
        let l = [
            -1.0f32, -3.0, -2.0, // node 0: truth {0, 2} -> top-2 {0, 2}: tp 2
            -5.0, -1.0,
            -1.0, // node 1: truth {0} -> top-1: tie 1/2, the lower (1): fp 1, fn 1
            -2.0, -2.0, -9.0, // node 2: truth {} -> k = 0, predicts nothing
        ];
        let t = [1u8, 0, 1, 1, 0, 0, 0, 0, 0];
        assert_eq!(micro_f1(&l, &t, 3, &[0, 1, 2]), 0.0);
        let (micro, macro_) = multilabel_topk_f1(&l, &t, 3, &[0, 1, 2]);
        // tp 2, fp 1, fn 1 -> 4 / 6
        assert!((micro - 4.0 / 6.0).abs() < 1e-12, "{micro}");
        // label 0: tp 1 fn 1 -> 2/3; label 1: fp 1 -> 0; label 2: tp 1 -> 1
        assert!(
            (macro_ - (2.0 / 3.0 + 0.0 + 1.0) / 3.0).abs() < 1e-12,
            "{macro_}"
        );
        // only node 0 counts: perfect
        assert_eq!(multilabel_topk_f1(&l, &t, 3, &[0]).0, 1.0);
    }

    #[test]
    fn majority_rate_exact() {
        // training labels: class 2 x3, class 0 x2, one unlabelled -> majority 2
        let y = [2, 2, 0, 0, 2, -1, 2, 1, 0, -1];
        let train = [0, 1, 2, 3, 4, 5];
        // evaluated nodes 6..10: labels 2, 1, 0, (unlabelled) -> 1 of 3
        assert!((majority_rate(&y, 3, &train, &[6, 7, 8, 9]) - 1.0 / 3.0).abs() < 1e-12);
        // a tie (class 0 and 2 twice each) goes to the lower class
        assert_eq!(majority_rate(&y, 3, &[0, 1, 2, 3], &[2, 3, 6]), 2.0 / 3.0);
        assert_eq!(majority_rate(&y, 3, &[5, 9], &[0]), 0.0);
    }
}
