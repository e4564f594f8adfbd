"""bench/tta_report.py compares both sides on one metric (regression: for 2 classes it compared
tma's roc_auc, its own validation metric, with the DGL pipeline's accuracy)."""
import json
import subprocess
import sys

from conftest import REPO

REPORT = REPO / "bench" / "tta_report.py"


def write_pair(root, tma_rows, dgl_rows):
    tma = root / "w-node-random-tma-tma-0"
    dgl = root / "w-node-random-tma-dgl-0"
    tma.mkdir()
    dgl.mkdir()
    (tma / "config.toml").write_text('sync_ramp = 16\ndropout = 0.5\n')
    (tma / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in tma_rows))
    (dgl / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in dgl_rows))


def tma_row(t, steps, roc, acc):
    all_ = {"roc_auc": roc}
    if acc is not None:
        all_["accuracy"] = acc
    return {"round": t, "elapsed_s": float(t), "steps": [steps] * 4,
            "val": {"metric": "roc_auc", "value": roc, "all": all_}}


DGL = [{"elapsed_s": 10.0, "steps_per_trainer": [0, 100, 100, 100, 100], "val_acc": 0.74},
       {"elapsed_s": 20.0, "steps_per_trainer": [0, 200, 200, 200, 200], "val_acc": 0.75}]


def test_a_pair_is_compared_on_the_dgl_pipelines_metric(tmp_path):
    # tma's roc_auc passes 0.75 at 5 s; its accuracy never does
    write_pair(tmp_path, [tma_row(5, 50, 0.80, 0.70), tma_row(10, 400, 0.90, 0.72),
                          tma_row(20, 800, 0.91, 0.74)], DGL)
    out = subprocess.run([sys.executable, str(REPORT), "--summary", str(tmp_path)],
                         capture_output=True, text=True, check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("| w-node-random-tma | 0 |"))
    cells = [c.strip() for c in row.split("|")]
    assert cells[3] == "0.7500", row  # the DGL final, the target
    assert cells[5] == "- (no checks) s", row  # tma's accuracy never reaches it (roc_auc: 5 s)
    assert cells[6] == "not reached (no checks)", row
    assert cells[9] == "0.740 / 0.750", row  # at DGL's end: tma's accuracy, not its roc_auc
    assert cells[12] == "0.709 (between 0.700 at 50 and 0.720 at 400) / 0.750", row
    assert "compared on the DGL pipeline's metric: accuracy" in out
    assert "at equal time w-node random-tma" in out


def test_a_run_without_the_dgl_pipelines_metric_is_refused_by_name(tmp_path):
    write_pair(tmp_path, [tma_row(5, 50, 0.80, None)], DGL)
    r = subprocess.run([sys.executable, str(REPORT), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode != 0
    assert "w-node-random-tma-tma-0/rounds.jsonl" in r.stderr
    assert "'accuracy'" in r.stderr and "--metric accuracy" in r.stderr


def test_a_run_that_peaked_is_behind_at_equal_time_but_not_with_its_kept_model(tmp_path):
    # tma passes DGL's final at 5 s (0.76), then falls to 0.72 by DGL's end; each stack keeps
    # its best-validated model, so the summary says both: behind at equal time, kept model not
    write_pair(tmp_path, [tma_row(5, 50, 0.9, 0.76), tma_row(10, 400, 0.9, 0.73),
                          tma_row(20, 800, 0.9, 0.72)], DGL)
    out = subprocess.run([sys.executable, str(REPORT), "--summary", str(tmp_path)],
                         capture_output=True, text=True, check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("| w-node | random-tma |"))
    cells = [c.strip() for c in row.split("|")]
    assert cells[4] == "0.720 / 0.750", row  # the latest validations at DGL's end
    assert cells[5] == "-0.030", row
    assert cells[6] == "0.760 / 0.750", row  # the kept (best) models by DGL's end
    assert cells[10] == "behind at equal time; behind at equal steps", row
    assert ("at equal time w-node random-tma; at equal steps w-node random-tma; with the model "
            "each stack keeps (its best validation by DGL's end) none.") in out
