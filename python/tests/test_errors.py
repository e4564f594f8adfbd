"""Bad input through the Python API: exceptions with tma's message, never a crash."""

import json
import pathlib
import shutil

import numpy as np
import pytest

import tma

EDGES = np.array([[0, 1, 1, 2], [1, 0, 2, 1]])


def test_unknown_and_bad_options_name_the_option(tmp_path):
    ds = tma.Dataset.from_numpy(EDGES, y=np.array([0, 1, 0]))
    with pytest.raises(ValueError, match=r"unknown option 'hiden' \(options: .*hidden"):
        tma.train(ds, hiden=3, out=tmp_path / "a")
    with pytest.raises(ValueError, match=r"option 'sync_every' = \"soon\""):
        tma.train(ds, sync_every="soon", out=tmp_path / "a")
    with pytest.raises(ValueError, match=r"option 'hidden' = \"wide\""):
        tma.train(ds, hidden="wide", out=tmp_path / "a")
    with pytest.raises(ValueError, match="^invalid option: trainers must be >= 1$"):
        tma.train(ds, trainers=0, out=tmp_path / "a")
    with pytest.raises(ValueError, match=r"fanouts has 1 entries but the model has 2 layers"):
        tma.train(ds, fanouts=[3], out=tmp_path / "a")
    with pytest.raises(ValueError, match=r"^option 'method' = \"fast\": unknown method 'fast' \(expected one of: random-tma"):
        tma.train(ds, method="fast", out=tmp_path / "a")
    with pytest.raises(ValueError, match=r"option 'lr': "):
        tma.train(ds, lr=object(), out=tmp_path / "a")
    with pytest.raises(ValueError, match=r"fail: trainer 7 does not exist \(trainers are 0 to 3\)"):
        tma.train(ds, fail={7: 1.0}, out=tmp_path / "a")
    with pytest.raises(ValueError, match=r"fail: trainer 1 at 'soon': not a duration"):
        tma.train(ds, fail=["1@soon"], out=tmp_path / "a")
    with pytest.raises(ValueError, match=r"fail 'x': expected TRAINER@DURATION"):
        tma.train(ds, fail=["x"], out=tmp_path / "a")
    assert not (tmp_path / "a").exists(), "a refused run leaves no directory"


def test_bad_arrays_name_the_argument():
    with pytest.raises(ValueError, match=r"edge_index: expected shape \[2, E\], got \[4\]"):
        tma.Dataset.from_numpy(np.arange(4))
    with pytest.raises(ValueError, match=r"edge_index: expected integer node ids, got dtype float64"):
        tma.Dataset.from_numpy(EDGES.astype(float))
    with pytest.raises(ValueError, match=r"edge_index\[1, 2\] = -1: node ids must be >= 0"):
        tma.Dataset.from_numpy(np.array([[0, 1, 1], [1, 0, -1]]))
    with pytest.raises(ValueError, match=r"edge_index\[0, 1\] = 7 is out of range for 3 nodes"):
        tma.Dataset.from_numpy(np.array([[0, 7], [1, 0]]), num_nodes=3)
    with pytest.raises(ValueError, match=r"edge_index is not symmetric: it has the arc 0 -> 1 but not 1 -> 0.*directed=True"):
        tma.Dataset.from_numpy(np.array([[0], [1]]))
    assert tma.Dataset.from_numpy(np.array([[0], [1]]), directed=True).num_edges == 1
    with pytest.raises(ValueError, match=r"x has 1 non-finite value \(NaN or infinity\); the first is x\[2, 1\] = NaN"):
        tma.Dataset.from_numpy(EDGES, x=np.array([[0, 1], [2, 3], [4, np.nan]], dtype=np.float32))
    with pytest.raises(ValueError, match=r"x has 2 rows but the graph has 3 nodes"):
        tma.Dataset.from_numpy(EDGES, x=np.ones((2, 2)), num_nodes=3)
    with pytest.raises(ValueError, match=r"y\[2\] = -5: a class id must be >= 0"):
        tma.Dataset.from_numpy(EDGES, y=np.array([0, 1, -5]))
    with pytest.raises(ValueError, match=r"y: class ids must be integers"):
        tma.Dataset.from_numpy(EDGES, y=np.array([0.5, 1, 0]))
    with pytest.raises(ValueError, match=r"needs train_idx, val_idx and test_idx; missing test_idx"):
        tma.Dataset.from_numpy(EDGES, train_idx=[0], val_idx=[1])
    with pytest.raises(ValueError, match=r"train_idx and test_idx share 1 node \(first: 0\).*allow_split_overlap=True"):
        tma.Dataset.from_numpy(EDGES, train_idx=[0], val_idx=[1], test_idx=[0, 2])
    with pytest.raises(ValueError, match=r"val_idx\[0\] = 9 is out of range for 3 nodes"):
        tma.Dataset.from_numpy(EDGES, train_idx=[0], val_idx=[9], test_idx=[2])
    with pytest.raises(ValueError, match=r"train_idx: mask has 2 entries but the graph has 3 nodes"):
        tma.Dataset.from_numpy(EDGES, num_nodes=3, train_idx=np.array([True, False]), val_idx=[1], test_idx=[2])
    # regression: without num_nodes a mask of the wrong length was accepted (split 0/0/0)
    with pytest.raises(ValueError, match=r"train_idx: mask has 5 entries but the graph has 3 nodes"):
        tma.Dataset.from_numpy(EDGES, y=np.array([0, 1, 0]), train_idx=np.ones(5, bool),
                               val_idx=np.zeros(3, bool), test_idx=np.zeros(3, bool))
    with pytest.raises(ValueError, match=r"val_idx: mask has 2 entries but the graph has 3 nodes"):
        tma.Dataset.from_numpy(EDGES, train_idx=np.ones(3, bool), val_idx=np.zeros(2, bool),
                               test_idx=np.zeros(3, bool))
    # masks are taken as PyG's
    ds = tma.Dataset.from_numpy(EDGES, y=np.array([0, 1, 0]), train_idx=np.array([True, False, False]),
                                val_idx=np.array([False, True, False]), test_idx=np.array([False, False, True]))
    assert ds.num_classes == 2
    with pytest.warns(UserWarning, match="edge_index: removed 1 self-loops and 1 duplicate arcs"):
        ds = tma.Dataset.from_numpy(np.array([[0, 1, 1, 2, 2], [1, 0, 0, 2, 1]]), directed=True)
    assert ds.num_edges == 3


