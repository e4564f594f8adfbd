"""tma from Python: train GNNs with time-based model averaging (RandomTMA / SuperTMA).

    import tma
    ds = tma.Dataset.load("../shared/datasets/planetoid_cora")
    run = tma.train(ds, method="random-tma", trainers=4, sync_every="5s", time_limit="20s")
    run.summary["best_test"]["value"]
    run.evaluate()                         # {"val": {...}, "test": {...}}, the summary's values
    model = tma.load_model(run.dir)        # a saved model: evaluate / embeddings / embed

The options of :func:`train` are those of ``tma train`` (the same names as its TOML config
keys, the same defaults: one source, the Rust library's ``TrainConfig``); runs write the same
run directory. Needs only NumPy; :func:`to_torch` needs PyTorch, :meth:`Dataset.from_pyg`
PyTorch Geometric.
"""

from __future__ import annotations

import datetime as _dt
import json as _json
import math as _math
import os as _os
import warnings as _warnings
from typing import Any, Callable, Dict, Iterable, Optional, Union

import numpy as _np

from . import _tma
from ._safetensors import load_safetensors
from ._torch import to_torch

__all__ = [
    "Dataset",
    "Run",
    "Model",
    "train",
    "resume",
    "load_model",
    "partition",
    "partition_names",
    "compare",
    "defaults",
    "option_names",
    "options",
    "encoders",
    "load_safetensors",
    "to_torch",
    "HAS_MPI",
]

HAS_MPI: bool = _tma.HAS_MPI
"""Whether this build of the package can run ``engine="mpi"`` (built with the ``mpi``
feature: ``MATURIN_PEP517_ARGS="--features python,mpi" pip install ./python``)."""

Run = _tma.Run
"""A finished run: ``rounds`` (list of dicts), ``summary`` (dict), ``config``, ``dir``,
``best_params()`` / ``final_params()`` (``{name: numpy.ndarray}``), ``embeddings(nodes=None,
which="best")``, ``evaluate(which="best")``, ``inference_inputs()``."""


def _embeddings(self, nodes=None, which="best"):
    """Encoder output of the ``which`` model ("best" or "final"): node task logits, link task
    embeddings; exact full-neighbour inference on the evaluation graph. ``nodes``: ids (all
    nodes when None). Returns float32 ``[len(nodes), out_dim]``."""
    if nodes is not None:
        nodes = _np.ascontiguousarray(_np.asarray(nodes).reshape(-1), dtype=_np.int64)
    return self._embeddings(nodes, which)


def _evaluate(self, which="best"):
    """Metrics of the ``which`` model ("best" or "final") on the run's validation and test
    splits, evaluated as the run evaluates them: ``{"val": {"metric", "value", "all"},
    "test": {...}}``. The best model's values are the summary's ``best_val`` / ``best_test``,
    exactly."""
    return _json.loads(self._evaluate(which))


# the native class is frozen; attach the friendly wrappers
try:
    Run.embeddings = _embeddings  # type: ignore[attr-defined]
    Run.evaluate = _evaluate  # type: ignore[attr-defined]
except (AttributeError, TypeError):  # pragma: no cover - abi3 classes accept attributes
    pass


def _ids(name: str, a: Any, n: Optional[int]) -> _np.ndarray:
    """Node ids from an index array or a boolean mask (PyG's ``train_mask``)."""
    arr = _np.asarray(a)
    if arr.dtype == _np.bool_:
        if arr.ndim != 1:
            raise ValueError(f"{name}: a mask must be 1-d, got shape {list(arr.shape)}")
        if n is not None and arr.shape[0] != n:
            raise ValueError(f"{name}: mask has {arr.shape[0]} entries but the graph has {n} nodes")
        return _np.flatnonzero(arr).astype(_np.int64)
    if arr.ndim != 1 or not _np.issubdtype(arr.dtype, _np.integer):
        raise ValueError(
            f"{name}: expected a 1-d integer array of node ids or a boolean mask, "
            f"got dtype {arr.dtype} shape {list(arr.shape)}"
        )
    return _np.ascontiguousarray(arr, dtype=_np.int64)


