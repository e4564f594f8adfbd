//! What a run reports: one [`RoundRecord`] per averaging round, the final [`Summary`], the
//! [`Observer`] that receives rounds as they are validated, and where a resumed run continues
//! from ([`Resume`]).

use crate::evaluation::eval::EvalResult;
use crate::TrainError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;
use tma_nn::ParamSet;

/// The one-line warning (without the `warning: ` prefix) for a validated round (or check)
/// whose averaged model's metric is undefined because its outputs are NaN: the run diverged
/// (`eval`: NaN scores make every metric NaN; ROC-AUC is also undefined on one class, which
/// is not divergence). None for a defined value, an unvalidated round or ROC-AUC.
pub fn diverged_warning(r: &RoundRecord) -> Option<String> {
    (r.val.value.is_nan() && !r.val.metric.is_empty() && r.val.metric != "roc_auc").then(|| {
        format!(
            "{} {}: the averaged model's outputs are NaN (training diverged; lower --lr or --weight-decay): its validation metrics are undefined, and such a model is never kept as the best over one with a defined metric",
            if r.check { "check after round" } else { "round" },
            r.round
        )
    })
}

/// One line (without the `warning: ` prefix) for each trainer that took part in none of
/// `rounds` (the rounds of this run or resumed segment; checks aside) although it is not among
/// `failed` (`Summary::failed_trainers`): each of its answers came after the round it answered
/// had formed, on a host or link too slow for the schedule, so none of its training is in the
/// model. `num_trainers` trainers; `sync_every` and `round_timeout` (the run's) are named in
/// the advice. Empty when no round formed. Issue 29: over a link that carried the model in
/// 3.5 s, a trainer sent and received models for a whole run without ever taking part, and
/// nothing said so.
pub fn absent_trainer_warnings(
    rounds: &[RoundRecord],
    num_trainers: usize,
    failed: &[(usize, f64)],
    sync_every: Duration,
    round_timeout: Duration,
) -> Vec<String> {
    let formed = rounds.iter().filter(|r| !r.check).count();
    if formed == 0 {
        return Vec::new();
    }
    (0..num_trainers)
        .filter(|t| !failed.iter().any(|(f, _)| f == t))
        .filter(|t| {
            !rounds
                .iter()
                .any(|r| !r.check && r.participants.contains(t))
        })
        .map(|t| {
            format!(
                "trainer {t} took part in none of the {formed} rounds: each of its answers came after its round had formed (a host or link too slow for --sync-every {}), so none of its training is in the model; a round waits for a trainer at most --round-timeout {}, and not at all once it has missed {} deadlines in a row",
                humantime::format_duration(sync_every),
                humantime::format_duration(round_timeout),
                crate::config::LATE_LIMIT
            )
        })
        .collect()
}

/// One line (without the `warning: ` prefix) per trainer of a method that averages no models
/// (`averages_models` false, `MethodInfo::averages_models`: GGS) that contributed no gradient
/// step to the model (`steps_per_trainer` 0): its share of the training examples was never
/// trained on. Said for a trainer that failed before its first step (with when) and for one
/// that never answered a step in time (the steps went on without it). Empty for the methods
/// that average models, whose idle trainers are said when the data is prepared.
pub fn no_step_warnings(s: &Summary, averages_models: bool) -> Vec<String> {
    if averages_models {
        return Vec::new();
    }
    s.steps_per_trainer
        .iter()
        .enumerate()
        .filter(|&(_, &steps)| steps == 0)
        .map(|(t, _)| {
            let why = match s.failed_trainers.iter().find(|f| f.0 == t) {
                Some((_, at)) if at.is_finite() => {
                    format!("it failed at {at:.1}s, before its first step")
                }
                Some(_) => "it failed before its first step".to_string(),
                None => "it never answered a step in time, and the steps went on without it"
                    .to_string(),
            };
            format!(
                "{}: trainer {t} contributed no gradient step ({why}): its share of the training examples was never trained on",
                s.method
            )
        })
        .collect()
}

