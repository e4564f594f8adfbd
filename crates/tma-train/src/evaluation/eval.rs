//! Evaluation: metrics (MRR and Hits@K for link prediction, OGB style; accuracy with the
//! majority-class rate beside it, macro-F1, and ROC-AUC for binary node classification; top-k
//! and thresholded micro-/macro-F1 for multi-label node classification), the selection rule
//! of the best model ([`improves`]), and [`evaluate`], which applies them to a model on the
//! validation or test split.

use crate::config::Metric;
use crate::data::{EvalData, NodeTargets, Prepared};
use crate::evaluation::infer::{infer_nodes, infer_rows, InferOptions};
use serde::Serialize;
use std::collections::BTreeMap;
use tma_nn::{Model, ParamSet};
use tma_sample::unique_with_inverse;

/// Metrics of one evaluation (validation or test).
#[derive(Clone, Debug, Serialize, Default, PartialEq)]
pub struct EvalResult {
    /// Name of the metric that selects the best model (`--metric`, `auto` resolved for the
    /// task): "accuracy", "roc_auc", "macro_f1", "micro_f1", "mrr" or "hits@K".
    pub metric: String,
    /// Value of that metric (NaN, `null` in JSON, where it is undefined: ROC-AUC on nodes of
    /// one class only, or a model whose scores are NaN).
    pub value: f64,
    /// All metrics computed (e.g. mrr, hits@1, hits@10, ...), the selecting one among them.
    pub all: BTreeMap<String, f64>,
}

impl EvalResult {
    /// Makes `metric` the primary metric (`metric`/`value`), reading its value from
    /// [`EvalResult::all`] (NaN when it was not computed).
    pub fn select(mut self, metric: Metric) -> EvalResult {
        let name = metric.to_string();
        self.value = self.all.get(&name).copied().unwrap_or(f64::NAN);
        self.metric = name;
        self
    }
}

