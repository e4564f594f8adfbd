"""``tensorboard=`` / ``tma train --tensorboard``: the event file is read by TensorBoard itself
(its ``EventAccumulator``), and its scalars are the run's ``rounds.jsonl`` and ``summary.json``.

Needs the ``tensorboard`` package (PyPI): CI installs it and sets ``TMA_REQUIRE_TENSORBOARD=1``,
which turns a missing one into a failure; elsewhere the test is skipped, saying why."""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import tma

from conftest import SMALL

SMALL = dict(SMALL, time_limit="2s")


def _accumulator():
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as e:
        why = f"the tensorboard package is not installed here ({e}): pip install tensorboard"
        if os.environ.get("TMA_REQUIRE_TENSORBOARD") == "1":
            pytest.fail(f"TMA_REQUIRE_TENSORBOARD=1 but {why}", pytrace=False)
        pytest.skip(why)
    return EventAccumulator


def check_against_run(tb_run_dir: pathlib.Path, run_dir: pathlib.Path):
    EventAccumulator = _accumulator()
    files = sorted(p.name for p in tb_run_dir.iterdir())
    assert len(files) == 1 and files[0].startswith("events.out.tfevents."), files
    acc = EventAccumulator(str(tb_run_dir))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    rounds = [json.loads(l) for l in (run_dir / "rounds.jsonl").read_text().splitlines()]
    rounds = [r for r in rounds if not r.get("check")]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert len(rounds) == summary["rounds"] >= 3
    metric = summary["metric"]
    assert {f"val/{metric}", "train/loss", "train/steps", "round/participants",
            "time/train_s", "time/eval_s", f"test/{metric}", f"best_test/{metric}"} <= tags, tags

    def series(tag):
        return [(e.step, e.value) for e in acc.Scalars(tag)]

    validated = [r for r in rounds if r["val"]["metric"]]
    for name in validated[0]["val"]["all"]:
        want = [(r["round"], np.float32(r["val"]["all"][name])) for r in validated]
        assert series(f"val/{name}") == want, name
    assert series("train/loss") == [
        (r["round"], np.float32(r["train_loss"])) for r in rounds if r["train_loss"] is not None
    ]
    assert series("train/steps") == [(r["round"], float(sum(r["steps"]))) for r in rounds]
    assert series("time/train_s") == [(r["round"], np.float32(r["elapsed_s"])) for r in rounds]
    for name, v in summary["final_test"]["all"].items():
        assert series(f"test/{name}") == [(summary["rounds"], np.float32(v))], name
    for name, v in summary["best_test"]["all"].items():
        assert series(f"best_test/{name}") == [(summary["best_round"], np.float32(v))], name
    # wall times are real times, in order
    walls = [e.wall_time for e in acc.Scalars("train/steps")]
    assert walls == sorted(walls) and abs(walls[-1] - (run_dir / "summary.json").stat().st_mtime) < 60


def test_python_run_is_read_by_tensorboard(tmp_path, cora_dir):
    _accumulator()
    run = tma.train(tma.Dataset.load(cora_dir), out=tmp_path / "py-run",
                    tensorboard=tmp_path / "tb", **SMALL)
    check_against_run(tmp_path / "tb" / "py-run", pathlib.Path(run.dir))
    cfg = (tmp_path / "py-run" / "config.toml").read_text()
    assert f'tensorboard = "{(tmp_path / "tb").resolve()}"' in cfg, cfg


def test_cli_run_is_read_by_tensorboard(tmp_path, cora_dir, tma_bin):
    _accumulator()
    args = [str(tma_bin), "train", "--dataset", str(cora_dir), "--out", str(tmp_path / "cli-run"),
            "--tensorboard", str(tmp_path / "tb")]
    for k, v in SMALL.items():
        flag = k.replace("_", "-")
        args += [f"--{flag}", ",".join(map(str, v)) if isinstance(v, list) else str(v)]
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert f"tensorboard  {tmp_path / 'tb' / 'cli-run'}/events.out.tfevents." in p.stderr, p.stderr
    check_against_run(tmp_path / "tb" / "cli-run", tmp_path / "cli-run")