/// One line (without the `warning: ` prefix) per trainer in `failed` (`(trainer, at_s)`,
/// `Summary::failed_trainers`) that `plan` did not fail on purpose (`--fail`): a trainer lost
/// during the run (a killed or cut-off MPI rank, a trainer thread that stopped), with when, and
/// what the rounds after it averaged.
pub fn lost_trainer_warnings(failed: &[(usize, f64)], plan: &FailPlan) -> Vec<String> {
    failed
        .iter()
        .filter(|(t, _)| !plan.contains_key(t))
        .map(|&(t, at)| {
            let when = if at.is_finite() {
                format!(" at {at:.1}s")
            } else {
                String::new()
            };
            format!(
                "trainer {t} was lost{when}: the rounds after it were formed by the other trainers, and its part was not trained on from then"
            )
        })
        .collect()
}

/// What the coordinator's correction of one exchange did (LLCG: `--llcg-steps` mini-batch
/// steps on the whole training graph after the average), recorded as the round's
/// `correction` in `rounds.jsonl` and said on its line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Correction {
    /// Optimizer steps it took.
    pub steps: u64,
    /// Mean mini-batch loss of those steps (the training loss on whole-graph batches; NaN,
    /// `null` in JSON, when it took none).
    pub loss: f32,
    /// Wall-clock seconds it took, while the round's trainers waited for its reply.
    pub secs: f64,
}

/// Where the time went of a round that formed past its due time by more than a slot
/// (`skipped_slots` > 0), recorded as the round's `late` in `rounds.jsonl` and said on its
/// line: the coordinator held the round for the evaluator (two validations queued, docs/
/// decisions/0036-validation-share.md, or the round records and checkpoints it writes), or
/// waited for the trainers' contributions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Late {
    /// Seconds past the due time before the round was called: the coordinator waited for
    /// validation and the recording of earlier rounds to keep up.
    pub validation_s: f64,
    /// Seconds from the call to the round's forming past the due time: the trainers
    /// (behind, stalled or lost until the gather's timeout) and the combine.
    pub trainers_s: f64,
}