/// Whether a validation value `new` replaces the best one so far (`best`; None: no best yet)
/// as the best model: strictly greater (a plateau keeps the earliest round), and a defined
/// value always beats an undefined (NaN) one. The first validated round is the best when
/// there is none yet, even when its value is NaN, so every run has a best model.
pub fn improves(new: f64, best: Option<f64>) -> bool {
    match best {
        None => true,
        Some(b) => new > b || (b.is_nan() && !new.is_nan()),
    }
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
/// and pessimistic ranks. Every metric is NaN (undefined) when a score is NaN: a NaN compares
/// neither above nor equal, so it would otherwise rank every positive first (a diverged model
/// read as MRR 1); and when there is no positive (an empty split: no real-looking 0).
///
/// Shapes: `pos: [P]`, `neg: [P * k]` row-major (`neg[i*k..(i+1)*k]` belong to `pos[i]`).
///
/// # Panics
/// If `neg.len() != pos.len() * k`.
pub fn rank_metrics(pos: &[f32], neg: &[f32], k: usize) -> RankMetrics {
    assert_eq!(neg.len(), pos.len() * k, "negatives must be [P * k]");
    if pos.is_empty() || any_nan(pos) || any_nan(neg) {
        return RankMetrics {
            mrr: f64::NAN,
            hits_at_1: f64::NAN,
            hits_at_10: f64::NAN,
            hits_at_50: f64::NAN,
            hits_at_100: f64::NAN,
            count: pos.len(),
        };
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

/// Fraction of positives ranked within the top `top` against their own negatives, with
/// [`rank_metrics`]'s ranks (ties count half): OGB's Hits@K for any K.
/// Shapes as [`rank_metrics`]; NaN (undefined) for no positives and when a score is NaN.
///
/// # Panics
/// If `neg.len() != pos.len() * k`.
pub fn hits_at(pos: &[f32], neg: &[f32], k: usize, top: usize) -> f64 {
    assert_eq!(neg.len(), pos.len() * k, "negatives must be [P * k]");
    if pos.is_empty() || any_nan(pos) || any_nan(neg) {
        return f64::NAN;
    }
    let hit = pos
        .iter()
        .enumerate()
        .filter(|&(i, &p)| {
            let row = &neg[i * k..(i + 1) * k];
            let greater = row.iter().filter(|&&n| n > p).count();
            let ties = row.iter().filter(|&&n| n == p).count();
            1.0 + greater as f64 + ties as f64 / 2.0 <= top as f64
        })
        .count();
    hit as f64 / pos.len() as f64
}

/// Whether any value is NaN (a diverged model's scores).
fn any_nan(x: &[f32]) -> bool {
    x.iter().any(|v| v.is_nan())
}

/// Index of the largest value of `row` (the first on ties).
fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for c in 1..row.len() {
        if row[c] > row[best] {
            best = c;
        }
    }
    best
}

/// Macro-averaged F1 of arg-max class predictions over the labelled `nodes` (label >= 0):
/// the mean of each class's F1 over the classes that occur among those nodes' labels or
/// predictions, as scikit-learn's `f1_score(y_true, y_pred, average="macro")` (a class
/// predicted but never true scores 0). `logits: [N, C]` row-major. 0 when no node is labelled.
pub fn macro_f1(logits: &[f32], num_classes: usize, labels: &[i32], nodes: &[u32]) -> f64 {
    let c = num_classes;
    let (mut tp, mut fp, mut fneg) = (vec![0usize; c], vec![0usize; c], vec![0usize; c]);
    for &v in nodes {
        let y = labels[v as usize];
        if y < 0 {
            continue;
        }
        let pred = argmax(&logits[v as usize * c..(v as usize + 1) * c]);
        if pred == y as usize {
            tp[pred] += 1;
        } else {
            fp[pred] += 1;
            fneg[y as usize] += 1;
        }
    }
    let present: Vec<usize> = (0..c).filter(|&j| tp[j] + fp[j] + fneg[j] > 0).collect();
    if present.is_empty() {
        return 0.0;
    }
    present
        .iter()
        .map(|&j| 2.0 * tp[j] as f64 / (2 * tp[j] + fp[j] + fneg[j]) as f64)
        .sum::<f64>()
        / present.len() as f64
}

/// Area under the ROC curve of `scores` for the binary truth `positive`, exact: the
/// Mann-Whitney U statistic over all (positive, negative) pairs, a tie counting 1/2 (average
/// ranks), which is what scikit-learn's `roc_auc_score` computes. NaN when either class is
/// absent or a score is NaN (undefined).
pub fn roc_auc(scores: &[f64], positive: &[bool]) -> f64 {
    assert_eq!(scores.len(), positive.len(), "one truth per score");
    let n_pos = positive.iter().filter(|&&p| p).count();
    let n_neg = positive.len() - n_pos;
    if n_pos == 0 || n_neg == 0 || scores.iter().any(|s| s.is_nan()) {
        return f64::NAN;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    // sum of the (1-based, tie-averaged) ranks of the positives
    let mut rank_sum = 0f64;
    let mut i = 0;
    while i < order.len() {
        let mut j = i + 1;
        while j < order.len() && scores[order[j]] == scores[order[i]] {
            j += 1;
        }
        let avg_rank = (i + 1 + j) as f64 / 2.0;
        let pos_in_tie = order[i..j].iter().filter(|&&k| positive[k]).count();
        rank_sum += avg_rank * pos_in_tie as f64;
        i = j;
    }
    let u = rank_sum - (n_pos as f64) * (n_pos as f64 + 1.0) / 2.0;
    u / (n_pos as f64 * n_neg as f64)
}

/// ROC-AUC of a 2-class node classifier over the labelled `nodes`: class 1 is the positive
/// class, scored by `logit[1] - logit[0]` (in f64; the softmax probability of class 1 is an
/// increasing function of it, so the ranking, and the AUC, are the same). `logits: [N, 2]`
/// row-major. NaN when the nodes do not hold both classes.
pub fn binary_roc_auc(logits: &[f32], labels: &[i32], nodes: &[u32]) -> f64 {
    let (mut scores, mut truth) = (Vec::new(), Vec::new());
    for &v in nodes {
        let y = labels[v as usize];
        if y < 0 {
            continue;
        }
        let r = v as usize * 2;
        scores.push(logits[r + 1] as f64 - logits[r] as f64);
        truth.push(y == 1);
    }
    roc_auc(&scores, &truth)
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
            labels[v as usize] == argmax(row) as i32
        })
        .count();
    correct as f64 / nodes.len() as f64
}

/// Micro-averaged F1 for multi-label prediction (a label is predicted when its logit > 0).
/// `logits: [N, L]`, `targets: [N, L]` (0/1), both row-major; only rows in `nodes` count.
pub fn micro_f1(logits: &[f32], targets: &[u8], num_labels: usize, nodes: &[u32]) -> f64 {
    multilabel_threshold_f1(logits, targets, num_labels, nodes).0
}

/// Micro- and macro-averaged F1 for multi-label prediction thresholded at logit 0
/// (probability 0.5): a label is predicted when its logit > 0. Macro-F1 is the mean over all
/// `num_labels` labels of each label's F1 (0 for a label neither present nor predicted, as
/// [`multilabel_topk_f1`]). Shapes as [`micro_f1`]. Returns `(micro, macro)`.
pub fn multilabel_threshold_f1(
    logits: &[f32],
    targets: &[u8],
    num_labels: usize,
    nodes: &[u32],
) -> (f64, f64) {
    let l = num_labels;
    let (mut tp, mut fp, mut fneg) = (vec![0usize; l], vec![0usize; l], vec![0usize; l]);
    for &v in nodes {
        let r = v as usize * l;
        for j in 0..l {
            match (logits[r + j] > 0.0, targets[r + j] != 0) {
                (true, true) => tp[j] += 1,
                (true, false) => fp[j] += 1,
                (false, true) => fneg[j] += 1,
                _ => {}
            }
        }
    }
    f1_micro_macro(&tp, &fp, &fneg)
}

/// Micro- and macro-F1 from per-label counts (macro: mean over every label, 0 for a label
/// without a true positive).
fn f1_micro_macro(tp: &[usize], fp: &[usize], fneg: &[usize]) -> (f64, f64) {
    let f1 = |tp: usize, fp: usize, fneg: usize| {
        if tp == 0 {
            0.0
        } else {
            2.0 * tp as f64 / (2 * tp + fp + fneg) as f64
        }
    };
    let sum = |x: &[usize]| x.iter().sum::<usize>();
    let micro = f1(sum(tp), sum(fp), sum(fneg));
    let l = tp.len();
    let macro_ = if l == 0 {
        0.0
    } else {
        (0..l).map(|j| f1(tp[j], fp[j], fneg[j])).sum::<f64>() / l as f64
    };
    (micro, macro_)
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
    f1_micro_macro(&tp, &fp, &fneg)
}

/// Accuracy of always predicting the most frequent class among the labelled `train` nodes
/// (ties: the lower class), over the labelled `nodes`: the floor a classifier must beat. 0 when
/// `train` has no labelled node; NaN (undefined) when `nodes` has none (an empty split).
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
        return f64::NAN;
    }
    labelled.iter().filter(|&&y| y == major as i32).count() as f64 / labelled.len() as f64
}

/// Positives of a link split whose endpoints [`evaluate_with`] lists at once (with OGB's 1000
/// negatives each, about 513,000 ids): a split of at most this many numbers its endpoints in
/// order of first appearance; a bigger one collects them in a bitset and lists them chunk by
/// chunk. The outputs themselves are computed once for the whole split and read in pieces
/// within half of [`InferOptions::memory_budget`].
pub const LINK_EVAL_CHUNK: usize = 512;

/// Evaluates `params` on the validation or test split with the default [`InferOptions`]
/// (exact inference, restricted to what the split needs where that is cheaper):
/// [`evaluate_with`].
pub fn evaluate(model: &Model, params: &ParamSet, prep: &Prepared, split: Split) -> EvalResult {
    evaluate_with(model, params, prep, split, &InferOptions::default())
}

