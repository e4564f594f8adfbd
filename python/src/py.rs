//! The Python classes and functions of `tma._tma` (wrapped by `python/tma/__init__.py`).

use crate::arrays::{self, ArrayInput, FeatureArrays, LabelArrays};
use numpy::ndarray::{Array, IxDyn};
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{
    PyFileExistsError, PyFileNotFoundError, PyKeyboardInterrupt, PyOSError, PyRuntimeError,
    PyValueError,
};
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use tma_graph::formats::{Format, ReadOptions};
use tma_graph::{Dataset, Features};
use tma_nn::ParamSet;
use tma_train::options::Spelling;
use tma_train::saved::{self, EmbedOutput, SavedConfig, SavedModel, Which};
use tma_train::{
    build_model, DataSource, Engine, FailPlan, Observer, Prepared, RoundRecord, Run, RunResult,
    RunSpec, TrainConfig, TrainError,
};

/// Which Python exception a tma error becomes: files -> `OSError` (`FileNotFoundError`,
/// `FileExistsError`), bad input or options -> `ValueError`, the rest `RuntimeError`.
#[derive(Clone, Copy, Debug)]
enum Kind {
    NotFound,
    Exists,
    Os,
    Value,
    Runtime,
}

fn io_kind(k: std::io::ErrorKind) -> Kind {
    match k {
        std::io::ErrorKind::NotFound => Kind::NotFound,
        _ => Kind::Os,
    }
}

fn kind(e: &TrainError) -> Kind {
    match e {
        TrainError::Io { source, .. } => io_kind(source.kind()),
        TrainError::Dataset { source, .. } => match source {
            tma_graph::GraphError::Io { source, .. } => io_kind(source.kind()),
            _ => Kind::Value,
        },
        TrainError::RunDirExists(_) => Kind::Exists,
        TrainError::Store(_) => Kind::Os,
        TrainError::Config(_)
        | TrainError::Data(_)
        | TrainError::Partition(_)
        | TrainError::Model(_) => Kind::Value,
        TrainError::AllTrainersFailed | TrainError::Engine(_) => Kind::Runtime,
    }
}

fn make_err(k: Kind, msg: String) -> PyErr {
    match k {
        Kind::NotFound => PyFileNotFoundError::new_err(msg),
        Kind::Exists => PyFileExistsError::new_err(msg),
        Kind::Os => PyOSError::new_err(msg),
        Kind::Value => PyValueError::new_err(msg),
        Kind::Runtime => PyRuntimeError::new_err(msg),
    }
}

/// tma's error as the Python exception of its kind ([`Kind`]), with tma's message.
fn py_err(e: TrainError) -> PyErr {
    make_err(kind(&e), e.to_string())
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs `f`, turning a panic into a `RuntimeError` (a panic never crosses into Python).
fn guarded<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(PyRuntimeError::new_err(format!(
            "tma internal error (please report): {}",
            panic_message(p)
        ))),
    }
}

/// Where a Python dataset's data is.
enum Source {
    /// A dataset directory (reloaded by each run with the run's split index and seed, as the
    /// CLI does); the copy loaded at `Dataset.load` answers the properties.
    Path(PathBuf, ReadOptions, Dataset),
    /// Arrays given to `from_numpy` (cloned into each run).
    Memory(Dataset),
}

/// A `scipy.sparse.csr_matrix` as `(indptr, indices, data, columns)`.
type SparseArrays<'py> = (
    PyReadonlyArray1<'py, i64>,
    PyReadonlyArray1<'py, i64>,
    PyReadonlyArray1<'py, f32>,
    usize,
);

/// `(edge_index [2, E], x [N, F])`.
type GraphArrays<'py> = (
    Bound<'py, numpy::PyArray2<i64>>,
    Bound<'py, numpy::PyArray2<f32>>,
);

/// A graph dataset (`tma.Dataset`).
#[pyclass(module = "tma._tma", name = "Dataset", frozen)]
pub struct PyDataset {
    source: Source,
}

impl PyDataset {
    fn ds(&self) -> &Dataset {
        match &self.source {
            Source::Path(_, _, d) | Source::Memory(d) => d,
        }
    }
}

#[pymethods]
impl PyDataset {
    /// Loads a dataset directory (`.npy` layout of docs/dataset-format.md, or the on-disk
    /// graph format). Runs reload it with their own `split_index` / `seed`, as `tma train
    /// --dataset` does.
    #[staticmethod]
    #[pyo3(signature = (path, format=None, undirected=false))]
    fn _load(
        py: Python<'_>,
        path: PathBuf,
        format: Option<String>,
        undirected: bool,
    ) -> PyResult<PyDataset> {
        let format = format
            .map(|f| f.parse::<Format>())
            .transpose()
            .map_err(|e| PyValueError::new_err(format!("format: {e}")))?;
        let read = ReadOptions { format, undirected };
        let p = path.clone();
        let ds = py
            .detach(move || {
                guarded(|| {
                    tma_train::run::load_dataset(
                        &DataSource::DatasetAs { path: p, read },
                        &TrainConfig::default(),
                    )
                    .map_err(py_err)
                })
            })?
            .expect("a dataset path loads a dataset");
        Ok(PyDataset {
            source: Source::Path(path, read, ds),
        })
    }