class Dataset:
    """A graph with node features, labels and an optional split.

    Build it with :meth:`load` (a dataset directory), :meth:`from_numpy` or :meth:`from_pyg`.
    """

    def __init__(self, native):  # use the constructors below
        self._native = native

    # ---- constructors
    @staticmethod
    def load(
        path: Union[str, "_os.PathLike[str]"],
        format: Optional[str] = None,
        undirected: bool = False,
    ) -> "Dataset":
        """A dataset in any format ``tma train --dataset PATH`` reads (docs/dataset-format.md):
        tma's ``.npy`` directory or on-disk graph, an OGB node-property directory, an OGB
        link-property directory (``dataset/ogbl_citation2``, ``ogbl_collab``, ...: its
        ``split/<type>/*.pt`` split and negatives used as given, OGB's metric), a SNAP edge
        list (``.txt``/``.txt.gz``), a gnn-benchmark/PyG ``.npz`` file or a CSV edge list with a
        header. ``format`` (``"tma"``, ``"ogb"``, ``"snap"``, ``"npz"``, ``"csv"``) is detected
        when ``None``; ``undirected=True`` adds the reverse of every arc of an edge list
        (``--undirected``). Runs reload it with their own ``split_index`` and ``seed``, exactly
        as ``tma train --dataset PATH --format F``. Errors: ``FileNotFoundError`` / ``OSError``
        for files, ``ValueError`` for bad contents or an unknown format (tma's message names the
        file and line)."""
        return Dataset(_tma.Dataset._load(_os.fspath(path), format, undirected))

    @staticmethod
    def from_numpy(
        edge_index,
        x=None,
        y=None,
        train_idx=None,
        val_idx=None,
        test_idx=None,
        *,
        num_nodes: Optional[int] = None,
        directed: bool = False,
        name: str = "numpy",
        allow_split_overlap: bool = False,
    ) -> "Dataset":
        """A dataset from NumPy arrays (PyG conventions).

        * ``edge_index``: integer ``[2, E]`` (row 0 sources, row 1 destinations). Undirected
          graphs (``directed=False``, the default) list both directions of every edge
          (checked). Self-loops and duplicate arcs are removed (said in a warning).
        * ``x``: float ``[N, F]`` (or a ``scipy.sparse`` matrix, kept sparse); None: 32
          structural columns (log-degree + seeded random values), as for a featureless dataset
          (a run keeps the log-degree column and a constant one where each trainer has fewer than 256
          training nodes or 4096 training edges: option ``featureless``, docs/decisions/0031).
        * ``y``: int ``[N]`` classes (``-1`` = unlabelled) or 0/1 ``[N, C]`` multi-label.
        * ``train_idx`` / ``val_idx`` / ``test_idx``: node ids or boolean masks (all three or
          none; none: the run draws a seeded 60/20/20 split).

        Arrays already int64 / float32 and C-contiguous are read in place (no intermediate
        copy); tma then keeps its own layout (CSR graph, one copy of the features).
        """
        ei = _np.asarray(edge_index)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise ValueError(f"edge_index: expected shape [2, E], got {list(ei.shape)}")
        if not _np.issubdtype(ei.dtype, _np.integer):
            raise ValueError(f"edge_index: expected integer node ids, got dtype {ei.dtype}")
        ei = _np.ascontiguousarray(ei, dtype=_np.int64)
        x_dense = x_sparse = None
        if x is not None:
            if hasattr(x, "tocsr") and not isinstance(x, _np.ndarray):
                m = x.tocsr()
                x_sparse = (
                    _np.ascontiguousarray(m.indptr, dtype=_np.int64),
                    _np.ascontiguousarray(m.indices, dtype=_np.int64),
                    _np.ascontiguousarray(m.data, dtype=_np.float32),
                    int(m.shape[1]),
                )
                if num_nodes is None:
                    num_nodes = int(m.shape[0])
            else:
                xa = _np.asarray(x)
                if xa.ndim != 2:
                    raise ValueError(f"x: expected shape [N, F], got {list(xa.shape)}")
                if not (_np.issubdtype(xa.dtype, _np.floating) or _np.issubdtype(xa.dtype, _np.integer)
                        or xa.dtype == _np.bool_):
                    raise ValueError(f"x: expected numbers, got dtype {xa.dtype}")
                x_dense = _np.ascontiguousarray(xa, dtype=_np.float32)
        y_classes = y_multi = None
        if y is not None:
            ya = _np.asarray(y)
            if ya.ndim == 1:
                if not _np.issubdtype(ya.dtype, _np.integer):
                    raise ValueError(f"y: class ids must be integers, got dtype {ya.dtype}")
                y_classes = _np.ascontiguousarray(ya, dtype=_np.int64)
            elif ya.ndim == 2:
                if ya.dtype != _np.bool_ and not _np.issubdtype(ya.dtype, _np.integer):
                    raise ValueError(f"y: multi-label targets must be 0/1, got dtype {ya.dtype}")
                if ya.size and (ya.min() < 0 or ya.max() > 1):
                    raise ValueError("y: multi-label targets must be 0 or 1")
                y_multi = _np.ascontiguousarray(ya, dtype=_np.uint8)
            else:
                raise ValueError(f"y: expected shape [N] or [N, C], got {list(ya.shape)}")
        given = [a is not None for a in (train_idx, val_idx, test_idx)]
        split = None
        if any(given):
            if not all(given):
                missing = [n for n, g in zip(("train_idx", "val_idx", "test_idx"), given) if not g]
                raise ValueError(f"a fixed split needs train_idx, val_idx and test_idx; missing {', '.join(missing)}")
            # the node count a mask must match: num_nodes, else what x, y or edge_index imply
            # (the native checks then agree with it or name the mismatch)
            n = num_nodes
            if n is None:
                if x_dense is not None:
                    n = int(x_dense.shape[0])
                elif y_classes is not None:
                    n = int(y_classes.shape[0])
                elif y_multi is not None:
                    n = int(y_multi.shape[0])
                elif ei.size:
                    n = int(ei.max()) + 1
            split = (
                _ids("train_idx", train_idx, n),
                _ids("val_idx", val_idx, n),
                _ids("test_idx", test_idx, n),
            )
        native = _tma.Dataset._from_arrays(
            name, ei, num_nodes, bool(directed), x_dense, x_sparse, y_classes, y_multi, split,
            bool(allow_split_overlap),
        )
        ds = Dataset(native)
        loops, dups = native.removed
        if loops or dups:
            _warnings.warn(
                f"edge_index: removed {loops} self-loops and {dups} duplicate arcs",
                stacklevel=2,
            )
        return ds

    @staticmethod
    def from_pyg(data, *, name: str = "pyg", directed: Optional[bool] = None) -> "Dataset":
        """A dataset from a ``torch_geometric.data.Data`` (``edge_index``, ``x``, ``y``,
        ``train_mask`` / ``val_mask`` / ``test_mask``; 2-d masks: the first split).
        ``directed``: None asks PyG (``data.is_directed()``)."""
        try:
            import torch_geometric  # noqa: F401  (optional dependency)
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("Dataset.from_pyg needs torch_geometric (pip install torch_geometric)") from e

        def np_of(t):
            return None if t is None else t.detach().cpu().numpy()

        masks = [getattr(data, k, None) for k in ("train_mask", "val_mask", "test_mask")]
        masks = [None if m is None else (m[:, 0] if m.dim() == 2 else m) for m in masks]
        if directed is None:
            directed = bool(data.is_directed())
        return Dataset.from_numpy(
            np_of(data.edge_index),
            x=np_of(getattr(data, "x", None)),
            y=np_of(getattr(data, "y", None)),
            train_idx=np_of(masks[0]),
            val_idx=np_of(masks[1]),
            test_idx=np_of(masks[2]),
            num_nodes=int(data.num_nodes),
            directed=directed,
            name=name,
        )

    # ---- properties
    name = property(lambda self: self._native.name, doc="The dataset's name.")
    num_nodes = property(lambda self: self._native.num_nodes, doc="Number of nodes.")
    num_edges = property(
        lambda self: self._native.num_edges,
        doc="Arcs of the graph (an undirected edge counts twice), after cleaning.",
    )
    directed = property(lambda self: self._native.directed, doc="Whether the graph is directed.")
    num_features = property(lambda self: self._native.num_features, doc="Feature width.")
    num_classes = property(lambda self: self._native.num_classes, doc="Classes (or labels).")
    path = property(lambda self: self._native.path, doc="Directory it was loaded from, or None.")

    def __repr__(self) -> str:
        return repr(self._native)


