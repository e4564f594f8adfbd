//! Evaluation: the metrics ([`eval`]: MRR and Hits@K, accuracy, F1, ROC-AUC; [`eval::evaluate`]),
//! the model's outputs on just the nodes an evaluation reads ([`infer`]), the evaluator thread
//! that validates each round's averaged model beside training ([`evaluator`]), and what a run
//! reports ([`record`]: one record per round, the summary, the observer that receives them).

pub mod eval;
pub(crate) mod evaluator;
pub mod infer;
pub mod record;