    /// See `tma.Dataset.from_numpy` (arrays already of tma's dtypes and C-contiguous).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (name, edge_index, num_nodes, directed, x_dense, x_sparse, y_classes, y_multi, split, allow_split_overlap))]
    fn _from_arrays(
        py: Python<'_>,
        name: String,
        edge_index: PyReadonlyArray2<'_, i64>,
        num_nodes: Option<usize>,
        directed: bool,
        x_dense: Option<PyReadonlyArray2<'_, f32>>,
        x_sparse: Option<SparseArrays<'_>>,
        y_classes: Option<PyReadonlyArray1<'_, i64>>,
        y_multi: Option<PyReadonlyArray2<'_, u8>>,
        split: Option<(
            PyReadonlyArray1<'_, i64>,
            PyReadonlyArray1<'_, i64>,
            PyReadonlyArray1<'_, i64>,
        )>,
        allow_split_overlap: bool,
    ) -> PyResult<PyDataset> {
        let contiguous =
            |what: &str| PyValueError::new_err(format!("{what}: expected a C-contiguous array"));
        let ei = edge_index
            .as_slice()
            .map_err(|_| contiguous("edge_index"))?;
        let shape = edge_index.shape();
        if shape[0] != 2 {
            return Err(PyValueError::new_err(format!(
                "edge_index has shape [{}, {}], expected [2, E]",
                shape[0], shape[1]
            )));
        }
        let e = shape[1];
        let (src, dst) = ei.split_at(e);
        let x = match (&x_dense, &x_sparse) {
            (Some(x), _) => FeatureArrays::Dense {
                data: x.as_slice().map_err(|_| contiguous("x"))?,
                rows: x.shape()[0],
                dim: x.shape()[1],
            },
            (None, Some((ip, ix, d, dim))) => FeatureArrays::Sparse {
                indptr: ip.as_slice().map_err(|_| contiguous("x.indptr"))?,
                indices: ix.as_slice().map_err(|_| contiguous("x.indices"))?,
                data: d.as_slice().map_err(|_| contiguous("x.data"))?,
                dim: *dim,
            },
            (None, None) => FeatureArrays::None,
        };
        let y = match (&y_classes, &y_multi) {
            (Some(y), _) => LabelArrays::Classes(y.as_slice().map_err(|_| contiguous("y"))?),
            (None, Some(y)) => LabelArrays::MultiLabel {
                data: y.as_slice().map_err(|_| contiguous("y"))?,
                num_labels: y.shape()[1],
            },
            (None, None) => LabelArrays::None,
        };
        let split = match &split {
            Some((a, b, c)) => Some([
                a.as_slice().map_err(|_| contiguous("train_idx"))?,
                b.as_slice().map_err(|_| contiguous("val_idx"))?,
                c.as_slice().map_err(|_| contiguous("test_idx"))?,
            ]),
            None => None,
        };
        let input = ArrayInput {
            name,
            src,
            dst,
            num_nodes,
            directed,
            x,
            y,
            split,
            allow_split_overlap,
            seed: 0,
        };
        // the arrays stay borrowed (read in place) while the GIL is released
        let ds = py.detach(move || {
            guarded(|| arrays::dataset_from_arrays(input).map_err(PyValueError::new_err))
        })?;
        Ok(PyDataset {
            source: Source::Memory(ds),
        })
    }

    /// The dataset's name.
    #[getter]
    fn name(&self) -> String {
        self.ds().name.clone()
    }
    /// Number of nodes.
    #[getter]
    fn num_nodes(&self) -> usize {
        self.ds().num_nodes()
    }
    /// Number of arcs of the graph (an undirected edge counts twice), after self-loops and
    /// duplicate arcs were removed.
    #[getter]
    fn num_edges(&self) -> usize {
        self.ds().graph.num_edges()
    }
    /// Whether the graph is directed.
    #[getter]
    fn directed(&self) -> bool {
        self.ds().directed
    }
    /// Feature width (32 structural columns for a featureless graph).
    #[getter]
    fn num_features(&self) -> usize {
        self.ds().features.dim()
    }
    /// Number of classes (or labels of a multi-label dataset); 0 without labels.
    #[getter]
    fn num_classes(&self) -> usize {
        match &self.ds().labels {
            tma_graph::Labels::None => 0,
            tma_graph::Labels::Classes { num_classes, .. } => *num_classes,
            tma_graph::Labels::MultiLabel { num_labels, .. } => *num_labels,
        }
    }
    /// The directory it was loaded from (None for arrays).
    #[getter]
    fn path(&self) -> Option<String> {
        match &self.source {
            Source::Path(p, _, _) => Some(p.display().to_string()),
            Source::Memory(_) => None,
        }
    }
    /// Self-loops and duplicate arcs removed from `edge_index`: `(self_loops, duplicate_arcs)`.
    #[getter]
    fn removed(&self) -> (usize, usize) {
        let r = &self.ds().removed;
        (r.self_loops, r.duplicate_arcs)
    }
    fn __repr__(&self) -> String {
        format!("tma.Dataset({})", self.ds().summary())
    }
}

/// Forwards every round to the waiting Python thread.
struct Forward {
    tx: mpsc::Sender<Msg>,
}

enum Msg {
    Round(String),
    Done(Box<Result<Option<Trained>, (Kind, String)>>),
}

struct Trained {
    result: RunResult,
    prep: Prepared,
    dir: PathBuf,
    config: TrainConfig,
}

impl Observer for Forward {
    fn on_round(&mut self, r: &RoundRecord) -> Result<(), TrainError> {
        let line = serde_json::to_string(r).expect("a round serializes");
        // the receiver is gone only when Python stopped waiting: keep training to the end
        let _ = self.tx.send(Msg::Round(line));
        Ok(())
    }
}

/// A finished run (`tma.Run`).
#[pyclass(module = "tma._tma", name = "Run", frozen)]
pub struct PyRun {
    rounds: Vec<String>,
    summary: String,
    config: String,
    dir: PathBuf,
    final_params: ParamSet,
    best_params: ParamSet,
    prep: Prepared,
    train_config: TrainConfig,
}

fn params_dict<'py>(py: Python<'py>, p: &ParamSet) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let d = pyo3::types::PyDict::new(py);
    for s in &p.specs {
        let v = p.data[s.offset..s.offset + s.numel()].to_vec();
        let a = Array::from_shape_vec(IxDyn(&s.shape), v)
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        d.set_item(&s.name, a.into_pyarray(py))?;
    }
    Ok(d)
}

fn json_loads<'py>(py: Python<'py>, s: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (s,))
}