class Model:
    """A saved model (:func:`load_model`): a model file with the configuration of its run.

    Its data is the run's own by default: the dataset its ``config.toml`` records, split again
    from the run's seed and options exactly as the run split it (prepared once, at the first
    use); ``dataset=`` (a :class:`Dataset` or a path) evaluates or embeds on other data of the
    same feature width (and classes)."""

    def __init__(self, native):  # use load_model
        self._native = native

    path = property(lambda self: self._native.path, doc="The model file.")
    config = property(lambda self: self._native.config, doc="The run's configuration (dict).")
    summary = property(
        lambda self: self._native.summary,
        doc="The run's summary.json (dict) when opened from a run directory, else None.",
    )

    def params(self) -> Dict[str, _np.ndarray]:
        """The parameters, ``{name: numpy.ndarray}`` (PyTorch names and shapes)."""
        return self._native.params()

    def evaluate(self, dataset=None, *, eval_memory: Optional[int] = None,
                 threads: Optional[int] = None) -> Dict[str, Any]:
        """Metrics on the validation and test splits: ``{"val": {"metric", "value", "all"},
        "test": {...}}``, as ``tma eval`` prints them; on the run's own data, the run's
        ``eval_memory`` and the best model, the values of its summary's ``best_val`` /
        ``best_test``, exactly. ``eval_memory``: bytes inference may take (default the
        run's). Warnings of the data preparation are given as Python warnings. Errors:
        ``ValueError`` naming the model file and the dataset when they do not fit."""
        out = _json.loads(self._native._evaluate(_native_dataset(dataset), eval_memory, threads))
        for w in out.pop("warnings", []):
            _warnings.warn(w, stacklevel=2)
        return out

    def embeddings(self, nodes=None, dataset=None, *, output: str = "embeddings",
                   threads: Optional[int] = None) -> _np.ndarray:
        """Every node's embeddings in memory, float32 ``[N, width]`` (rows ``nodes`` when
        given): ``output="embeddings"`` the encoder's output before the head (a link model's
        node embeddings ``[N, hidden]``, computed on the training graph as evaluation reads
        it; a node classifier's hidden layer entering its last layer ``[N, hidden]``), or
        ``"logits"`` (a node classifier's ``[N, num_classes]``). The values ``tma embed``
        writes. For graphs whose ``N x width`` floats do not fit in memory: :meth:`embed`."""
        if nodes is not None:
            nodes = _np.ascontiguousarray(_np.asarray(nodes).reshape(-1), dtype=_np.int64)
        return self._native._embeddings(nodes, _native_dataset(dataset), output, threads)

    def embed(self, out, dataset=None, *, output: str = "embeddings",
              memory_budget: Union[int, str] = "1GiB", scratch_dir=None,
              threads: Optional[int] = None) -> Dict[str, Any]:
        """Writes every node's embeddings (as :meth:`embeddings`) to the ``.npy`` file ``out``
        (float32 ``[N, width]``, row ``v`` for node ``v``; refused if it exists), computed a
        chunk of nodes at a time within ``memory_budget`` (bytes, or "512MiB" / "2GiB") and
        streamed to the file, as ``tma embed`` does. Returns ``{"rows", "dim", "bytes",
        "sha256"}``."""
        return _json.loads(
            self._native._embed(
                _os.fspath(out), _native_dataset(dataset), output, _bytes("memory_budget", memory_budget),
                None if scratch_dir is None else _os.fspath(scratch_dir), threads,
            )
        )

    def __repr__(self) -> str:
        return repr(self._native)