/// Evaluates `params` on the validation or test split: the model's outputs on the nodes the
/// split reads (the split's nodes; the endpoints of its positives and their negatives), by
/// [`infer_nodes`] on the evaluation graph (`prep.graph`) as `opts` says, then MRR/Hits@K
/// against the fixed negatives (link) or accuracy, macro-F1, ROC-AUC (2 classes) / top-k and
/// thresholded F1 (multi-label) over the split's labelled nodes (node). The primary metric is
/// `prep.metric` (`auto` resolved for the task). Validation reads only `prep.val_subset` of
/// its nodes / positives when that is set (`--eval-max-nodes`); the test split is read whole.
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
    let metric = prep.metric.resolve(prep.eval.target_kind());
    let mut all = BTreeMap::new();
    match &prep.eval {
        // negatives shared by every positive (OGB's ogbl-collab, ppa, ddi): Hits@K as OGB
        EvalData::Link { split: ls }
            if ls.protocol.as_ref().is_some_and(|p| p.shared.is_some()) =>
        {
            all.extend(evaluate_shared(
                model, params, prep, ls, split, opts, metric,
            ));
        }
        EvalData::Link { split: ls } => {
            let k = ls.num_neg;
            // validation: the fixed subset of positives (`Prepared::cap_validation`), each
            // with its own `k` negatives
            let subset: (Vec<(u32, u32)>, Vec<u32>);
            let (pos, neg): (&[(u32, u32)], &[u32]) = match (split, &prep.val_subset) {
                (Split::Val, None) => (&ls.val_pos, &ls.val_neg),
                (Split::Val, Some(at)) => {
                    subset = (
                        at.iter().map(|&i| ls.val_pos[i as usize]).collect(),
                        at.iter()
                            .flat_map(|&i| &ls.val_neg[i as usize * k..(i as usize + 1) * k])
                            .copied()
                            .collect(),
                    );
                    (&subset.0, &subset.1)
                }
                (Split::Test, _) => (&ls.test_pos, &ls.test_neg),
            };
            // the outputs of every distinct endpoint of the split (sources, destinations,
            // negatives) are computed once ([`infer_rows`], the way `opts` says: in memory,
            // or mapped from scratch files when they do not fit the budget); the positives are
            // then scored in chunks of LINK_EVAL_CHUNK, each in pieces whose rows fit half the
            // budget, and the scores of all chunks are ranked together. A split of at most
            // LINK_EVAL_CHUNK positives (every split tma makes in memory: --eval-max-edges
            // 500) numbers its endpoints in order of first appearance, as one chunk always
            // did; a bigger one (stored with a big graph: the whole test split) in id order,
            // found by binary search.
            let d = model.out_dim();
            let chunk_ends = |chunk: &[(u32, u32)], cneg: &[u32]| -> Vec<u32> {
                let mut ends: Vec<u32> = chunk.iter().map(|p| p.0).collect();
                ends.extend(chunk.iter().map(|p| p.1));
                ends.extend_from_slice(cneg);
                ends
            };
            let (uniq, first_local) = if pos.len() <= LINK_EVAL_CHUNK {
                let (uniq, local) = unique_with_inverse(&chunk_ends(pos, neg));
                (uniq, Some(local))
            } else {
                (distinct_sorted(prep.graph.num_nodes(), pos, neg), None)
            };
            let (table, _) = infer_rows(
                model,
                params,
                &prep.graph,
                &prep.degrees,
                &prep.features,
                &uniq,
                opts,
            );
            let mut pos_scores = Vec::with_capacity(pos.len());
            let mut neg_scores = Vec::with_capacity(neg.len());
            let mut score = |h: &tma_nn::Mat, src: &[u32], dst: &[u32], negl: &[u32]| {
                pos_scores.extend(model.score(params, h, src, dst));
                let mut nsrc = Vec::with_capacity(negl.len());
                for &s in src {
                    nsrc.extend(std::iter::repeat_n(s, k));
                }
                neg_scores.extend(model.score(params, h, &nsrc, negl));
            };
            // positives per piece: their rows and their negatives' fit half the budget
            let per =
                (opts.memory_budget / 2 / ((k as u64 + 2) * d as u64 * 4).max(1)).max(1) as usize;
            if let (Some(local), false, true) = (&first_local, table.is_mapped(), per >= pos.len())
            {
                // one piece: the table itself
                let tma_graph::Features::Dense { data, .. } = table else {
                    unreachable!("dense rows")
                };
                let h = tma_nn::Mat {
                    rows: uniq.len(),
                    cols: d,
                    data: data.into_vec(),
                };
                let (src, rest) = local.split_at(pos.len());
                let (dst, negl) = rest.split_at(pos.len());
                score(&h, src, dst, negl);
            } else {
                let mut got = tma_graph::Features::Dense {
                    num_nodes: 0,
                    dim: d,
                    data: Vec::new().into(),
                };
                for (c, chunk) in pos.chunks(LINK_EVAL_CHUNK).enumerate() {
                    let first = c * LINK_EVAL_CHUNK;
                    let cneg = &neg[first * k..(first + chunk.len()) * k];
                    // rows of the table: by first appearance (one chunk) or by id
                    let at: Vec<u32> = match &first_local {
                        Some(local) => local.clone(),
                        None => chunk_ends(chunk, cneg)
                            .iter()
                            .map(|v| {
                                uniq.binary_search(v).expect("an endpoint of the split") as u32
                            })
                            .collect(),
                    };
                    let (src, rest) = at.split_at(chunk.len());
                    let (dst, negl) = rest.split_at(chunk.len());
                    for a in (0..chunk.len()).step_by(per) {
                        let b = (a + per).min(chunk.len());
                        let mut idx: Vec<u32> = src[a..b].to_vec();
                        idx.extend_from_slice(&dst[a..b]);
                        idx.extend_from_slice(&negl[a * k..b * k]);
                        let (rows, local) = unique_with_inverse(&idx);
                        // mapped rows: gathered in row order, released as copied
                        table.gather_releasing(&rows, &mut got);
                        let empty = tma_graph::Features::Dense {
                            num_nodes: 0,
                            dim: d,
                            data: Vec::new().into(),
                        };
                        let tma_graph::Features::Dense { data, .. } =
                            std::mem::replace(&mut got, empty)
                        else {
                            unreachable!("dense rows")
                        };
                        let h = tma_nn::Mat {
                            rows: rows.len(),
                            cols: d,
                            data: data.into_vec(),
                        };
                        let (ls, rest) = local.split_at(b - a);
                        let (ld, ln) = rest.split_at(b - a);
                        score(&h, ls, ld, ln);
                    }
                }
            }
            all.extend(link_metrics(&pos_scores, &neg_scores, k, metric));
            if ls.protocol.is_some() {
                // a dataset's MRR protocol (ogbl-citation2) also reports hits@3
                all.insert("hits@3".into(), hits_at(&pos_scores, &neg_scores, k, 3));
            }
        }
        EvalData::Node { split: ns, targets } => {
            // validation: the fixed subset of its nodes (`Prepared::cap_validation`)
            let subset: Vec<u32>;
            let split_nodes = match (split, &prep.val_subset) {
                (Split::Val, None) => &ns.val,
                (Split::Val, Some(at)) => {
                    subset = at.iter().map(|&i| ns.val[i as usize]).collect();
                    &subset
                }
                (Split::Test, _) => &ns.test,
            };
            // logits of the split's distinct nodes; `nodes` and the targets below are local
            let (h, uniq, local) = infer(split_nodes);
            let local_targets = match targets {
                NodeTargets::Classes { y, num_classes } => NodeTargets::Classes {
                    y: uniq.iter().map(|&v| y[v as usize]).collect(),
                    num_classes: *num_classes,
                },
                NodeTargets::MultiLabel { y, num_labels } => {
                    let l = *num_labels;
                    let mut y_local = Vec::with_capacity(uniq.len() * l);
                    for &v in &uniq {
                        y_local.extend_from_slice(&y[v as usize * l..(v as usize + 1) * l]);
                    }
                    NodeTargets::MultiLabel {
                        y: y_local,
                        num_labels: l,
                    }
                }
            };
            all.extend(node_metrics(&h.data, &local_targets, &[], &local));
            // the majority class is the training nodes', which the local rows do not hold
            if let NodeTargets::Classes { y, num_classes } = targets {
                all.insert(
                    "majority_rate".into(),
                    majority_rate(y, *num_classes, &ns.train, split_nodes),
                );
            }
        }
    }
    EvalResult {
        metric: String::new(),
        value: f64::NAN,
        all,
    }
    .select(metric)
}