#[pymethods]
impl PyRun {
    /// Every round as `rounds.jsonl` holds it (list of dicts).
    #[getter]
    fn rounds<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        self.rounds.iter().map(|r| json_loads(py, r)).collect()
    }
    /// `summary.json` as a dict.
    #[getter]
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_loads(py, &self.summary)
    }
    /// The resolved configuration (option keys as `tma.train` and config files take them).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_loads(py, &self.config)
    }
    /// The run directory.
    #[getter]
    fn dir(&self) -> String {
        self.dir.display().to_string()
    }
    /// The last averaged model, `{name: numpy.ndarray}` (PyTorch names and shapes).
    fn final_params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        params_dict(py, &self.final_params)
    }
    /// The best-validation model, `{name: numpy.ndarray}`.
    fn best_params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        params_dict(py, &self.best_params)
    }
    /// Encoder output (node task: logits; link task: embeddings) of `which` model ("best" or
    /// "final") by exact full-neighbour inference on the evaluation graph, for `nodes` (all
    /// when None), float32 `[len(nodes), out_dim]`.
    #[pyo3(signature = (nodes=None, which="best"))]
    fn _embeddings<'py>(
        &self,
        py: Python<'py>,
        nodes: Option<PyReadonlyArray1<'py, i64>>,
        which: &str,
    ) -> PyResult<Bound<'py, numpy::PyArray2<f32>>> {
        let params = match which {
            "best" => &self.best_params,
            "final" => &self.final_params,
            other => {
                return Err(PyValueError::new_err(format!(
                    "which={other:?}: expected \"best\" or \"final\""
                )))
            }
        };
        let n = self.prep.graph.num_nodes();
        let ids: Option<Vec<usize>> = match &nodes {
            None => None,
            Some(a) => {
                let s = a
                    .as_slice()
                    .map_err(|_| PyValueError::new_err("nodes: expected a C-contiguous array"))?;
                let mut v = Vec::with_capacity(s.len());
                for (i, &x) in s.iter().enumerate() {
                    if x < 0 || x as usize >= n {
                        return Err(PyValueError::new_err(format!(
                            "nodes[{i}] = {x} is out of range for {n} nodes"
                        )));
                    }
                    v.push(x as usize);
                }
                Some(v)
            }
        };
        let (cfg, prep) = (&self.train_config, &self.prep);
        let h = py.detach(|| {
            guarded(|| {
                let model = build_model(cfg, prep.model_shape()).map_err(py_err)?;
                Ok(model.infer_full(params, &prep.graph, &prep.degrees, &prep.features))
            })
        })?;
        let out = match ids {
            None => Array::from_shape_vec((h.rows, h.cols), h.data),
            Some(ids) => {
                let mut d = Vec::with_capacity(ids.len() * h.cols);
                for &v in &ids {
                    d.extend_from_slice(&h.data[v * h.cols..(v + 1) * h.cols]);
                }
                Array::from_shape_vec((ids.len(), h.cols), d)
            }
        }
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok(out.into_pyarray(py))
    }

    /// The metrics of `which` model ("best" or "final") on the validation and test splits of
    /// the run's own data, as the run evaluates them (`TrainConfig::infer_options`; the
    /// validation subset of `eval_max_nodes`): JSON `{"val": EvalResult, "test": EvalResult}`.
    /// The best model's are the summary's `best_val` / `best_test`, bit for bit.
    #[pyo3(signature = (which="best"))]
    fn _evaluate(&self, py: Python<'_>, which: &str) -> PyResult<String> {
        let params = match parse_which(which)? {
            Which::Best => &self.best_params,
            Which::Final => &self.final_params,
        };
        let (cfg, prep) = (&self.train_config, &self.prep);
        py.detach(|| {
            guarded(|| {
                let model = build_model(cfg, prep.model_shape()).map_err(py_err)?;
                let pool = saved::thread_pool(cfg.threads).map_err(py_err)?;
                let opts = cfg.infer_options();
                let r = pool.install(|| saved::evaluate_both(&model, params, prep, &opts));
                Ok(serde_json::to_string(&r).expect("an evaluation serializes"))
            })
        })
    }

    /// The graph and features the models are evaluated on (after the run's preparation:
    /// normalized features with `normalize_features`, held-out edges removed for link
    /// prediction): `(edge_index int64 [2, E], x float32 [N, F])`, `x` densified.
    fn inference_inputs<'py>(&self, py: Python<'py>) -> PyResult<GraphArrays<'py>> {
        let g = &self.prep.graph;
        let e = g.num_edges();
        let mut ei = vec![0i64; 2 * e];
        let mut k = 0;
        for v in 0..g.num_nodes() {
            for &u in g.neighbors(v) {
                ei[k] = u as i64;
                ei[e + k] = v as i64;
                k += 1;
            }
        }
        let (n, dim) = (self.prep.features.num_nodes(), self.prep.features.dim());
        let x = match &self.prep.features {
            Features::Dense { data, .. } => data.to_vec(),
            Features::Sparse {
                indptr,
                indices,
                data,
                ..
            } => {
                let mut x = vec![0f32; n * dim];
                for r in 0..n {
                    for j in indptr[r] as usize..indptr[r + 1] as usize {
                        x[r * dim + indices[j] as usize] += data[j];
                    }
                }
                x
            }
        };
        let ei = Array::from_shape_vec((2, e), ei).expect("2 x E");
        let x = Array::from_shape_vec((n, dim), x).expect("N x F");
        Ok((ei.into_pyarray(py), x.into_pyarray(py)))
    }

    fn __repr__(&self) -> String {
        format!(
            "tma.Run(dir={:?}, rounds={})",
            self.dir.display().to_string(),
            self.rounds.len()
        )
    }
}