/// One averaging round, as printed and written to `rounds.jsonl`. `Default` is round 0 at 0 s,
/// no participant, unvalidated (tests build records from it).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RoundRecord {
    /// Round number, 1-based, counted from the start of the run across resumes.
    pub round: u64,
    /// Training time when the round's average was formed, seconds.
    pub elapsed_s: f64,
    /// Trainers whose parameters entered the mean.
    pub participants: Vec<usize>,
    /// Trainers that did not (dead, dropped, or too slow).
    pub missing: Vec<usize>,
    /// Optimizer steps of each participating trainer since the start of the run, across
    /// resumes (same order as participants).
    pub steps: Vec<u64>,
    /// Completed epochs of each participating trainer.
    pub epochs: Vec<u64>,
    /// Mean training mini-batch loss since the previous round, over participants (NaN when no
    /// trainer made a step; `null` in JSON).
    pub train_loss: f64,
    /// Validation result of the averaged model.
    pub val: EvalResult,
    /// Seconds the validation took (wall clock; it runs beside the trainers, on their cores).
    pub eval_s: f64,
    /// Core-seconds the validation took from the cores the trainers share: CPU time of the
    /// evaluation threads (Linux: `/proc/thread-self/schedstat`; elsewhere `eval_s` times the
    /// evaluation threads, an upper bound).
    pub eval_cpu_s: f64,
    /// Whether this round's model is the best so far on validation.
    pub is_best: bool,
    /// Averaging slots of `--sync-every` that passed while this round waited (a validation
    /// backlog, trainers past the deadline) and were skipped, not made up by rounds back to
    /// back ([`crate::clock::next_round_due`]); 0 (absent from `rounds.jsonl`) when the round
    /// formed within one period of its due time, and always for step-count schedules.
    #[serde(skip_serializing_if = "is_zero")]
    pub skipped_slots: u64,
    /// Where the time went when `skipped_slots` > 0, or when the last round (due at the time
    /// limit, where no slot is left to skip) formed a whole `--sync-every` span late
    /// ([`Late`]); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late: Option<Late>,
    /// A validation check between averaging rounds (`--val-check-interval`), not a round:
    /// the mean of the trainers' parameters at `elapsed_s`, which they did not receive.
    /// `round` is then the number of rounds formed before it, `train_loss` NaN (the losses go
    /// to the next round) and `steps` the trainers' counts when they left their copies. Absent
    /// from `rounds.jsonl` (false) for rounds.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub check: bool,
    /// The plateau hold (docs/decisions/0037-plateau-hold.md): the share of this round's
    /// update applied, from the model sent at the previous round towards the round's average
    /// (the server step); absent (1) for the paper's plain mean, which every run keeps until
    /// its validation falls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_step: Option<f32>,
    /// The plateau hold sent the best model, of this earlier round, instead of this round's
    /// average: the validation had fallen; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored: Option<u64>,
    /// The best model `restored` sent back was the validation check after that round
    /// (`--val-check-interval`), not the round's own model; absent (false) otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub restored_check: bool,
    /// What the coordinator's correction did after this round's average (LLCG: its
    /// `--llcg-steps` steps on the whole training graph, their mean loss and wall time);
    /// absent for methods without one, with `--llcg-steps 0`, and for checks between rounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correction: Option<Correction>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What a finished run reports (`summary.json`).
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The `--method` name (e.g. `random-tma`).
    pub method: String,
    /// `link` or `node`.
    pub task: String,
    /// Trainers started.
    pub num_trainers: usize,
    /// Rounds in the run (across resumes).
    pub rounds: u64,
    /// The validation metric that selected the best model (`--metric`, `auto` resolved for
    /// the task: e.g. `roc_auc`, `hits@50`).
    pub metric: String,
    /// Training time of the last round, seconds.
    pub train_time_s: f64,
    /// Validation result of the last round's model.
    pub final_val: EvalResult,
    /// Test result of the last round's model.
    pub final_test: EvalResult,
    /// Round of the best validation result (for a check, the rounds formed before it).
    pub best_round: u64,
    /// Whether the best model was a validation check between rounds (`--val-check-interval`)
    /// after round `best_round`, not a round's average. Absent from `summary.json` when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub best_check: bool,
    /// The best validation result.
    pub best_val: EvalResult,
    /// Test result of the best-validation model.
    pub best_test: EvalResult,
    /// Optimizer steps of each trainer since the start of the run (across resumes), as of the
    /// last round it joined (0 for trainers that never joined one).
    pub steps_per_trainer: Vec<u64>,
    /// Trainers that failed during the run, with the training time (seconds) they stopped;
    /// in JSON a list of `{"trainer": 1, "at_s": 4.02}` (`at_s` null when unknown, e.g. a
    /// trainer that panicked).
    #[serde(serialize_with = "failed_as_objects")]
    pub failed_trainers: Vec<(usize, f64)>,
    /// sha256 of the partition assignment (None for methods that do not partition).
    pub partition_hash: Option<String>,
    /// The run ended before its time limit (see `interrupted_by`): the last round is the one
    /// in flight then; `tma train --resume RUN_DIR` continues it.
    pub interrupted: bool,
    /// Why an interrupted run ended early (`stop_request` or `trainers_lost`); null for a run
    /// that reached its time limit.
    pub interrupted_by: Option<StopCause>,
    /// What the run changed or dropped in the user's data, and trainers without training
    /// examples (one line each; see `Prepared::warnings`).
    pub warnings: Vec<String>,
    /// Self-loops and duplicate arcs the loader removed from the dataset.
    pub removed_on_load: tma_graph::RemovedArcs,
    /// Peak memory of every process of the run (the in-process run's one process; under MPI
    /// the coordinator rank and each trainer rank that said goodbye), filled in when the run
    /// ends.
    pub memory: Vec<crate::memory::ProcessMemory>,
    /// Rounds whose checkpoint a newer round superseded before the disk had written it (the
    /// checkpoint is written off the round loop: a slow disk skips rounds, never delays
    /// them); absent from `summary.json` when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub checkpoints_superseded: u64,
    /// What ran the model's dense products (`--matmul-precision`), as the CPU of the process
    /// that wrote the summary gives it: `f32`, `bf16-amx` (Intel AMX tiles) or `bf16-avx512`
    /// (AVX512_BF16 dot products); empty until the run fills it in
    /// (`crate::data::matmul_products`).
    pub matmul_products: String,
}

/// Why a run ended before its time limit ([`Summary::interrupted_by`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopCause {
    /// The caller asked the run to stop (Ctrl-C).
    StopRequest,
    /// Every trainer was lost (dead, or silent for the peer timeout): nobody was left to
    /// average.
    TrainersLost,
}