/// The distinct endpoints of `pos` and of `neg` (node ids below `n`), ascending: one bit per
/// node while they are collected (`n / 8` bytes), not a hash map of every endpoint.
fn distinct_sorted(n: usize, pos: &[(u32, u32)], neg: &[u32]) -> Vec<u32> {
    let mut mark = vec![0u64; n.div_ceil(64)];
    let ends = pos
        .iter()
        .flat_map(|&(u, v)| [u, v])
        .chain(neg.iter().copied());
    for v in ends {
        mark[v as usize / 64] |= 1 << (v % 64);
    }
    let mut out = Vec::new();
    for (w, &bits) in mark.iter().enumerate() {
        let mut b = bits;
        while b != 0 {
            out.push((w * 64) as u32 + b.trailing_zeros());
            b &= b - 1;
        }
    }
    out
}

/// Every link-prediction metric of positives `pos` each ranked against its `k` negatives
/// (`neg: [P * k]`): `mrr`, `hits@1`, `hits@10`, `hits@50`, `hits@100`, and `hits@K` when
/// `metric` is Hits@K for another K.
pub fn link_metrics(pos: &[f32], neg: &[f32], k: usize, metric: Metric) -> BTreeMap<String, f64> {
    let m = rank_metrics(pos, neg, k);
    let mut all = BTreeMap::from([
        ("mrr".to_string(), m.mrr),
        ("hits@1".to_string(), m.hits_at_1),
        ("hits@10".to_string(), m.hits_at_10),
        ("hits@50".to_string(), m.hits_at_50),
        ("hits@100".to_string(), m.hits_at_100),
    ]);
    if let Metric::HitsAt(top) = metric {
        all.entry(format!("hits@{top}"))
            .or_insert_with(|| hits_at(pos, neg, k, top));
    }
    all
}

/// The scores of `pairs` (`(u, v)`, global ids), in their order, [`LINK_EVAL_CHUNK`] pairs at
/// a time: the endpoints' rows of `everyone` (every node's outputs, `[N, out_dim]`) when
/// given, else the model's outputs on them by [`infer_nodes`] on `prep.graph` as `opts`
/// says; then the decoder.
fn score_pairs(
    model: &Model,
    params: &ParamSet,
    prep: &Prepared,
    pairs: &[(u32, u32)],
    opts: &InferOptions,
    everyone: Option<&tma_graph::Buf<f32>>,
) -> Vec<f32> {
    let mut out = Vec::with_capacity(pairs.len());
    let d = model.out_dim();
    for chunk in pairs.chunks(LINK_EVAL_CHUNK) {
        let mut ends: Vec<u32> = chunk.iter().map(|p| p.0).collect();
        ends.extend(chunk.iter().map(|p| p.1));
        let (uniq, local) = unique_with_inverse(&ends);
        let h = match everyone {
            Some(rows) => {
                let mut data = Vec::with_capacity(uniq.len() * d);
                for &v in &uniq {
                    data.extend_from_slice(&rows[v as usize * d..(v as usize + 1) * d]);
                }
                tma_nn::Mat {
                    rows: uniq.len(),
                    cols: d,
                    data,
                }
            }
            None => {
                infer_nodes(
                    model,
                    params,
                    &prep.graph,
                    &prep.degrees,
                    &prep.features,
                    &uniq,
                    opts,
                )
                .0
            }
        };
        let (src, dst) = local.split_at(chunk.len());
        out.extend(model.score(params, &h, src, dst));
    }
    out
}

/// Evaluates a link split whose negatives are shared by every positive (a dataset's protocol,
/// OGB's `edge_neg`: `ls.protocol.shared`): the scores of the split's positives (validation:
/// `prep.val_subset` of them when set) and of all its shared negatives (through every node's
/// outputs computed once when they are more than one chunk, as the per-source path), then
/// [`shared_link_metrics`].
fn evaluate_shared(
    model: &Model,
    params: &ParamSet,
    prep: &Prepared,
    ls: &tma_graph::LinkSplit,
    split: Split,
    opts: &InferOptions,
    metric: Metric,
) -> BTreeMap<String, f64> {
    let shared = ls
        .protocol
        .as_ref()
        .and_then(|p| p.shared.as_ref())
        .expect("a split with shared negatives");
    let subset: Vec<(u32, u32)>;
    let (pos, neg) = match (split, &prep.val_subset) {
        (Split::Val, None) => (&ls.val_pos[..], &shared.val[..]),
        (Split::Val, Some(at)) => {
            subset = at.iter().map(|&i| ls.val_pos[i as usize]).collect();
            (&subset[..], &shared.val[..])
        }
        (Split::Test, _) => (&ls.test_pos[..], &shared.test[..]),
    };
    // more than one chunk of pairs: every node's outputs once, layer-wise into a mapped
    // scratch file (as the per-source path does for a big split), each chunk reads its rows
    let everyone = (pos.len() + neg.len() > LINK_EVAL_CHUNK
        && !matches!(opts.mode, crate::evaluation::infer::InferMode::Sampled(_)))
    .then(|| {
        crate::evaluation::infer::infer_all_to_file(
            model,
            params,
            &prep.graph,
            &prep.degrees,
            &prep.features,
            opts,
        )
        .ok()
    })
    .flatten();
    let pos_scores = score_pairs(model, params, prep, pos, opts, everyone.as_ref());
    let neg_scores = score_pairs(model, params, prep, neg, opts, everyone.as_ref());
    shared_link_metrics(&pos_scores, &neg_scores, metric)
}