/// Trains: see `tma.train`. `options` is a JSON object of option keys
/// ([`tma_train::options::config_from`]); `fail` pairs of trainer and duration (`"10s"`);
/// `partitions` a partition directory (`tma partition --out`); `engine` `in-process` (default)
/// or `mpi` (this process is one rank of an `mpirun` job: rank 0 returns the run, a trainer
/// rank `None`); `join_timeout` MPI's wait for the ranks (a duration, default 120 s);
/// `tensorboard` a folder for the TensorBoard event file (`tma train --tensorboard`).
///
/// With `resume`, continues the interrupted run in the directory `out` from its last
/// checkpoint (`tma train --resume`): its `config.toml` is the configuration, `options` over
/// it; the data is `dataset`, else the data its `config.toml` records.
#[pyfunction]
#[pyo3(signature = (dataset, options, out=None, fail=Vec::new(), gen_nodes=None, on_round=None, partitions=None, engine=None, join_timeout=None, resume=false, tensorboard=None))]
#[allow(clippy::too_many_arguments)]
// long: one Python call in order: options, a resumed run's config, data, the worker thread, and the loop that hands rounds to Python and answers Ctrl-C without holding the GIL
fn _train(
    py: Python<'_>,
    dataset: Option<&Bound<'_, PyDataset>>,
    options: &str,
    out: Option<PathBuf>,
    fail: Vec<(usize, String)>,
    gen_nodes: Option<usize>,
    on_round: Option<Py<PyAny>>,
    partitions: Option<PathBuf>,
    engine: Option<String>,
    join_timeout: Option<String>,
    resume: bool,
    tensorboard: Option<PathBuf>,
) -> PyResult<Option<PyRun>> {
    let engine = match engine.as_deref().unwrap_or("in-process") {
        "in-process" => Engine::InProcess,
        "mpi" if cfg!(feature = "mpi") => Engine::Mpi,
        "mpi" => {
            return Err(PyValueError::new_err(
                "engine 'mpi': this tma package was built without MPI; rebuild it with MATURIN_PEP517_ARGS=\"--features python,mpi\" pip install ./python (needs libopenmpi-dev and libclang-dev)",
            ))
        }
        e => {
            return Err(PyValueError::new_err(format!(
                "engine '{e}': expected in-process or mpi"
            )))
        }
    };
    if engine == Engine::Mpi && partitions.is_none() && !resume {
        return Err(PyValueError::new_err(
            "engine 'mpi' trains on a partition directory: pass partitions=DIR (write one with tma.partition(..., out=DIR))",
        ));
    }
    let join_timeout = match join_timeout {
        None => None,
        Some(s) => Some(humantime::parse_duration(&s).map_err(|e| {
            PyValueError::new_err(format!(
                "join_timeout '{s}': not a duration ({e}; examples: 60s, 2min)"
            ))
        })?),
    };
    if join_timeout.is_some() && engine != Engine::Mpi {
        return Err(PyValueError::new_err(
            "join_timeout applies only to engine='mpi'",
        ));
    }
    let mut map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(options)
        .map_err(|e| PyValueError::new_err(format!("options: {e}")))?;
    // a resumed run: its config.toml under the options given
    let saved = match (resume, &out) {
        (false, _) => None,
        (true, None) => {
            return Err(PyValueError::new_err(
                "resume needs the run directory to continue",
            ))
        }
        (true, Some(dir)) => {
            let path = dir.join("config.toml");
            if !path.is_file() {
                return Err(PyFileNotFoundError::new_err(format!(
                    "{}: no config.toml there (not a tma run directory)",
                    dir.display()
                )));
            }
            let sc = SavedConfig::read(&path).map_err(py_err)?;
            let serde_json::Value::Object(mut base) =
                serde_json::to_value(&sc.train).expect("a config serializes")
            else {
                unreachable!("a config is an object")
            };
            for (k, v) in std::mem::take(&mut map) {
                let key = tma_train::options::canonical(&k).to_string();
                base.insert(key, v);
            }
            map = base;
            Some(sc)
        }
    };
    let config = tma_train::options::config_from(&map, Spelling::Key)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    // what depends on the options given: the CLI's refusals and warnings, from the library
    // (the options of this call: a resumed run's config.toml is not "given")
    let user: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(options).unwrap_or_default();
    let given: tma_train::options::Given = user
        .into_iter()
        .map(|(k, v)| {
            let key = tma_train::options::canonical(&k).to_string();
            (key, v)
        })
        .collect();
    tma_train::options::check_given(&config, &given, Spelling::Key)
        .map_err(|e| PyValueError::new_err(format!("invalid option: {e}")))?;
    let notes =
        tma_train::options::unused_warnings(&given, &[config.method], config.model, Spelling::Key);
    let mut plan = FailPlan::new();
    for (t, at) in fail {
        if t >= config.effective_trainers() {
            return Err(PyValueError::new_err(format!(
                "fail: trainer {t} does not exist (trainers are 0 to {})",
                config.effective_trainers() - 1
            )));
        }
        let d = humantime::parse_duration(&at).map_err(|e| {
            PyValueError::new_err(format!(
                "fail: trainer {t} at '{at}': not a duration ({e}; examples: 10s, 2min)"
            ))
        })?;
        plan.insert(t, d);
    }
    // a dataset built from arrays is not on disk: the CLI cannot resume its run
    let resumable = !matches!(dataset.map(|d| &d.get().source), Some(Source::Memory(_)));
    let data = match (dataset, &partitions) {
        (Some(_), Some(_)) => {
            return Err(PyValueError::new_err(
                "partitions: a partition directory holds its dataset; drop the dataset argument",
            ))
        }
        (None, Some(dir)) => {
            if gen_nodes.is_some() {
                return Err(PyValueError::new_err(
                    "gen_nodes sizes the generated graph, used only without a dataset; drop gen_nodes",
                ));
            }
            DataSource::Partitions(dir.clone())
        }
        (None, None) if saved.is_some() => {
            let sc = saved.as_ref().expect("checked");
            sc.data_source().map_err(py_err)?.ok_or_else(|| {
                PyValueError::new_err(format!(
                    "{}: the run recorded no dataset (it trained on arrays); give the same arrays as dataset=",
                    out.as_ref().expect("checked").join("config.toml").display()
                ))
            })?
        }
        (None, None) => DataSource::Generated {
            num_nodes: gen_nodes.unwrap_or(10_000),
        },
        (Some(d), None) => {
            if gen_nodes.is_some() {
                return Err(PyValueError::new_err(
                    "gen_nodes sizes the generated graph, used only without a dataset; drop gen_nodes",
                ));
            }
            match &d.get().source {
                Source::Path(p, read, _) => DataSource::DatasetAs {
                    path: p.clone(),
                    read: *read,
                },
                Source::Memory(ds) => {
                    if ds.split.is_some() && config.split_index > 0 {
                        return Err(PyValueError::new_err(format!(
                            "invalid option: split_index {}: the arrays hold one split (index 0)",
                            config.split_index
                        )));
                    }
                    // the copy for the run (a run owns its data) is made without the GIL
                    let dd: &PyDataset = d.get();
                    let ds = py.detach(|| guarded(|| dataset_for(dd, &config)))?;
                    DataSource::InMemory(Box::new(ds))
                }
            }
        }
    };
    // a resumed run under MPI continues on the partition directory it recorded
    if engine == Engine::Mpi && !matches!(data, DataSource::Partitions(_)) {
        return Err(PyValueError::new_err(format!(
            "engine 'mpi' trains on a partition directory, and the run {} trained on a dataset: resume it in-process (engine='in-process')",
            out.as_ref().map_or_else(String::new, |d| d.display().to_string())
        )));
    }
    // a partition directory decides the data options: refuse the given ones that contradict it
    // (as `tma train --partitions` does)
    if let DataSource::Partitions(dir) = &data {
        let m = tma_train::store::read_manifest(dir).map_err(|e| py_err(e.into()))?;
        tma_train::options::check_partitions(&given, dir, &m.data, Spelling::Key)
            .map_err(|e| PyValueError::new_err(format!("invalid option: {e}")))?;
    }
    let stop: tma_train::StopFlag = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<Msg>();
    // waited on without the GIL (a closure that py.detach runs must be Sync)
    let rx = std::sync::Mutex::new(rx);
    let worker_stop = stop.clone();
    // a resumed run writes its event file where it did (its config.toml), unless told otherwise
    let tensorboard = tensorboard.or_else(|| saved.as_ref().and_then(|s| s.tensorboard.clone()));
    let cfg = config.clone();
    let worker = std::thread::Builder::new()
        .name("tma-run".into())
        .spawn(move || {
            let done_tx = tx.clone();
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let mut spec = RunSpec::new(cfg, data);
                spec.fail = plan;
                spec.out = out;
                spec.engine = engine;
                spec.join_timeout = join_timeout;
                spec.notes = notes;
                spec.resume = resume;
                spec.tensorboard = tensorboard;
                let fwd = Forward { tx };
                if engine == Engine::Mpi {
                    return train_mpi(spec, worker_stop, fwd);
                }
                let mut run = Run::start(spec)?;
                run.stop_on(worker_stop);
                let dir = run.dir().to_path_buf();
                let config = run.config().clone();
                let mut fwd = fwd;
                let (result, prep) = run.train_keeping_data(&mut fwd)?;
                Ok::<_, TrainError>(Some(Trained {
                    result,
                    prep,
                    dir,
                    config,
                }))
            }));
            let msg = match outcome {
                Ok(Ok(t)) => Ok(t),
                Ok(Err(e)) => Err((kind(&e), e.to_string())),
                Err(p) => Err((
                    Kind::Runtime,
                    format!("tma internal error (please report): {}", panic_message(p)),
                )),
            };
            let _ = done_tx.send(Msg::Done(Box::new(msg)));
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the run's thread: {e}")))?;

    let mut rounds: Vec<String> = Vec::new();
    let mut pending: Option<PyErr> = None;
    let trained = loop {
        let msg = py.detach(|| {
            rx.lock()
                .expect("only this thread waits")
                .recv_timeout(Duration::from_millis(100))
        });
        match msg {
            Ok(Msg::Round(line)) => {
                if pending.is_none() {
                    if let Some(cb) = &on_round {
                        let r = json_loads(py, &line).and_then(|d| cb.call1(py, (d,)));
                        if let Err(e) = r {
                            // the callback failed: stop after the round in flight, then raise
                            stop.store(true, Ordering::SeqCst);
                            pending = Some(e);
                        }
                    }
                }
                rounds.push(line);
            }
            Ok(Msg::Done(r)) => break *r,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err((
                    Kind::Runtime,
                    "tma internal error: the run's thread ended without a result".into(),
                ))
            }
        }
        if let Err(e) = py.check_signals() {
            // Ctrl-C: the run forms the round in flight, checkpoints it and ends; later
            // interrupts while it does so are ignored (it ends within a round)
            stop.store(true, Ordering::SeqCst);
            if pending.is_none() {
                pending = Some(e);
            }
        }
    };
    let _ = worker.join();
    let trained = match trained {
        Ok(Some(t)) => t,
        // an MPI trainer rank: its part is trained, the run belongs to rank 0
        Ok(None) => return pending.map_or(Ok(None), Err),
        Err((k, msg)) => return Err(pending.unwrap_or_else(|| make_err(k, msg))),
    };
    if let Some(e) = pending {
        if e.is_instance_of::<PyKeyboardInterrupt>(py) {
            let last = rounds.len();
            let dir = trained.dir.display();
            return Err(PyKeyboardInterrupt::new_err(if resumable {
                format!(
                    "tma: run stopped after round {last}; checkpoint kept in {dir} (continue with: tma train --resume {dir})"
                )
            } else {
                format!(
                    "tma: run stopped after round {last}; checkpoint kept in {dir} (the dataset was built from arrays, which `tma train --resume` cannot reload; a run on Dataset.load(path) can be resumed)"
                )
            }));
        }
        return Err(e);
    }
    // embeddings need the evaluation graph and features only: free the trainers' parts
    let mut prep = trained.prep;
    prep.trainers = Vec::new();
    let summary = serde_json::to_string(&trained.result.summary).expect("summary serializes");
    let config = serde_json::to_string(&trained.config).expect("config serializes");
    Ok(Some(PyRun {
        rounds,
        summary,
        config,
        dir: trained.dir,
        final_params: trained.result.final_params,
        best_params: trained.result.best_params,
        prep,
        train_config: trained.config,
    }))
}