def _native_dataset(dataset):
    if dataset is None:
        return None
    if isinstance(dataset, (str, _os.PathLike)):
        dataset = Dataset.load(dataset)
    if not isinstance(dataset, Dataset):
        raise ValueError(f"dataset: expected a tma.Dataset, a dataset path or None, got {type(dataset).__name__}")
    return dataset._native


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
          "tib": 1 << 40}


def _bytes(name: str, v: Union[int, str]) -> int:
    """A size: bytes, or a string with a unit of powers of 1024 ("512MiB", "2G")."""
    if isinstance(v, bool):
        raise ValueError(f"{name}: expected a size such as \"512MiB\", got {v!r}")
    if isinstance(v, int):
        return v
    t = str(v).strip()
    i = len(t) - len(t.lstrip("0123456789."))
    num, unit = t[:i], t[i:].strip().lower()
    if not num or unit not in _UNITS:
        raise ValueError(f"{name}: {v!r} is not a size (e.g. 512MiB, 2GiB)")
    return int(float(num) * _UNITS[unit])


def load_model(path: Union[str, "_os.PathLike[str]"], which: str = "best") -> Model:
    """A saved model: ``path`` is a run directory (its ``model_best.safetensors``, or
    ``model_final`` with ``which="final"``) or a model file with its run's ``config.toml``
    next to it. Errors: ``ValueError`` naming the path (no such model, no ``config.toml``
    next to a model file, not a safetensors file)."""
    return Model(_tma._load_model(_os.fspath(path), which))


