"""Ctrl-C in Python: the run stops after the round in flight, keeps its checkpoint, and
KeyboardInterrupt is raised."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

SCRIPT = textwrap.dedent(
    """
    import sys, tma
    def on_round(r):
        print("round", r["round"], flush=True)
    try:
        tma.train(tma.Dataset.load(sys.argv[1]), out=sys.argv[2], on_round=on_round,
                  trainers=2, hidden=8, sync_every="200ms", time_limit="120s", threads=2)
    except KeyboardInterrupt as e:
        print("KeyboardInterrupt:", e, flush=True)
        sys.exit(130)
    print("finished without interrupt", flush=True)
    """
)


def test_sigint_stops_the_run_keeps_the_checkpoint_and_raises(tmp_path, cora_dir):
    out = tmp_path / "run"
    p = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(cora_dir), str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a shell without job control starts background jobs with SIGINT ignored, and Python
        # keeps an ignored SIGINT ignored: give the child the default disposition, so the test
        # does not depend on how it was launched
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        line = p.stdout.readline()
        assert line.startswith("round 1"), (line, p.stderr.read() if p.poll() is not None else "")
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, (rest, err)
    assert "KeyboardInterrupt: tma: run stopped after round" in rest, (rest, err)
    assert f"checkpoint kept in {out}" in rest
    assert "finished without interrupt" not in rest
    assert took < 30, f"stopping took {took:.1f}s"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["round"] == summary["rounds"] >= 1
    assert (out / "model_best.safetensors").is_file()