/// One rank of an MPI job ([`tma_train::engines::mpi`]): rank 0 starts the run `spec` on its
/// partition directory and trains it with the MPI engine (an error before the round loop ends
/// the whole job, since the trainer ranks wait for rank 0); a trainer rank trains its part and
/// gives `None`.
#[cfg(feature = "mpi")]
fn train_mpi(
    spec: RunSpec,
    stop: tma_train::StopFlag,
    mut fwd: Forward,
) -> Result<Option<Trained>, TrainError> {
    use tma_train::engines::mpi::{launch, run_trainer, Rank};
    let DataSource::Partitions(dir) = &spec.data else {
        return Err(TrainError::Config(
            "engine mpi trains on a partition directory".into(),
        ));
    };
    match launch(spec.join_timeout)? {
        Rank::Trainer(ctx) => {
            let m = tma_train::store::read_manifest(dir)?;
            let mut cfg = spec.config.clone();
            tma_train::methods::apply_partitions(dir, &m.data, &mut cfg)?;
            let method = tma_train::training_method(cfg.method);
            run_trainer(ctx, method, dir, &m, &cfg, &spec.fail, spec.out.as_deref())?;
            Ok(None)
        }
        Rank::Coordinator(mpi) => {
            let mut mpi = *mpi;
            // the rank count before anything is loaded (alone: a Python exception)
            let m = tma_train::store::read_manifest(dir)?;
            if let Err(e) = mpi.check_ranks(&m) {
                if mpi.alone() {
                    return Err(e);
                }
                mpi.abort(&e.to_string());
            }
            let mut run = match Run::start(spec) {
                Ok(r) => r,
                // alone (no mpirun): a Python exception, not an MPI_Abort of the interpreter
                Err(e) if mpi.alone() => return Err(e),
                Err(e) => mpi.abort(&e.to_string()),
            };
            run.stop_on(stop);
            let dir = run.dir().to_path_buf();
            let config = run.config().clone();
            let result = run.train_keeping_data_with(&mut mpi, &mut fwd);
            if let Some(end) = mpi.finish(&result) {
                // rank(s) lost: the run is returned; once this process exits, a watcher ends
                // mpirun, which would wait for a lost host forever
                eprintln!(
                    "tma: rank(s) of the MPI job were lost; the run directory {} is complete; mpirun is ended {} after this process exits",
                    dir.display(),
                    humantime::format_duration(tma_train::engines::mpi::LAUNCHER_GRACE)
                );
                end.detach();
            }
            let (result, prep) = result?;
            Ok(Some(Trained {
                result,
                prep,
                dir,
                config,
            }))
        }
    }
}