def defaults(task: str = "node") -> Dict[str, Any]:
    """The options :func:`train` takes and their defaults for ``task`` (those of ``tma
    train``; durations as strings)."""
    return _json.loads(_tma._defaults(task))


def encoders() -> Dict[str, Any]:
    """The registered encoders (``model=`` values), in registry order: ``{name: {"about",
    "aliases", "options": {key: {"default", "help"}}}}``. An encoder's own options (GAT's
    ``heads``) are keyword arguments of :func:`train` like any other option; given with
    another encoder they are ignored with a warning."""
    return {
        e["name"]: {
            "about": e["about"],
            "aliases": e["aliases"],
            "options": {o["name"]: {"default": o["default"], "help": o["help"]} for o in e["options"]},
        }
        for e in _json.loads(_tma._encoders())
    }


def option_names() -> list:
    """Every option name :func:`train` accepts as a keyword of ``options`` (config-file keys,
    and the aliases ``trainers`` / ``layers``)."""
    return sorted(list(defaults().keys()) + [a for a, _ in _tma.OPTION_ALIASES])


def options() -> list:
    """The option table of ``tma train`` and :func:`train`, one dict per option: ``key`` (the
    config-file key and keyword), ``flag`` (the CLI's), ``aliases``, ``scope`` (``"config"``:
    a keyword of ``options``; ``"run"``: a keyword of :func:`train` itself such as ``out``;
    ``"cli"``: the CLI's alone), ``value``, ``default`` (text, per task where they differ),
    ``used_by``, ``help``, ``invalid`` (values, as JSON text, that every front end refuses).
    The same table writes ``tma train --help`` and the README's option table."""
    return _json.loads(_tma._option_table())


def _duration(name: str, v: Any) -> Any:
    """Durations as tma writes them: strings pass ("30s", "2min"); numbers are seconds;
    ``datetime.timedelta`` too."""
    if isinstance(v, _dt.timedelta):
        v = v.total_seconds()
    if isinstance(v, bool):
        raise ValueError(f"option '{name}': expected a duration such as \"30s\", got {v!r}")
    if isinstance(v, (int, float)):
        if not v >= 0:
            raise ValueError(f"option '{name}': expected a duration such as \"30s\", got {v!r}")
        return f"{int(round(v * 1000))}ms"
    return v


_DURATIONS = ("sync_every", "time_limit", "round_timeout", "val_check_interval")


