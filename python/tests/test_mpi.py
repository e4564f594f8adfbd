"""The MPI engine from Python: ``python -m tma train --engine mpi`` as every rank of a real
``mpirun`` job (1 coordinator + 2 trainer processes on Cora), the same library engine the CLI
uses; and ``python -m tma train`` in-process.

The MPI job needs a package built with the ``mpi`` feature and Open MPI's ``mpirun``: CI builds
it so and sets ``TMA_REQUIRE_MPI=1``, which turns a missing one into a failure; elsewhere the
test is skipped, saying why."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import tma


def _need_mpi():
    why = None
    if not tma.HAS_MPI:
        why = 'this tma package was built without MPI (MATURIN_PEP517_ARGS="--features python,mpi")'
    elif shutil.which("mpirun") is None:
        why = "no mpirun on PATH (Open MPI: openmpi-bin)"
    if why is None:
        return
    if os.environ.get("TMA_REQUIRE_MPI") == "1":
        pytest.fail(f"TMA_REQUIRE_MPI=1 but {why}", pytrace=False)
    pytest.skip(why)


# `python -m tma train` as 3 ranks on this host (1 coordinator + 2 trainers), as root in a
# container too; the arguments of `train` follow
MPIRUN_3 = [
    "mpirun", "--oversubscribe", "-np", "3",
    "--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include", "lo",
    sys.executable, "-m", "tma", "train",
]
MPI_ENV = dict(
    os.environ,
    OMPI_ALLOW_RUN_AS_ROOT="1",
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
    OMPI_MCA_btl_vader_single_copy_mechanism="none",
)


def test_python_m_tma_train_under_mpirun(cora_dir, tmp_path):
    _need_mpi()
    parts = tmp_path / "parts"
    tma.partition(str(cora_dir), "random", 2, out=str(parts), seed=1)
    run_dir = tmp_path / "run"
    cmd = MPIRUN_3 + [
        "--partitions", str(parts), "--engine", "mpi",
        "--time-limit", "4s", "--sync-every", "1s", "--sync-ramp", "2",
        "--hidden", "32", "--threads", "1", "--join-timeout", "60s",
        "--out", str(run_dir),
    ]
    p = subprocess.run(cmd, env=MPI_ENV, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    # only rank 0 prints the result; the trainer ranks return None and print nothing
    assert p.stdout.count(f"run directory: {run_dir}") == 1, p.stdout
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["rounds"] >= 3, s
    assert s["failed_trainers"] == [], s
    roles = sorted((m["role"], m.get("rank")) for m in s["memory"])
    assert roles == [("coordinator", 0), ("trainer", 1), ("trainer", 2)], roles
    # both trainer ranks stepped, and the averaged model learned Cora (majority rate 0.12)
    last = json.loads((run_dir / "rounds.jsonl").read_text().splitlines()[-1])
    assert len(last["steps"]) == 2 and min(last["steps"]) > 0, last
    assert s["best_val"]["value"] > 0.5, s["best_val"]
    # the coordinator's stderr names the ranks' memory like the CLI's
    assert "rank 0 (coordinator)" in p.stderr, p.stderr


def test_python_m_tma_train_in_process(tmp_path):
    run_dir = tmp_path / "run"
    p = subprocess.run(
        [sys.executable, "-m", "tma", "train", "--gen-nodes", "1500", "--time-limit", "2s",
         "--hidden", "16", "--trainers", "2", "--out", str(run_dir)],
        capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"run directory: {run_dir}" in p.stdout
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["rounds"] >= 2 and s["memory"][0]["role"] == "in-process", s


def test_python_m_tma_refuses_what_tma_train_refuses(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "tma", "train", "--no-such-option", "3", "--out", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=60,
    )
    assert p.returncode == 2, p.stdout + p.stderr
    assert "no_such_option" in p.stderr, p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "tma", "train", "--engine", "mpi", "--time-limit", "1s"],
        capture_output=True, text=True, timeout=60,
    )
    assert p.returncode == 2, p.stdout + p.stderr
    # a build without MPI refuses the engine itself (fresh-eyes trial: the test assumed CI's
    # MPI build)
    assert ("partition" if tma.HAS_MPI else "built without MPI") in p.stderr, p.stderr


def test_engine_mpi_needs_partitions_and_join_timeout_needs_mpi(tmp_path):
    with pytest.raises(ValueError, match="expected in-process or mpi"):
        tma.train(engine="threads", time_limit="1s")
    with pytest.raises(ValueError, match="join_timeout applies only to engine='mpi'"):
        tma.train(join_timeout="5s", time_limit="1s")
    if tma.HAS_MPI:
        with pytest.raises(ValueError, match="partitions=DIR"):
            tma.train(engine="mpi", time_limit="1s")
    else:
        with pytest.raises(ValueError, match="built without MPI"):
            tma.train(engine="mpi", time_limit="1s")


def test_engine_mpi_without_mpirun_raises_instead_of_aborting(cora_dir, tmp_path):
    # regression (fresh-eyes trial): one rank alone called MPI_Abort, which killed the
    # interpreter (a notebook's kernel) instead of raising
    _need_mpi()
    parts = tmp_path / "parts"
    tma.partition(str(cora_dir), "random", 2, out=str(parts), seed=1)
    code = (
        "import tma\n"
        "try:\n"
        f"    tma.train(partitions={str(parts)!r}, engine='mpi', time_limit='1s', out={str(tmp_path / 'r')!r})\n"
        "except Exception as e:\n"
        "    print('raised', type(e).__name__, e)\n"
        "print('still here')\n"
    )
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "raised RuntimeError" in p.stdout and "launch 3 ranks" in p.stdout, p.stdout + p.stderr
    assert "still here" in p.stdout
    assert not (tmp_path / "r").exists()


def test_options_that_contradict_a_partition_directory_are_refused(cora_dir, tmp_path):
    # regression (fresh-eyes trial): Python trained the directory's method, seed and trainers
    # whatever was asked, where `tma train --partitions` refuses
    parts = tmp_path / "parts"
    tma.partition(str(cora_dir), "random", 2, out=str(parts), seed=1)
    # a method is not a data option: one of another layout is refused naming both layouts
    with pytest.raises(ValueError, match=r"partitions .*parts holds the random layout; method psgd-pa trains on the metis layout \(methods for this directory: random-tma\)"):
        tma.train(partitions=parts, method="psgd-pa", seed=5, time_limit="1s", out=tmp_path / "a")
    with pytest.raises(ValueError, match=r"was made with other options: seed 5 \(the directory has 1\)"):
        tma.train(partitions=parts, method="random-tma", seed=5, time_limit="1s", out=tmp_path / "a")
    with pytest.raises(ValueError, match=r"trainers 3 \(the directory has 2\)|num_trainers 3 \(the directory has 2\)"):
        tma.train(partitions=parts, trainers=3, time_limit="1s", out=tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    # the directory's own values pass
    run = tma.train(partitions=parts, trainers=2, seed=1, time_limit="1s", hidden=16, out=tmp_path / "c")
    assert run.summary["num_trainers"] == 2


def test_python_m_tma_takes_the_cli_spellings_of_fail_and_fanouts(tmp_path):
    run_dir = tmp_path / "run"
    p = subprocess.run(
        [sys.executable, "-m", "tma", "train", "--gen-nodes", "800", "--time-limit", "2s",
         "--hidden", "16", "--trainers", "2", "--layers", "1", "--fanouts", "10",
         "--fail", "1@0.5s", "--out", str(run_dir)],
        capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    s = json.loads((run_dir / "summary.json").read_text())
    assert [f["trainer"] for f in s["failed_trainers"]] == [1], s["failed_trainers"]
    p = subprocess.run([sys.executable, "-m", "tma", "train", "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "usage: python -m tma train" in p.stdout, p.stdout + p.stderr
    # a non-empty --out: an error line and status 1, no traceback
    p = subprocess.run([sys.executable, "-m", "tma", "train", "--time-limit", "1s", "--out", str(run_dir)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "Traceback" not in p.stderr and "already exists" in p.stderr, p.stderr


def test_an_interrupted_run_is_resumed_under_mpirun_from_python(cora_dir, tmp_path):
    """tma.resume with engine='mpi' (through ``python -m tma train --resume RUN --engine mpi``
    on every rank): rank 0 continues the run on its recorded partition directory; before, every
    rank tried to be the coordinator of the run."""
    _need_mpi()
    parts = tmp_path / "parts"
    tma.partition(str(cora_dir), "random", 2, out=str(parts), seed=1)
    run_dir = tmp_path / "run"

    class Stop(Exception):
        pass

    def stop_after_two(r):
        if r["round"] >= 2:
            raise Stop()

    with pytest.raises(Stop):
        tma.train(partitions=str(parts), out=str(run_dir), on_round=stop_after_two, hidden=32,
                  sync_every="500ms", sync_ramp=0, time_limit="30s", threads=2)
    before = json.loads((run_dir / "summary.json").read_text())
    assert before["interrupted"] is True, before
    cmd = MPIRUN_3 + [
        "--resume", str(run_dir), "--engine", "mpi",
        "--time-limit", "4s", "--threads", "1", "--join-timeout", "60s",
    ]
    p = subprocess.run(cmd, env=MPI_ENV, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(f"run directory: {run_dir}") == 1, p.stdout
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["interrupted"] is False, s
    assert s["rounds"] > before["rounds"], (before["rounds"], s["rounds"])
    assert s["train_time_s"] >= 4.0, s
    # both trainer ranks trained in the continued segment
    assert all(n > 0 for n in s["steps_per_trainer"]), s
    rounds = [json.loads(l) for l in (run_dir / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds if not r.get("check")] == list(range(1, s["rounds"] + 1))