/// Without the `mpi` feature `_train` refuses `engine='mpi'` before this is reached.
#[cfg(not(feature = "mpi"))]
fn train_mpi(
    _spec: RunSpec,
    _stop: tma_train::StopFlag,
    _fwd: Forward,
) -> Result<Option<Trained>, TrainError> {
    Err(TrainError::Config(
        "this tma package was built without MPI".into(),
    ))
}

/// The dataset of a Python `Dataset` for a run or partition with `cfg`: a directory is
/// reloaded with the configuration's split index and seed (as `tma train --dataset`), arrays
/// are cloned (structural features redrawn for the seed).
fn dataset_for(d: &PyDataset, cfg: &TrainConfig) -> Result<Dataset, PyErr> {
    match &d.source {
        Source::Path(p, read, _) => Ok(tma_train::run::load_dataset(
            &DataSource::DatasetAs {
                path: p.clone(),
                read: *read,
            },
            cfg,
        )
        .map_err(py_err)?
        .expect("a directory loads a dataset")),
        Source::Memory(ds) => {
            let mut ds = ds.clone();
            if ds.structural_features && cfg.seed != 0 {
                ds.features = tma_graph::structural_features(
                    &ds.graph,
                    ds.directed,
                    arrays::STRUCTURAL_DIM,
                    cfg.seed,
                );
            }
            Ok(ds)
        }
    }
}

/// Partitions: see `tma.partition`. `options` (JSON) holds `method`: a layout or a training
/// method's name (`tma_train::methods::partition_method`). Returns `(assignment uint32 [N] or
/// None, report JSON (null for a layout without an assignment), assignment sha256 or None,
/// manifest JSON of the written partition directory or None)`.
#[pyfunction]
#[pyo3(signature = (dataset, options, out=None))]
#[allow(clippy::type_complexity)]
fn _partition<'py>(
    py: Python<'py>,
    dataset: &Bound<'py, PyDataset>,
    options: &str,
    out: Option<PathBuf>,
) -> PyResult<(
    Option<Bound<'py, numpy::PyArray1<u32>>>,
    String,
    Option<String>,
    Option<String>,
)> {
    let mut map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(options)
        .map_err(|e| PyValueError::new_err(format!("options: {e}")))?;
    let layout = match map.remove("method") {
        None => "random".to_string(),
        Some(serde_json::Value::String(s)) => s,
        Some(v) => {
            return Err(PyValueError::new_err(format!(
                "method={v}: expected a name"
            )))
        }
    };
    let base = tma_train::options::config_from(&map, Spelling::Key)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let cfg = tma_train::methods::partition_job(&layout, base)
        .map_err(|e| PyValueError::new_err(format!("method={layout:?}: {e}")))?;
    // the one config -> partition mapping; None: a layout without an assignment
    let pcfg = tma_train::methods::partition_config(&cfg);
    if pcfg.is_none() && out.is_none() {
        return Err(PyValueError::new_err(format!(
            "method={layout:?}: the {} layout assigns no node to a part (nothing to return); write it with out= for tma.train(partitions=...)",
            cfg.method.layout(&cfg).name()
        )));
    }
    let d = dataset.get();
    let (assignment, report, hash, manifest) = py.detach(|| {
        guarded(|| {
            let ds = dataset_for(d, &cfg)?;
            let parted = match &pcfg {
                None => None,
                Some(pcfg) => {
                    let p = tma_partition::partition(&ds.graph, pcfg)
                        .map_err(|e| py_err(TrainError::Partition(e)))?;
                    let labels = match &ds.labels {
                        tma_graph::Labels::Classes { y, num_classes } => {
                            Some((y.as_slice(), *num_classes))
                        }
                        _ => None,
                    };
                    let rep = tma_partition::partition_report(&ds.graph, &p, labels);
                    let report = serde_json::to_string(&rep).expect("report serializes");
                    Some((p.assignment.clone(), report, p.hash_hex()))
                }
            };
            let manifest = match &out {
                None => None,
                Some(dir) => {
                    let (name, directed) = (ds.name.clone(), ds.directed);
                    let prep = tma_train::prepare(ds, &cfg).map_err(py_err)?;
                    let m =
                        tma_train::store::write_partition_dir(dir, &prep, &cfg, &name, directed)
                            .map_err(|e| py_err(TrainError::Store(e)))?;
                    Some(serde_json::to_string(&m).expect("manifest serializes"))
                }
            };
            Ok(match parted {
                Some((a, r, h)) => (Some(a), r, Some(h), manifest),
                None => (None, "null".to_string(), None, manifest),
            })
        })
    })?;
    Ok((
        assignment.map(|a| a.into_pyarray(py)),
        report,
        hash,
        manifest,
    ))
}

/// The names `tma.partition(method=...)` takes, each with the layout it makes: every layout
/// (`random`, `super`, `metis`, `shared-examples`, `whole`, ...) and every training method
/// (`random-tma` -> `random`, `llcg` -> `metis`, `ggs` -> `shared-examples`, ...), from the
/// method registry, as a list of `(name, layout)` pairs.
#[pyfunction]
fn _partition_names() -> Vec<(String, String)> {
    let cfg = TrainConfig::default();
    let layouts = tma_train::methods::layout_names()
        .into_iter()
        .map(|l| (l.clone(), l));
    let methods = tma_train::Method::ALL
        .iter()
        .map(|m| (m.as_str().to_string(), m.layout(&cfg).name()));
    layouts.chain(methods).collect()
}

fn parse_which(which: &str) -> PyResult<Which> {
    which
        .parse()
        .map_err(|e| PyValueError::new_err(format!("which={which:?}: {e}")))
}

/// A saved model (`tma.Model`): a model file with its run's configuration
/// ([`tma_train::saved`]), evaluated or embedded on the run's data (re-derived from the
/// recorded dataset and seed; prepared once and kept) or on another dataset.
#[pyclass(module = "tma._tma", name = "Model", frozen)]
pub struct PyModel {
    saved: SavedModel,
    /// `summary.json` of the run directory it was opened from (JSON), if any.
    summary: Option<String>,
    /// The run's own data, prepared at the first use: (data, its name as shown, config).
    own: std::sync::Mutex<Option<Arc<Ready>>>,
}