def test_files_give_os_errors_bad_contents_value_errors(tmp_path, cora_dir):
    with pytest.raises(FileNotFoundError, match=r"nowhere.*No such file"):
        tma.Dataset.load(tmp_path / "nowhere")
    bad = tmp_path / "bad"
    shutil.copytree(cora_dir, bad)
    (bad / "y.npy").write_bytes(b"not an npy file")
    with pytest.raises(ValueError, match=r"y.npy"):
        tma.Dataset.load(bad)
    meta = json.loads((cora_dir / "meta.json").read_text())
    del meta["directed"]
    (bad / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"meta.json.*directed"):
        tma.Dataset.load(bad)
    # an existing non-empty run directory is never overwritten
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    ds = tma.Dataset.from_numpy(EDGES, y=np.array([0, 1, 0]))
    with pytest.raises(FileExistsError, match=r"taken already exists and is not empty"):
        tma.train(ds, out=out, time_limit="1s")
    assert (out / "keep.txt").read_text() == "x"


def test_data_that_does_not_fit_the_task_is_a_value_error(tmp_path):
    ds = tma.Dataset.from_numpy(EDGES)  # no labels
    with pytest.raises(ValueError, match="label"):
        tma.train(ds, task="node", out=tmp_path / "n", time_limit="1s")
    assert not (tmp_path / "n").exists()


def test_exception_in_on_round_stops_the_run_and_is_raised(tmp_path, cora_dir):
    class Stop(Exception):
        pass

    calls = []

    def cb(r):
        calls.append(r["round"])
        raise Stop("enough")

    out = tmp_path / "cb"
    with pytest.raises(Stop, match="enough"):
        tma.train(tma.Dataset.load(cora_dir), out=out, on_round=cb, trainers=2, hidden=8,
                  sync_every="300ms", sync_ramp=0, time_limit="30s", threads=2)
    assert calls == [1], "the callback is not called again once it raised"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["rounds"] <= 2
    assert (out / "checkpoint" / "state.json").is_file()