/// OGB's Hits@K against negatives shared by every positive
/// (`ogb.linkproppred.Evaluator._eval_hits`): the K-th highest negative score
/// `kth = topk(neg, K)[-1]`, then the fraction of positives scoring strictly above it; 1.0
/// when there are fewer than K negatives (OGB's rule), NaN (undefined) for no positives and
/// when a score is NaN (a diverged model). Shapes: `pos: [P]`, `neg: [M]`.
///
/// # Panics
/// If `k == 0`.
pub fn hits_at_shared(pos: &[f32], neg: &[f32], k: usize) -> f64 {
    assert!(k >= 1, "Hits@K needs K >= 1");
    if any_nan(pos) || any_nan(neg) {
        return f64::NAN;
    }
    if neg.len() < k {
        return 1.0;
    }
    if pos.is_empty() {
        return f64::NAN;
    }
    let mut sorted = neg.to_vec();
    sorted.sort_unstable_by(|a, b| b.total_cmp(a));
    let kth = sorted[k - 1];
    pos.iter().filter(|&&p| p > kth).count() as f64 / pos.len() as f64
}

/// Every metric of positives `pos: [P]` against negatives shared by all of them `neg: [M]`
/// ([`hits_at_shared`]): `hits@10`, `hits@20`, `hits@50`, `hits@100`, and `hits@K` of
/// `metric` when it is Hits@K for another K. (MRR is not defined for shared negatives.)
pub fn shared_link_metrics(pos: &[f32], neg: &[f32], metric: Metric) -> BTreeMap<String, f64> {
    let mut ks = vec![10, 20, 50, 100];
    if let Metric::HitsAt(k) = metric {
        ks.push(k);
    }
    ks.into_iter()
        .map(|k| (format!("hits@{k}"), hits_at_shared(pos, neg, k)))
        .collect()
}

/// OGB's MRR protocol on per-source negatives (`ogb.linkproppred.Evaluator._eval_mrr`, as
/// ogbl-citation2 reports it): rank = `0.5 * (#neg > pos + #neg >= pos) + 1`, the mean of
/// `1 / rank` (`mrr`) and the fractions with rank <= 1, 3, 10 (`hits@1`, `hits@3`,
/// `hits@10`), i.e. [`rank_metrics`]'s ranks. Shapes: `pos: [P]`, `neg: [P * k]` row-major.
///
/// # Panics
/// If `neg.len() != pos.len() * k`.
pub fn ogb_mrr_metrics(pos: &[f32], neg: &[f32], k: usize) -> BTreeMap<String, f64> {
    let m = rank_metrics(pos, neg, k);
    BTreeMap::from([
        ("mrr".to_string(), m.mrr),
        ("hits@1".to_string(), m.hits_at_1),
        ("hits@3".to_string(), hits_at(pos, neg, k, 3)),
        ("hits@10".to_string(), m.hits_at_10),
    ])
}