fn failed_as_objects<S: serde::Serializer>(
    failed: &[(usize, f64)],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(failed.len()))?;
    for &(trainer, at) in failed {
        seq.serialize_element(&serde_json::json!({
            "trainer": trainer,
            "at_s": if at.is_finite() { Some(at) } else { None },
        }))?;
    }
    seq.end()
}

/// Receives what happens during a run (the CLI prints it, [`crate::run::Run`] writes it to the
/// run directory, tests record it). An error from either method ends the run after the round in
/// flight; the run returns that error.
pub trait Observer {
    /// A round's averaged model has been validated (called in round order).
    ///
    /// # Errors
    /// Whatever the observer could not do (e.g. write `rounds.jsonl`).
    fn on_round(&mut self, _r: &RoundRecord) -> Result<(), TrainError> {
        Ok(())
    }
    /// Right after [`Observer::on_round`], with that round's averaged parameters (flat, in
    /// [`ParamSet`] order): the place to checkpoint.
    ///
    /// # Errors
    /// Whatever the observer could not do (e.g. write the checkpoint).
    fn on_round_model(&mut self, _r: &RoundRecord, _params: &[f32]) -> Result<(), TrainError> {
        Ok(())
    }
}

/// An observer that ignores everything.
pub struct Quiet;
impl Observer for Quiet {}

/// Where a resumed run continues from.
#[derive(Clone, Debug)]
pub struct Resume {
    /// Last completed round; the run continues with round `round + 1`.
    pub round: u64,
    /// Averaged parameters after that round.
    pub params: Vec<f32>,
    /// Best round so far, its validation result and parameters.
    pub best: Option<(u64, EvalResult, Vec<f32>)>,
    /// Whether that best model was a validation check after its round
    /// (`--val-check-interval`), not the round's average.
    pub best_check: bool,
    /// Optimizer steps of each trainer since the start of the run as of `round`, by trainer
    /// index (missing entries count as 0). The resumed trainers count from 0 again; the
    /// coordinator adds these offsets to the steps it records and reports.
    pub steps: Vec<u64>,
    /// Completed epochs of each trainer since the start of the run as of `round`, by trainer
    /// index (missing entries count as 0): the resumed trainers continue counting from them.
    pub epochs: Vec<u64>,
    /// Training time at which `round` formed (the resumed clock starts there).
    pub elapsed: std::time::Duration,
    /// The plateau hold as of `round`: its server step and the training seconds of its last
    /// restore (None: the plain mean; docs/decisions/0037-plateau-hold.md).
    pub plateau: Option<(f32, f64)>,
}

impl Resume {
    /// Epochs trainer `t` had completed at the resume point ([`Resume::epochs`]; 0 without a
    /// resume or an entry).
    pub fn epochs_of(resume: Option<&Resume>, t: usize) -> u64 {
        resume.and_then(|r| r.epochs.get(t).copied()).unwrap_or(0)
    }

    /// Step offset of each of `n` trainers: [`Resume::steps`] padded with zeros (no resume:
    /// all zeros).
    pub fn step_offsets(resume: Option<&Resume>, n: usize) -> Vec<u64> {
        (0..n)
            .map(|t| resume.and_then(|r| r.steps.get(t).copied()).unwrap_or(0))
            .collect()
    }
}

/// Optional inputs of a run.
#[derive(Default)]
pub struct Extras {
    /// Continue from a checkpoint instead of the initial model.
    pub resume: Option<Resume>,
    /// Set (by the caller, e.g. the CLI on Ctrl-C) to end the run early: the coordinator forms
    /// the round in flight at once, makes it the last, and the run writes its checkpoint and
    /// a summary marked `interrupted`.
    pub stop: Option<StopFlag>,
}

/// A request to end a run early, shared between whoever requests it and the coordinator.
pub type StopFlag = std::sync::Arc<std::sync::atomic::AtomicBool>;

/// Result of a run: records, summary and both models.
pub struct RunResult {
    /// Every validated round, in order.
    pub rounds: Vec<RoundRecord>,
    /// Final and best metrics.
    pub summary: Summary,
    /// The last averaged model.
    pub final_params: ParamSet,
    /// The averaged model with the best validation metric.
    pub best_params: ParamSet,
}