def train(
    dataset: Union[Dataset, str, "_os.PathLike[str]", None] = None,
    *,
    on_round: Optional[Callable[[dict], Any]] = None,
    out: Union[str, "_os.PathLike[str]", None] = None,
    fail: Union[Dict[int, Any], Iterable[str], None] = None,
    gen_nodes: Optional[int] = None,
    partitions: Union[str, "_os.PathLike[str]", None] = None,
    engine: Optional[str] = None,
    join_timeout: Any = None,
    tensorboard: Union[str, "_os.PathLike[str]", None] = None,
    **options: Any,
) -> Optional[Run]:
    """Trains a GNN and returns the finished :class:`Run`.

    ``dataset``: a :class:`Dataset`, a dataset directory, or None for tma's generated graph
    (``gen_nodes`` nodes, default 10000). ``options`` are ``tma train``'s, by their config-file
    names, with its defaults (see :func:`defaults`): ``method="random-tma"``,
    ``trainers=4``, ``sync_every="5s"``, ``sync_ramp=16`` (the first span averaged 16 times),
    ``time_limit="30s"``, ``task="node"``,
    ``model="sage"``, ``hidden=256``, ``layers=2``, ``fanouts=[10, 25]``, ``lr=1e-3``,
    ``seed=0``, ... Durations are strings ("30s", "2min") or seconds. An unknown option is a
    ``ValueError`` naming it.

    ``on_round(record)`` is called with each round's dict (as in ``rounds.jsonl``) on the
    calling thread; training runs on another thread without the GIL. Ctrl-C (or an exception
    from ``on_round``) stops the run after the round in flight: the checkpoint and a summary
    marked interrupted are written, and ``KeyboardInterrupt`` (or that exception) is raised.
    ``out``: the run directory (default ``runs/<dataset>-<method>-<time>``); ``fail``:
    ``{trainer: seconds}`` or ``["1@10s", ...]`` failures to inject.

    ``partitions``: a partition directory (written by :func:`partition` with ``out`` or
    ``tma partition --out``) instead of ``dataset``; its manifest fixes the data options.
    ``engine``: ``"in-process"`` (default: trainer threads of this process) or ``"mpi"``: this
    Python process is one rank of an ``mpirun -np M+1`` job (every rank runs the same script;
    needs ``partitions`` and a package built with MPI, see :data:`HAS_MPI`). Rank 0 coordinates
    and returns the :class:`Run`; ranks 1..M each train one part and return ``None``.
    ``join_timeout``: how long MPI ranks wait for each other to start and join (default 120 s).
    ``tensorboard``: a folder; the round metrics (validation metrics, training loss, steps, round
    times; test metrics at the end) also go, as the run goes, to a TensorBoard event file under
    ``<tensorboard>/<run directory's name>/`` (``tensorboard --logdir <tensorboard>``), as
    ``tma train --tensorboard``; a resumed run writes there again.
    ``python -m tma train --partitions DIR --engine mpi ...`` does the same from a shell.
    """
    return _run(dataset, on_round, out, fail, gen_nodes, options, resume=False,
                partitions=partitions, engine=engine, join_timeout=join_timeout,
                tensorboard=tensorboard)


def resume(
    run_dir: Union[str, "_os.PathLike[str]"],
    *,
    dataset: Union[Dataset, str, "_os.PathLike[str]", None] = None,
    on_round: Optional[Callable[[dict], Any]] = None,
    engine: Optional[str] = None,
    join_timeout: Any = None,
    tensorboard: Union[str, "_os.PathLike[str]", None] = None,
    **options: Any,
) -> Optional[Run]:
    """Continues the interrupted run in ``run_dir`` from its last checkpoint, as ``tma train
    --resume RUN_DIR``: its ``config.toml`` is the configuration and ``options`` override it
    (e.g. a longer ``time_limit``; data, partition and model options must stay the run's);
    rounds, steps and the training clock continue. ``dataset``: the run's recorded dataset
    when None (a run trained on arrays needs the same arrays again). Returns the finished
    :class:`Run`; errors as :func:`train` (``ValueError`` naming the run directory for a
    finished run or changed options). ``engine="mpi"``: this process is one rank of an
    ``mpirun`` job that continues a run made on a partition directory (as :func:`train`:
    rank 0 returns the :class:`Run`, the trainer ranks ``None``); ``python -m tma train
    --resume RUN_DIR --engine mpi`` does the same from a shell. ``tensorboard``: as
    :func:`train`; by default the folder the run wrote its TensorBoard event file under, if it
    did."""
    return _run(dataset, on_round, run_dir, None, None, options, resume=True,
                engine=engine, join_timeout=join_timeout, tensorboard=tensorboard)