/// Every node-classification metric of `logits: [N, C or L]` over `nodes` (rows indexed by
/// node id; `train` gives the majority class). Classes: `accuracy`, `macro_f1`,
/// `majority_rate`, and `roc_auc` for 2 classes. Multi-label: `micro_f1` and `macro_f1` of
/// each node's top-k labels, `micro_f1_at_logit0` and `macro_f1_at_logit0` thresholded.
/// Every metric is NaN (undefined) when `nodes` holds no labelled node (an empty split: no
/// real-looking 0).
pub fn node_metrics(
    logits: &[f32],
    targets: &NodeTargets,
    train: &[u32],
    nodes: &[u32],
) -> BTreeMap<String, f64> {
    let mut all = BTreeMap::new();
    // a NaN logit on an evaluated row (a diverged model): every metric of the model is
    // undefined (arg-max would read NaN rows as class 0, i.e. the class-0 rate)
    let width = match targets {
        NodeTargets::Classes { num_classes, .. } => *num_classes,
        NodeTargets::MultiLabel { num_labels, .. } => *num_labels,
    };
    let diverged = nodes
        .iter()
        .any(|&v| any_nan(&logits[v as usize * width..(v as usize + 1) * width]));
    let unlabelled = match targets {
        NodeTargets::Classes { y, .. } => nodes.iter().all(|&v| y[v as usize] < 0),
        NodeTargets::MultiLabel { .. } => nodes.is_empty(),
    };
    match targets {
        NodeTargets::Classes { y, num_classes } => {
            let c = *num_classes;
            all.insert("accuracy".into(), accuracy(logits, c, y, nodes));
            all.insert("macro_f1".into(), macro_f1(logits, c, y, nodes));
            all.insert("majority_rate".into(), majority_rate(y, c, train, nodes));
            if c == 2 {
                all.insert("roc_auc".into(), binary_roc_auc(logits, y, nodes));
            }
        }
        NodeTargets::MultiLabel { y, num_labels } => {
            let (micro, macro_) = multilabel_topk_f1(logits, y, *num_labels, nodes);
            let (micro0, macro0) = multilabel_threshold_f1(logits, y, *num_labels, nodes);
            all.insert("micro_f1".into(), micro);
            all.insert("macro_f1".into(), macro_);
            all.insert("micro_f1_at_logit0".into(), micro0);
            all.insert("macro_f1_at_logit0".into(), macro0);
        }
    }
    if diverged || unlabelled {
        for (name, v) in all.iter_mut() {
            if name != "majority_rate" || unlabelled {
                *v = f64::NAN;
            }
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TargetKind;

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
    fn nan_scores_make_every_model_metric_undefined() {
        // regression: a model diverged to NaN (`--weight-decay inf`) read as MRR 1 and Hits@K 1
        // (a NaN negative is neither above nor equal to the positive), and was kept as best
        let pos = [f32::NAN, f32::NAN];
        let neg = [f32::NAN; 6];
        let m = rank_metrics(&pos, &neg, 3);
        assert!(m.mrr.is_nan() && m.hits_at_1.is_nan() && m.hits_at_100.is_nan());
        assert_eq!(m.count, 2);
        // one NaN among the negatives is enough
        let m = rank_metrics(&[0.9, 0.1], &[0.1, 0.2, f32::NAN, 0.5, 0.1, 0.7], 3);
        assert!(m.mrr.is_nan());
        assert!(hits_at(&[0.9], &[f32::NAN, 0.2, 0.3], 3, 2).is_nan());
        let all = link_metrics(&pos, &neg, 3, Metric::HitsAt(3));
        assert!(all.values().all(|v| v.is_nan()), "{all:?}");
        // node classification: NaN logits on an evaluated row; the majority rate stays
        let logits = [1.0f32, 0.0, f32::NAN, f32::NAN, 5.0, 1.0];
        let t = NodeTargets::Classes {
            y: vec![0, 1, 0],
            num_classes: 2,
        };
        let all = node_metrics(&logits, &t, &[0, 2], &[0, 1, 2]);
        for k in ["accuracy", "macro_f1", "roc_auc"] {
            assert!(all[k].is_nan(), "{k}: {all:?}");
        }
        assert!((all["majority_rate"] - 2.0 / 3.0).abs() < 1e-12);
        // the NaN row not evaluated: defined
        let all = node_metrics(&logits, &t, &[0, 2], &[0, 2]);
        assert_eq!(all["accuracy"], 1.0);
        let ml = NodeTargets::MultiLabel {
            y: vec![1, 0, 0, 1],
            num_labels: 2,
        };
        let all = node_metrics(&[f32::NAN, 0.0, 0.0, 1.0], &ml, &[], &[0, 1]);
        assert!(all.values().all(|v| v.is_nan()), "{all:?}");
        // and such a value never replaces a defined best
        assert!(!improves(f64::NAN, Some(0.1)));
    }

    #[test]
    fn an_empty_split_makes_every_metric_undefined() {
        // regression (issue 31): an empty test split (`tma generate --split 0.6,0.4,0`) was
        // reported as accuracy 0.0000, a real-looking value
        let t = NodeTargets::Classes {
            y: vec![0, 1, -1],
            num_classes: 2,
        };
        let logits = [1.0f32, 0.0, 0.0, 2.0, 5.0, 1.0];
        for nodes in [&[][..], &[2][..]] {
            let all = node_metrics(&logits, &t, &[0, 1], nodes);
            assert_eq!(all.len(), 4, "{all:?}");
            assert!(all.values().all(|v| v.is_nan()), "{nodes:?}: {all:?}");
        }
        // one labelled node: defined (node 0 predicted 0, label 0; majority class 0)
        let all = node_metrics(&logits, &t, &[0, 1], &[0, 2]);
        assert_eq!(
            (all["accuracy"], all["majority_rate"]),
            (1.0, 1.0),
            "{all:?}"
        );
        let ml = NodeTargets::MultiLabel {
            y: vec![1, 0],
            num_labels: 2,
        };
        let all = node_metrics(&[1.0, 0.0], &ml, &[0], &[]);
        assert!(all.values().all(|v| v.is_nan()), "{all:?}");
        // link prediction without positives
        let m = rank_metrics(&[], &[], 3);
        assert!(m.mrr.is_nan() && m.hits_at_1.is_nan() && m.hits_at_100.is_nan());
        assert_eq!(m.count, 0);
        assert!(hits_at(&[], &[], 3, 2).is_nan());
        let all = link_metrics(&[], &[], 3, Metric::HitsAt(20));
        assert_eq!(all.len(), 6);
        assert!(all.values().all(|v| v.is_nan()), "{all:?}");
        assert!(ogb_mrr_metrics(&[], &[], 3).values().all(|v| v.is_nan()));
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
        // no labelled evaluated node (an empty split): undefined, not a real-looking 0
        assert!(majority_rate(&y, 3, &train, &[5, 9]).is_nan());
        assert!(majority_rate(&y, 3, &train, &[]).is_nan());
    }
    // The expected values below were computed once with scikit-learn 1.9.1
    // (`roc_auc_score`, `f1_score`) on the same generated inputs.

    #[test]
    fn roc_auc_exact_with_ties() {
        // by hand: 3 of 4 (positive, negative) pairs ordered right
        assert_eq!(
            roc_auc(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]),
            0.75
        );
        // positives {0.5, 0.9, 0.5}, negatives {0.5, 0.2}: 4 pairs won, 2 tied (1/2 each) of 6
        let t = [true, false, false, true, true];
        let a = roc_auc(&[0.5, 0.5, 0.2, 0.9, 0.5], &t);
        assert!((a - 5.0 / 6.0).abs() < 1e-15, "{a}");
        // all scores equal: every pair tied -> 0.5; reversed order -> 0
        assert_eq!(roc_auc(&[1.0; 5], &t), 0.5);
        assert_eq!(roc_auc(&[1.0, 2.0], &[true, false]), 0.0);
        // one class only, or a NaN score: undefined
        assert!(roc_auc(&[0.1, 0.2], &[true, true]).is_nan());
        assert!(roc_auc(&[0.1, f64::NAN], &[true, false]).is_nan());
        // 200 scores on 101 levels (many ties): scikit-learn's roc_auc_score
        let n = 200usize;
        let s: Vec<f64> = (0..n).map(|i| ((i * 37) % 101) as f64 / 10.0).collect();
        let t: Vec<bool> = (0..n).map(|i| (i * i * 13 + 7) % 5 < 2).collect();
        assert!((roc_auc(&s, &t) - 0.50109375).abs() < 1e-12);
    }

    #[test]
    fn binary_roc_auc_scores_by_logit_difference() {
        // 50 nodes, every 10th unlabelled; integer logits make exact ties of l1 - l0, which
        // scikit-learn gets from the difference (or a sigmoid of it); a softmax computed as
        // exp(l1) / (exp(l0) + exp(l1)) breaks such ties by rounding (0.42333...)
        let n = 50usize;
        let mut logits = Vec::new();
        for v in 0..n {
            logits.push(((v * 5) % 9) as f32);
            logits.push(((v * v + 3) % 11) as f32);
        }
        let y: Vec<i32> = (0..n)
            .map(|v| {
                if v % 10 == 0 {
                    -1
                } else {
                    (((v * 7) % 3) % 2) as i32
                }
            })
            .collect();
        let nodes: Vec<u32> = (0..n as u32).collect();
        let a = binary_roc_auc(&logits, &y, &nodes);
        assert!((a - 0.42666666666666664).abs() < 1e-12, "{a}");
    }

    #[test]
    fn macro_f1_matches_scikit_learn() {
        // by hand: truth [0, 0, 1, 2], predictions [0, 1, 1, 1]: class 0 F1 2/3, class 1
        // (tp 1, fp 2) 1/2, class 2 (fn 1) 0 -> 7/18; class 3 (never seen) does not count
        let l = [
            1.0f32, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0,
        ];
        let m = macro_f1(&l, 4, &[0, 0, 1, 2], &[0, 1, 2, 3]);
        assert!((m - 7.0 / 18.0).abs() < 1e-15, "{m}");
        assert_eq!(macro_f1(&l, 4, &[-1, -1, -1, -1], &[0, 1]), 0.0);
        // 60 nodes, 4 classes, labels -1..=3, tied logits (first maximum wins, as numpy's)
        let (n, c) = (60usize, 4usize);
        let mut l = Vec::new();
        for v in 0..n {
            for k in 0..c {
                l.push(((v * 7 + k * 11 + v * k) % 13) as f32);
            }
        }
        let y: Vec<i32> = (0..n).map(|v| ((v * 3) % 5) as i32 - 1).collect();
        let nodes: Vec<u32> = (0..n as u32).collect();
        let m = macro_f1(&l, c, &y, &nodes);
        assert!((m - 0.24724601083296738).abs() < 1e-12, "{m}");
        assert_eq!(accuracy(&l, c, &y, &nodes), 0.25);
    }

    #[test]
    fn multilabel_thresholded_micro_and_macro_f1() {
        // 30 nodes, 5 labels; scikit-learn f1_score(average="micro"/"macro", zero_division=0)
        let (n, nl) = (30usize, 5usize);
        let mut l = Vec::new();
        let mut t = Vec::new();
        for v in 0..n {
            for j in 0..nl {
                l.push(((v * 3 + j * 7) % 9) as f32 - 5.0);
                t.push(((v + j * j) % 4 == 0) as u8);
            }
        }
        let nodes: Vec<u32> = (0..n as u32).collect();
        let (micro, macro_) = multilabel_threshold_f1(&l, &t, nl, &nodes);
        assert!((micro - 0.2727272727272727).abs() < 1e-12, "{micro}");
        assert!((macro_ - 0.273202614379085).abs() < 1e-12, "{macro_}");
        assert_eq!(micro_f1(&l, &t, nl, &nodes), micro);
    }

    #[test]
    fn hits_at_any_k_agrees_with_rank_metrics() {
        // ranks: 1, 3.5 (two above, one tie), 4
        let pos = [0.9f32, 0.1, 0.0];
        let neg = [0.1f32, 0.2, 0.3, 0.5, 0.1, 0.7, 0.5, 0.6, 0.7];
        let m = rank_metrics(&pos, &neg, 3);
        assert_eq!(hits_at(&pos, &neg, 3, 1), m.hits_at_1);
        assert_eq!(hits_at(&pos, &neg, 3, 10), m.hits_at_10);
        assert_eq!(hits_at(&pos, &neg, 3, 3), 1.0 / 3.0);
        assert_eq!(hits_at(&pos, &neg, 3, 4), 1.0);
        let all = link_metrics(&pos, &neg, 3, Metric::HitsAt(3));
        assert_eq!(all["hits@3"], 1.0 / 3.0);
        assert_eq!(all["mrr"], m.mrr);
        assert!(!link_metrics(&pos, &neg, 3, Metric::Mrr).contains_key("hits@3"));
    }

    #[test]
    fn selection_is_not_fooled_by_a_majority_class_plateau() {
        // issue 13 item 4: validation nodes 80% class 0. Round 1's model predicts class 0 for
        // every node (accuracy = the majority rate 0.8) and ranks nothing; round 2's ranks
        // well (ROC-AUC 0.9) but its arg-max misses some: accuracy 0.75 < 0.8.
        let y: Vec<i32> = (0..20).map(|v| (v >= 16) as i32).collect();
        let nodes: Vec<u32> = (0..20).collect();
        let train: Vec<u32> = (0..20).collect();
        let targets = NodeTargets::Classes {
            y: y.clone(),
            num_classes: 2,
        };
        let plateau: Vec<f32> = (0..20).flat_map(|_| [1.0f32, 0.0]).collect();
        // class-1 scores: positives 16..20 score 2, 2, 2, -1; negatives 0..16 score -2 except
        // nodes 0..4 at 0.5 (predicted 1: four false positives)
        let mut ranked = Vec::new();
        for v in 0..20 {
            let s = match v {
                16..=18 => 2.0f32,
                19 => -1.0,
                0..=3 => 0.5,
                _ => -2.0,
            };
            ranked.extend([0.0, s]);
        }
        let a = node_metrics(&plateau, &targets, &train, &nodes);
        let b = node_metrics(&ranked, &targets, &train, &nodes);
        assert_eq!(a["accuracy"], 0.8);
        assert_eq!(a["majority_rate"], 0.8);
        assert_eq!(a["roc_auc"], 0.5);
        assert_eq!(b["accuracy"], 0.75);
        // positive 19 (-1) beats the 12 negatives at -2 and loses to 4: 3*16 + 12 of 64 pairs
        assert_eq!(b["roc_auc"], 60.0 / 64.0);
        // macro-F1 sees through it too: the plateau scores F1 0 on class 1
        assert!(a["macro_f1"] < b["macro_f1"], "{a:?} {b:?}");
        // auto on 2 classes is ROC-AUC: round 2 replaces round 1 as the best model
        let metric = Metric::Auto.resolve(TargetKind::Classes(2));
        assert_eq!(metric, Metric::RocAuc);
        let pick = |m: &BTreeMap<String, f64>| {
            EvalResult {
                all: m.clone(),
                ..Default::default()
            }
            .select(metric)
            .value
        };
        assert!(improves(pick(&b), Some(pick(&a))));
        assert!(!improves(pick(&a), Some(pick(&b))));
        // selected by accuracy (--metric accuracy) the plateau would win
        assert!(!improves(b["accuracy"], Some(a["accuracy"])));
    }

    #[test]
    fn improves_prefers_defined_values_and_keeps_the_earliest_on_a_plateau() {
        assert!(improves(f64::NAN, None));
        assert!(improves(0.1, Some(f64::NAN)));
        assert!(!improves(f64::NAN, Some(0.1)));
        assert!(!improves(f64::NAN, Some(f64::NAN)));
        assert!(!improves(0.5, Some(0.5)));
        assert!(improves(0.5000001, Some(0.5)));
    }

    #[test]
    fn select_reads_the_metric_from_all() {
        let r = EvalResult {
            metric: "mrr".into(),
            value: 0.2,
            all: BTreeMap::from([("mrr".into(), 0.2), ("hits@50".into(), 0.7)]),
        };
        let h = r.clone().select(Metric::HitsAt(50));
        assert_eq!((h.metric.as_str(), h.value), ("hits@50", 0.7));
        let missing = r.select(Metric::HitsAt(20));
        assert_eq!(missing.metric, "hits@20");
        assert!(missing.value.is_nan());
    }
    #[test]
    fn check_metric_resolves_auto_and_refuses_an_undefined_roc_auc() {
        let node = |y: Vec<i32>, num_classes: usize| EvalData::Node {
            split: tma_graph::NodeSplit {
                train: vec![0, 1],
                val: vec![2, 3, 4],
                test: vec![5],
            },
            targets: NodeTargets::Classes { y, num_classes },
        };
        let ok = node(vec![0, 1, 0, 1, -1, 1], 2);
        assert_eq!(
            ok.check_metric(Metric::Auto, 1000).unwrap(),
            (Metric::RocAuc, None)
        );
        assert_eq!(
            ok.check_metric(Metric::Accuracy, 1000).unwrap(),
            (Metric::Accuracy, None)
        );
        // validation nodes 2, 3, 4: class 0, class 0, unlabelled -> ROC-AUC undefined
        let one_class = node(vec![0, 1, 0, 0, -1, 1], 2);
        // regression (issue 29): `auto` refused here; it falls back to accuracy, said in a line
        assert_eq!(
            one_class.check_metric(Metric::Auto, 1000).unwrap(),
            (
                Metric::Accuracy,
                Some("metric auto: the validation nodes hold only class 0 (2 labelled), so ROC-AUC (auto's metric for 2 classes) is undefined; accuracy selects the model instead".to_string())
            )
        );
        // a requested roc_auc is still refused
        assert_eq!(
            one_class
                .check_metric(Metric::RocAuc, 1000)
                .unwrap_err()
                .to_string(),
            "invalid configuration: metric roc_auc: the validation nodes hold only class 0 (2 labelled), so ROC-AUC is undefined; use --metric accuracy"
        );
        assert_eq!(
            one_class.check_metric(Metric::Accuracy, 1000).unwrap(),
            (Metric::Accuracy, None)
        );
        let three = node(vec![0, 1, 2, 0, 1, 2], 3);
        assert_eq!(
            three.check_metric(Metric::Auto, 1000).unwrap(),
            (Metric::Accuracy, None)
        );
        assert!(three
            .check_metric(Metric::RocAuc, 1000)
            .unwrap_err()
            .to_string()
            .contains("ROC-AUC is defined for 2 classes"));
    }

    /// OGB's Hits@K against shared negatives (`Evaluator._eval_hits`), by hand: negatives
    /// sorted 0.8, 0.6, 0.5, 0.4, 0.1; the K-th is the threshold, a positive counts when it
    /// is strictly above it; fewer than K negatives is 1.0.
    #[test]
    fn hits_at_shared_is_ogbs_hits_at_k() {
        let pos = [0.9f32, 0.5, 0.3, 0.7];
        let neg = [0.8f32, 0.6, 0.5, 0.1, 0.4];
        assert_eq!(hits_at_shared(&pos, &neg, 1), 0.25); // > 0.8: 0.9
        assert_eq!(hits_at_shared(&pos, &neg, 2), 0.5); // > 0.6: 0.9, 0.7
        assert_eq!(hits_at_shared(&pos, &neg, 3), 0.5); // > 0.5: 0.9, 0.7 (0.5 ties: no)
        assert_eq!(hits_at_shared(&pos, &neg, 4), 0.75); // > 0.4: 0.9, 0.5, 0.7
        assert_eq!(hits_at_shared(&pos, &neg, 5), 1.0); // > 0.1: all
        assert_eq!(hits_at_shared(&pos, &neg, 6), 1.0); // 5 negatives < 6: OGB's 1.0
        assert!(hits_at_shared(&[], &neg, 3).is_nan());
        assert!(hits_at_shared(&[f32::NAN], &neg, 3).is_nan());
        let all = shared_link_metrics(&pos, &neg, Metric::HitsAt(3));
        assert_eq!(
            all,
            BTreeMap::from([
                ("hits@3".to_string(), 0.5),
                ("hits@10".to_string(), 1.0),
                ("hits@20".to_string(), 1.0),
                ("hits@50".to_string(), 1.0),
                ("hits@100".to_string(), 1.0),
            ])
        );
    }

    /// OGB's MRR protocol (`Evaluator._eval_mrr`, ogbl-citation2) by hand: rank =
    /// 0.5 * (#neg > pos + #neg >= pos) + 1.
    #[test]
    fn ogb_mrr_metrics_are_ogbs_ranks() {
        // row 0: 0.9 > 0.5, 0.5 >= 0.5 -> 0.5 * (1 + 2) + 1 = 2.5; row 1: rank 1
        let pos = [0.5f32, 0.2];
        let neg = [0.9f32, 0.5, 0.1, 0.1, 0.0, -1.0];
        let m = ogb_mrr_metrics(&pos, &neg, 3);
        assert_eq!(
            m,
            BTreeMap::from([
                ("mrr".to_string(), (1.0 / 2.5 + 1.0) / 2.0),
                ("hits@1".to_string(), 0.5),
                ("hits@3".to_string(), 1.0),
                ("hits@10".to_string(), 1.0),
            ])
        );
        // tma's own ranking is the same rule
        let r = rank_metrics(&pos, &neg, 3);
        assert_eq!((r.mrr, r.hits_at_1), (0.7, 0.5));
        // all tied with 3 negatives: rank 0.5 * (0 + 3) + 1 = 2.5 for both
        let t = ogb_mrr_metrics(&[1.0, 1.0], &[1.0; 6], 3);
        assert_eq!((t["mrr"], t["hits@1"], t["hits@3"]), (0.4, 0.0, 1.0));
    }
}