# Every option combination `tma train` refuses, given to tma.train: the same refusal, in the
# same words (the checks live in the library: TrainConfig::validate, tma_train::options), with
# the option spelled as each front end spells it.
REFUSED = [
    # (CLI flags, Python keyword arguments, CLI message, Python message)
    (["--drop-parts", "1", "--method", "centralized"], dict(drop_parts=1, method="centralized"),
     "drop-parts 1 does not apply to method centralized", "drop-parts 1 does not apply to method centralized"),
    (["--sync-every-steps", "5", "--sync-ramp", "2"], dict(sync_every_steps=5, sync_ramp=2),
     "--sync-ramp shortens the first wall-clock spans; the step-count schedule (--sync-every-steps) has none",
     "sync_ramp shortens the first wall-clock spans; the step-count schedule (sync_every_steps) has none"),
    (["--trainers", "0"], dict(trainers=0), "trainers must be >= 1", "trainers must be >= 1"),
    (["--dropout", "1.5"], dict(dropout=1.5), "dropout must be in [0, 1)", "dropout must be in [0, 1)"),
    (["--lr", "0"], dict(lr=0.0), "lr must be > 0 and finite", "lr must be > 0 and finite"),
    # regression: the CLI said only "u64 value was too large" (TOML's words, no option named)
    (["--seed", "9223372036854775808"], dict(seed=2**63),
     "--seed: seed 9223372036854775808 is not below 2^63", "seed 9223372036854775808 is not below 2^63"),
    # regression: Python trained with clip_norm = inf (1e39 is past f32) where the CLI refused it
    (["--clip-norm", "1e39"], dict(clip_norm=1e39),
     "--clip-norm: 'inf' is not a finite number", "clip-norm must be > 0 and finite"),
    (["--fanouts", "10", "--layers", "2"], dict(fanouts=[10], layers=2),
     "fanouts has 1 entries but the model has 2 layers", "fanouts has 1 entries but the model has 2 layers"),
    (["--engine", "threads"], dict(engine="threads"),
     "--engine 'threads': expected in-process or mpi", "engine 'threads': expected in-process or mpi"),
]


def _refused_rows():
    rows = []
    for o in tma.options():
        if o["scope"] != "config":
            continue
        for bad in o["invalid"]:
            rows.append((o["key"], o["flag"], bad))
    return rows


REFUSED_VALUES = _refused_rows()


def test_the_option_table_lists_refused_values_and_every_keyword():
    assert len(REFUSED_VALUES) >= 35, REFUSED_VALUES
    keys = {o["key"] for o in tma.options() if o["scope"] == "config"}
    assert keys == set(tma.defaults()), keys ^ set(tma.defaults())
    run_keys = {o["key"] for o in tma.options() if o["scope"] == "run"}
    assert run_keys == {"dataset", "fail", "gen_nodes", "out", "partitions", "engine", "join_timeout", "tensorboard"}
    import inspect
    params = set(inspect.signature(tma.train).parameters)
    assert run_keys <= params, run_keys - params


@pytest.mark.parametrize("key,flag,bad", REFUSED_VALUES, ids=[f"{k}={b}" for k, _, b in REFUSED_VALUES])
def test_every_refused_value_of_the_option_table_is_refused_by_the_cli_and_python(tma_bin, tmp_path, key, flag, bad):
    """Each value the library's option table lists as refused, given as a flag to the CLI and
    as a keyword to tma.train: both refuse it, and the reason Python gives (after the option's
    name) is in the CLI's message."""
    import subprocess

    value = json.loads(bad)
    text = ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
    p = subprocess.run([str(tma_bin), "train", flag, text, "--out", str(tmp_path / "cli")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0, p.stderr
    with pytest.raises(ValueError) as e:
        tma.train(None, out=tmp_path / "py", **{key: value})
    msg = str(e.value)
    prefix = f"option '{key}' = {bad}: "
    reason = msg[len(prefix):] if msg.startswith(prefix) else msg.removeprefix("invalid option: ")
    assert reason and reason in " ".join(p.stderr.split()), (msg, p.stderr)
    assert not (tmp_path / "py").exists() and not (tmp_path / "cli").exists()


@pytest.mark.parametrize("flags,kwargs,cli_msg,py_msg", REFUSED, ids=[" ".join(r[0]) for r in REFUSED])
def test_python_refuses_what_the_cli_refuses(tma_bin, tmp_path, flags, kwargs, cli_msg, py_msg):
    import subprocess

    p = subprocess.run([str(tma_bin), "train", *flags, "--time-limit", "1s", "--out", str(tmp_path / "cli")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0, p.stderr
    assert cli_msg in p.stderr, p.stderr
    with pytest.raises(ValueError) as e:
        tma.train(None, time_limit="1s", out=tmp_path / "py", **kwargs)
    assert py_msg in str(e.value), str(e.value)
    assert not (tmp_path / "py").exists()


def test_options_no_method_uses_are_warned_and_recorded(tmp_path):
    with pytest.warns(UserWarning, match=r"super_nodes is ignored: only method super-tma uses super-nodes \(method: random-tma\)"):
        run = tma.train(None, gen_nodes=600, time_limit="1s", hidden=16, trainers=2, super_nodes=40,
                        out=tmp_path / "w")
    assert any(w.startswith("super_nodes is ignored") for w in run.summary["warnings"]), run.summary