def _run(dataset, on_round, out, fail, gen_nodes, options, *, resume: bool,
         partitions=None, engine=None, join_timeout=None, tensorboard=None) -> Optional[Run]:
    for k in _DURATIONS:
        if k in options:
            options[k] = _duration(k, options[k])
    for k in ("fanouts", "eval_fanouts"):
        if k in options and isinstance(options[k], str):
            options[k] = [int(f) for f in options[k].split(",") if f.strip()]
        elif k in options and isinstance(options[k], int) and not isinstance(options[k], bool):
            options[k] = [options[k]]  # one layer's fanout, as `--fanouts 10`
    for k, v in options.items():
        if isinstance(v, float) and not _math.isfinite(v):
            raise ValueError(f"option '{k}' = {v}: '{v}' is not a finite number")
    try:
        text = _json.dumps(options)
    except TypeError as e:
        bad = [k for k, v in options.items() if not _jsonable(v)]
        raise ValueError(f"option '{bad[0] if bad else '?'}': {e}") from None
    if isinstance(dataset, (str, _os.PathLike)):
        dataset = Dataset.load(dataset)
    if dataset is not None and not isinstance(dataset, Dataset):
        raise ValueError(
            f"dataset: expected a tma.Dataset, a dataset directory or None, got {type(dataset).__name__}"
        )
    plan = []
    for t, at in _fail_items(fail):
        plan.append((t, at))
    run = _tma._train(
        None if dataset is None else dataset._native,
        text,
        None if out is None else _os.fspath(out),
        plan,
        gen_nodes,
        on_round,
        None if partitions is None else _os.fspath(partitions),
        engine,
        None if join_timeout is None else _duration("join_timeout", join_timeout),
        resume,
        None if tensorboard is None else _os.fspath(tensorboard),
    )
    if run is None:  # an MPI trainer rank: the run belongs to rank 0
        return None
    for w in run.summary.get("warnings", []):
        _warnings.warn(w, stacklevel=3)
    return run


def _jsonable(v: Any) -> bool:
    try:
        _json.dumps(v)
        return True
    except TypeError:
        return False


def _fail_items(fail) -> Iterable:
    """``(trainer, duration)`` pairs from ``{trainer: seconds | "10s"}``, ``["1@10s"]`` or
    ``"1@10s,2@20s"`` (as ``tma train --fail``)."""
    if fail is None:
        return []
    if isinstance(fail, str):
        fail = [f for f in fail.split(",") if f]
    if isinstance(fail, dict):
        items = list(fail.items())
    else:
        items = []
        for f in fail:
            t, sep, at = str(f).partition("@")
            if not sep or not t.strip().isdigit():
                raise ValueError(f"fail '{f}': expected TRAINER@DURATION, e.g. 1@10s")
            items.append((int(t), at))
    return [(int(t), str(_duration(f"fail {t}", at))) for t, at in items]


def partition_names() -> Dict[str, str]:
    """Every name :func:`partition` takes as ``method``, with the layout it makes, from the
    method registry of the native module: the layouts (``random``, ``super``, ``metis``,
    ``shared-examples``, ``whole``) and the training methods (``random-tma`` -> ``random``,
    ``psgd-pa`` and ``llcg`` -> ``metis``, ``ggs`` -> ``shared-examples``, ...)."""
    return dict(_tma._partition_names())