/// Data prepared for a saved model.
struct Ready {
    prep: Prepared,
    cfg: TrainConfig,
    model: tma_nn::Model,
    params: ParamSet,
    warnings: Vec<String>,
}

impl PyModel {
    /// The data to use: the run's own (cached) or `dataset`'s.
    fn ready(&self, dataset: Option<&PyDataset>) -> Result<Arc<Ready>, PyErr> {
        let mut cfg = self.saved.config.train.clone();
        let (data, shown) = match dataset {
            Some(d) => match &d.source {
                Source::Path(p, read, _) => (
                    DataSource::DatasetAs {
                        path: p.clone(),
                        read: *read,
                    },
                    p.display().to_string(),
                ),
                Source::Memory(_) => {
                    let ds = dataset_for(d, &cfg)?;
                    let name = ds.name.clone();
                    (DataSource::InMemory(Box::new(ds)), name)
                }
            },
            None => {
                if let Some(r) = self.own.lock().expect("not poisoned").as_ref() {
                    return Ok(r.clone());
                }
                let src = self
                    .saved
                    .config
                    .data_source()
                    .map_err(py_err)?
                    .ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "{}: the run recorded no dataset (it trained on arrays); give dataset=",
                            self.saved.config_path.display()
                        ))
                    })?;
                let shown = match &src {
                    DataSource::DatasetAs { path, .. } | DataSource::Dataset(path) => {
                        path.display().to_string()
                    }
                    DataSource::Partitions(p) => p.display().to_string(),
                    _ => "the generated graph".to_string(),
                };
                (src, shown)
            }
        };
        let (prep, _, warnings) = saved::prepare_eval(&mut cfg, data).map_err(py_err)?;
        let (model, params) = self.saved.model_for(&prep, &shown).map_err(py_err)?;
        let r = Arc::new(Ready {
            prep,
            cfg,
            model,
            params,
            warnings,
        });
        if dataset.is_none() {
            *self.own.lock().expect("not poisoned") = Some(r.clone());
        }
        Ok(r)
    }
}

#[pymethods]
impl PyModel {
    /// The model file.
    #[getter]
    fn path(&self) -> String {
        self.saved.path.display().to_string()
    }
    /// The run's configuration (option keys as `tma.train` takes them).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = serde_json::to_string(&self.saved.config.train).expect("config serializes");
        json_loads(py, &s)
    }
    /// `summary.json` of the run directory it was opened from (None for a model file).
    #[getter]
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.summary
            .as_deref()
            .map(|s| json_loads(py, s))
            .transpose()
    }
    /// The parameters, `{name: numpy.ndarray}` (PyTorch names and shapes).
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        params_dict(py, &self.saved.params)
    }

    /// Evaluates on the validation and test splits (see `tma.Model.evaluate`); returns JSON
    /// `{"val": ..., "test": ..., "warnings": [...]}`.
    #[pyo3(signature = (dataset=None, eval_memory=None, threads=None))]
    fn _evaluate(
        &self,
        py: Python<'_>,
        dataset: Option<&Bound<'_, PyDataset>>,
        eval_memory: Option<u64>,
        threads: Option<usize>,
    ) -> PyResult<String> {
        let d = dataset.map(|d| d.get());
        py.detach(|| {
            guarded(|| {
                let r = self.ready(d)?;
                let mut opts = r.cfg.infer_options();
                if let Some(m) = eval_memory {
                    if m < 16 << 20 {
                        return Err(PyValueError::new_err(format!(
                            "eval_memory: at least 16MiB (got {m} bytes)"
                        )));
                    }
                    opts.memory_budget = m;
                }
                let pool = saved::thread_pool(threads.unwrap_or(r.cfg.threads)).map_err(py_err)?;
                let e = pool.install(|| saved::evaluate_both(&r.model, &r.params, &r.prep, &opts));
                Ok(
                    serde_json::json!({"val": e.val, "test": e.test, "warnings": r.warnings})
                        .to_string(),
                )
            })
        })
    }

    /// Every node's embeddings (or logits) in memory, float32 `[N, width]` (rows `nodes`
    /// when given); computed as `tma embed` computes them, the same values.
    #[pyo3(signature = (nodes=None, dataset=None, output="embeddings", threads=None))]
    fn _embeddings<'py>(
        &self,
        py: Python<'py>,
        nodes: Option<PyReadonlyArray1<'py, i64>>,
        dataset: Option<&Bound<'py, PyDataset>>,
        output: &str,
        threads: Option<usize>,
    ) -> PyResult<Bound<'py, numpy::PyArray2<f32>>> {
        let output: EmbedOutput = output
            .parse()
            .map_err(|e| PyValueError::new_err(format!("output={output:?}: {e}")))?;
        let d = dataset.map(|d| d.get());
        let ids: Option<Vec<i64>> = match &nodes {
            None => None,
            Some(a) => Some(
                a.as_slice()
                    .map_err(|_| PyValueError::new_err("nodes: expected a C-contiguous array"))?
                    .to_vec(),
            ),
        };
        let (data, rows, dim) = py.detach(|| {
            guarded(|| {
                let r = self.ready(d)?;
                let layers = saved::embed_layers(&r.model, r.cfg.task, output).map_err(py_err)?;
                let n = r.prep.graph.num_nodes();
                if let Some(ids) = &ids {
                    if let Some((i, &x)) = ids
                        .iter()
                        .enumerate()
                        .find(|(_, &x)| x < 0 || x as usize >= n)
                    {
                        return Err(PyValueError::new_err(format!(
                            "nodes[{i}] = {x} is out of range for {n} nodes"
                        )));
                    }
                }
                let pool = saved::thread_pool(threads.unwrap_or(r.cfg.threads)).map_err(py_err)?;
                let opts = r.cfg.infer_options();
                let mut all: Vec<f32> = Vec::new();
                pool.install(|| {
                    tma_train::evaluation::infer::infer_layers_streamed(
                        &r.model,
                        &r.params,
                        &r.prep.graph,
                        &r.prep.degrees,
                        &r.prep.features,
                        layers,
                        &opts,
                        &mut |c: &[f32]| {
                            all.extend_from_slice(c);
                            Ok(())
                        },
                    )
                })
                .map_err(|e| {
                    py_err(TrainError::Dataset {
                        path: std::env::temp_dir(),
                        source: e,
                    })
                })?;
                let dim = all.len() / n.max(1);
                Ok(match ids {
                    None => (all, n, dim),
                    Some(ids) => {
                        let mut out = Vec::with_capacity(ids.len() * dim);
                        for &v in &ids {
                            let v = v as usize;
                            out.extend_from_slice(&all[v * dim..(v + 1) * dim]);
                        }
                        (out, ids.len(), dim)
                    }
                })
            })
        })?;
        let a = Array::from_shape_vec((rows, dim), data)
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok(a.into_pyarray(py))
    }

    /// Writes every node's embeddings (or logits) to the `.npy` file `out` within
    /// `memory_budget` bytes (see `tma.Model.embed`); returns the report as JSON.
    #[pyo3(signature = (out, dataset=None, output="embeddings", memory_budget=1u64 << 30, scratch_dir=None, threads=None))]
    #[allow(clippy::too_many_arguments)]
    fn _embed(
        &self,
        py: Python<'_>,
        out: PathBuf,
        dataset: Option<&Bound<'_, PyDataset>>,
        output: &str,
        memory_budget: u64,
        scratch_dir: Option<PathBuf>,
        threads: Option<usize>,
    ) -> PyResult<String> {
        let output: EmbedOutput = output
            .parse()
            .map_err(|e| PyValueError::new_err(format!("output={output:?}: {e}")))?;
        if out.exists() {
            return Err(PyFileExistsError::new_err(format!(
                "out {}: the file exists; remove it or choose another path",
                out.display()
            )));
        }
        if memory_budget < 16 << 20 {
            return Err(PyValueError::new_err(format!(
                "memory_budget: at least 16MiB (got {memory_budget} bytes)"
            )));
        }
        let d = dataset.map(|d| d.get());
        py.detach(|| {
            guarded(|| {
                let r = self.ready(d)?;
                let layers = saved::embed_layers(&r.model, r.cfg.task, output).map_err(py_err)?;
                let pool = saved::thread_pool(threads.unwrap_or(r.cfg.threads)).map_err(py_err)?;
                let mut opts = r.cfg.infer_options();
                opts.memory_budget = memory_budget;
                opts.scratch_dir = scratch_dir.clone();
                let rep = pool
                    .install(|| {
                        saved::embed_to_npy(&r.model, &r.params, &r.prep, layers, &out, &opts)
                    })
                    .map_err(py_err)?;
                Ok(serde_json::to_string(&rep).expect("a report serializes"))
            })
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "tma.Model(path={:?}, {} {}, {} layers, hidden {})",
            self.saved.path.display().to_string(),
            self.saved.config.train.model,
            self.saved.config.train.task,
            self.saved.config.train.num_layers,
            self.saved.config.train.hidden
        )
    }
}