/// Trainers that fail at a given training time (failure experiment, `--fail T@DURATION`), by
/// trainer index.
pub type FailPlan = BTreeMap<usize, Duration>;

#[cfg(test)]
mod tests {
    use super::*;

    fn validated(metric: &str, value: f64, check: bool) -> RoundRecord {
        RoundRecord {
            round: 3,
            elapsed_s: 1.0,
            participants: vec![0],
            missing: vec![],
            steps: vec![10],
            epochs: vec![0],
            train_loss: f64::NAN,
            val: EvalResult {
                metric: metric.into(),
                value,
                all: BTreeMap::new(),
            },
            eval_s: 0.0,
            eval_cpu_s: 0.0,
            is_best: false,
            skipped_slots: 0,
            late: None,
            check,
            server_step: None,
            restored: None,
            restored_check: false,
            correction: None,
        }
    }

    /// Regression (issue 29, a slow link): trainer 3 behind a link that carried the model in
    /// 3.5 s answered every round after it had formed, for a whole MPI run, and nothing said
    /// so. A trainer in no round that did not fail is named once; one in a round, a failed one,
    /// and checks are not.
    #[test]
    fn a_trainer_in_no_round_is_named_unless_it_failed() {
        let round = |k: u64, participants: Vec<usize>, check: bool| RoundRecord {
            round: k,
            participants,
            ..validated("accuracy", 0.5, check)
        };
        let rounds = vec![
            round(1, vec![0, 1], false),
            round(2, vec![0, 1], false),
            // a check is not a round: trainer 3 in it does not count
            round(2, vec![0, 1, 3], true),
        ];
        let s = Duration::from_secs(2);
        let t = Duration::from_secs(3);
        let w = absent_trainer_warnings(&rounds, 4, &[(2, 1.5)], s, t);
        assert_eq!(
            w,
            vec![
                "trainer 3 took part in none of the 2 rounds: each of its answers came after its round had formed (a host or link too slow for --sync-every 2s), so none of its training is in the model; a round waits for a trainer at most --round-timeout 3s, and not at all once it has missed 2 deadlines in a row"
                    .to_string()
            ]
        );
        // the failed trainer 2 is listed in failed_trainers instead; with it alive, both named
        let w = absent_trainer_warnings(&rounds, 4, &[], s, t);
        assert_eq!(w.len(), 2);
        assert!(
            w[0].starts_with("trainer 2 took part in none of the 2 rounds"),
            "{w:?}"
        );
        // every trainer in some round, or no round formed: nothing to say
        assert!(absent_trainer_warnings(&rounds[..2], 2, &[], s, t).is_empty());
        assert!(absent_trainer_warnings(&rounds[2..], 4, &[], s, t).is_empty());
    }

    #[test]
    fn a_diverged_round_is_named_once_by_its_number() {
        let w = diverged_warning(&validated("mrr", f64::NAN, false)).unwrap();
        assert!(
            w.starts_with("round 3: the averaged model's outputs are NaN"),
            "{w}"
        );
        let w = diverged_warning(&validated("accuracy", f64::NAN, true)).unwrap();
        assert!(w.starts_with("check after round 3:"), "{w}");
        // defined, unvalidated (no metric), or ROC-AUC on one class: no warning
        assert_eq!(diverged_warning(&validated("mrr", 0.3, false)), None);
        assert_eq!(diverged_warning(&validated("", f64::NAN, false)), None);
        assert_eq!(
            diverged_warning(&validated("roc_auc", f64::NAN, false)),
            None
        );
    }

    #[test]
    fn a_lost_trainer_is_warned_about_and_a_planned_failure_is_not() {
        let plan: FailPlan = [(1, Duration::from_secs(3))].into_iter().collect();
        let w = lost_trainer_warnings(&[(1, 3.0), (2, 7.31), (3, f64::NAN)], &plan);
        assert_eq!(
            w,
            vec![
                "trainer 2 was lost at 7.3s: the rounds after it were formed by the other trainers, and its part was not trained on from then".to_string(),
                "trainer 3 was lost: the rounds after it were formed by the other trainers, and its part was not trained on from then".to_string(),
            ]
        );
    }
}