def partition(
    dataset: Union[Dataset, str, "_os.PathLike[str]"],
    method: str = "random",
    parts: int = 4,
    *,
    out: Union[str, "_os.PathLike[str]", None] = None,
    **options: Any,
) -> Dict[str, Any]:
    """Partitions a dataset as ``tma partition`` does: ``method`` a layout or a training
    method's name (its layout; :func:`partition_names` lists them: random | super | metis |
    shared-examples | whole, random-tma | super-tma | psgd-pa | llcg | ggs | centralized),
    ``parts`` M, and the training options that matter (``drop_parts``, ``super_nodes``,
    ``seed``; with ``out``, also ``task``, ``normalize_features``, ...).

    Returns ``{"assignment": uint32 [N] part of every node, "report": per-part statistics
    (edges kept, label / degree divergence; as partition.json), "assignment_sha256": ...}``;
    with ``out``, also writes a partition directory for ``tma train --partitions`` (any method
    whose layout it is trains from it) and adds its ``"manifest"``. A layout that assigns no
    node to a part (``shared-examples``, ``whole``) needs ``out``; its assignment, report and
    sha256 are ``None``."""
    if isinstance(dataset, (str, _os.PathLike)):
        dataset = Dataset.load(dataset)
    if not isinstance(dataset, Dataset):
        raise ValueError(f"dataset: expected a tma.Dataset or a dataset directory, got {type(dataset).__name__}")
    opts = dict(options)
    opts["method"] = method
    opts["num_trainers"] = parts
    text = _json.dumps(opts)
    assignment, report, sha, manifest = _tma._partition(
        dataset._native, text, None if out is None else _os.fspath(out)
    )
    result = {
        "assignment": assignment,
        "report": _json.loads(report),
        "assignment_sha256": sha,
    }
    if manifest is not None:
        result["manifest"] = _json.loads(manifest)
    for w in (result["report"] or {}).get("warnings", []):
        _warnings.warn(w, stacklevel=2)
    return result


def compare(
    dataset: Union[Dataset, str, "_os.PathLike[str]", None],
    methods: Iterable[str] = ("random-tma", "super-tma", "psgd-pa"),
    seeds: Iterable[int] = (0,),
    *,
    out: Union[str, "_os.PathLike[str]"],
    on_round: Optional[Callable[[dict], Any]] = None,
    **options: Any,
) -> list:
    """Every method with every seed on the same data, model and budget (as ``tma compare``
    runs them; its table, plot and time-to-target are the CLI's). Each run is a :func:`train`
    with ``out=<out>/<method>-seed<seed>``; ``on_round(record)`` gets ``method`` and ``seed``
    added. Returns one dict per run (pandas-friendly): ``method``, ``seed``, ``dir``,
    ``rounds``, ``final_val``, ``final_test``, ``best_val``, ``best_test`` (metric values),
    ``metric``, ``steps_per_trainer``, ``interrupted``. Unlike ``tma compare``, each run splits
    and partitions the data with its own seed (the CLI makes one partition per layout, shared
    by every seed) and an interrupted comparison is not continued."""
    if "method" in options or "seed" in options:
        raise ValueError("compare: give methods= and seeds= (lists), not method= / seed=")
    if isinstance(dataset, (str, _os.PathLike)):
        dataset = Dataset.load(dataset)
    methods, seeds = list(methods), list(seeds)
    if not methods or not seeds:
        raise ValueError("compare: methods and seeds must not be empty")
    rows = []
    for m in methods:
        for s in seeds:
            cb = None
            if on_round is not None:
                cb = (lambda m_, s_: lambda r: on_round(dict(r, method=m_, seed=s_)))(m, s)
            opts = dict(options)
            if opts.get("tensorboard") is not None:
                # as `tma compare`: <tensorboard>/<out's name>/<method>-seed<seed>/
                opts["tensorboard"] = _os.path.join(
                    _os.fspath(opts["tensorboard"]), _os.path.basename(_os.path.normpath(_os.fspath(out))))
            if m == "centralized":
                # as `tma compare`: one trainer on the whole graph (no parts to drop or fail)
                for k in ("drop_parts", "fail", "trainers", "num_trainers"):
                    opts.pop(k, None)
            run = train(dataset, method=m, seed=s, out=_os.path.join(_os.fspath(out), f"{m}-seed{s}"),
                        on_round=cb, **opts)
            sm = run.summary
            rows.append(
                dict(
                    method=m,
                    seed=s,
                    dir=run.dir,
                    rounds=sm["rounds"],
                    metric=sm["best_val"]["metric"],
                    final_val=sm["final_val"]["value"],
                    final_test=sm["final_test"]["value"],
                    best_val=sm["best_val"]["value"],
                    best_test=sm["best_test"]["value"],
                    steps_per_trainer=sm["steps_per_trainer"],
                    interrupted=sm["interrupted"],
                )
            )
    return rows