/// Opens a saved model: see `tma.load_model`.
#[pyfunction]
#[pyo3(signature = (path, which="best"))]
fn _load_model(py: Python<'_>, path: PathBuf, which: &str) -> PyResult<PyModel> {
    let which = parse_which(which)?;
    let saved = py.detach(|| guarded(|| SavedModel::open(&path, which).map_err(py_err)))?;
    let summary = path
        .is_dir()
        .then(|| std::fs::read_to_string(path.join("summary.json")).ok())
        .flatten();
    Ok(PyModel {
        saved,
        summary,
        own: std::sync::Mutex::new(None),
    })
}

/// The option keys `tma.train` accepts (the config-file keys) and their defaults for `task`,
/// as JSON.
#[pyfunction]
#[pyo3(signature = (task="node"))]
fn _defaults(task: &str) -> PyResult<String> {
    let t: tma_train::Task = task.parse().map_err(PyValueError::new_err)?;
    let mut v = serde_json::to_value(TrainConfig::defaults_for(t)).expect("serializes");
    // the encoders' own options (GAT's heads, ...) with their declared defaults
    for (o, _) in tma_nn::EncoderKind::all_options() {
        v[o.name] = option_json(o.default);
    }
    Ok(v.to_string())
}

fn option_json(v: tma_nn::OptionValue) -> serde_json::Value {
    match v {
        tma_nn::OptionValue::Int(i) => i.into(),
        tma_nn::OptionValue::Float(f) => f.into(),
    }
}

/// The registered encoders as a JSON array, in registry order: `[{"name", "about", "aliases",
/// "options": [{"name", "default", "help"}]}]` (`tma.encoders()`).
#[pyfunction]
fn _encoders() -> String {
    let list: Vec<serde_json::Value> = tma_nn::EncoderKind::ALL
        .iter()
        .map(|k| {
            let options: Vec<serde_json::Value> = k
                .options()
                .iter()
                .map(|o| {
                    serde_json::json!({"name": o.name, "default": option_json(o.default), "help": o.help})
                })
                .collect();
            serde_json::json!({
                "name": k.name(), "about": k.about(), "aliases": k.aliases(), "options": options
            })
        })
        .collect();
    serde_json::Value::Array(list).to_string()
}

/// The option table of `tma train` / `tma.train` as JSON: one object per option (`key`,
/// `flag`, `aliases`, `scope`, `value`, `default`, `used_by`, `help`, `invalid`), from the
/// library's table (`tma_train::options::table::rows`).
#[pyfunction]
fn _option_table() -> String {
    use tma_train::options::table::{self, Scope};
    let rows: Vec<serde_json::Value> = table::rows()
        .iter()
        .filter(|o| !o.hidden)
        .map(|o| {
            serde_json::json!({
                "key": o.key,
                "flag": o.cli_flag(),
                "aliases": o.aliases,
                "scope": match o.scope { Scope::Config => "config", Scope::Run => "run", Scope::Cli => "cli" },
                "value": o.kind.value_name(),
                "default": table::default_text(o),
                "used_by": o.applies.describe(),
                "help": o.help,
                "invalid": o.invalid,
            })
        })
        .collect();
    serde_json::Value::Array(rows).to_string()
}

/// The native module.
#[pymodule]
fn _tma(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDataset>()?;
    m.add_class::<PyRun>()?;
    m.add_class::<PyModel>()?;
    m.add_function(wrap_pyfunction!(_load_model, m)?)?;
    m.add_function(wrap_pyfunction!(_train, m)?)?;
    m.add_function(wrap_pyfunction!(_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(_encoders, m)?)?;
    m.add_function(wrap_pyfunction!(_partition, m)?)?;
    m.add("OPTION_ALIASES", tma_train::options::aliases())?;
    m.add_function(wrap_pyfunction!(_option_table, m)?)?;
    m.add_function(wrap_pyfunction!(_partition_names, m)?)?;
    // whether `engine='mpi'` is available (the package built with the `mpi` feature)
    m.add("HAS_MPI", cfg!(feature = "mpi"))?;
    Ok(())
}
