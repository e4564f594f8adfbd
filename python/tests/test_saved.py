"""A saved model from Python: ``Run.evaluate``, ``tma.load_model`` (``evaluate``,
``embeddings``, ``embed``) and ``tma.resume``, against the run's summary and the CLI."""

import json
import subprocess

import numpy as np
import pytest

import tma

OPTS = dict(
    method="random-tma",
    trainers=2,
    sync_every="300ms",
    sync_ramp=0,
    time_limit="1500ms",
    hidden=16,
    threads=2,
    seed=2,
)


def test_a_saved_model_gives_the_runs_summary_and_the_clis_numbers(tmp_path, cora_dir, cora_arrays, tma_bin):
    # 200 of Cora's 500 validation nodes: the seeded subset is derived again from config.toml
    with pytest.warns(UserWarning, match="subset of 200"):
        run = tma.train(cora_dir, out=tmp_path / "node", eval_max_nodes=200, **OPTS)
    s = run.summary
    # exact: Python's json reads the digits tma wrote back to the same float
    assert run.evaluate() == {"val": s["best_val"], "test": s["best_test"]}
    assert run.evaluate("final") == {"val": s["final_val"], "test": s["final_test"]}

    m = tma.load_model(run.dir)
    assert m.path.endswith("model_best.safetensors")
    assert m.summary == s
    assert m.config["seed"] == 2 and m.config["eval_max_nodes"] == 200
    assert set(m.params()) == set(run.best_params())
    with pytest.warns(UserWarning, match="subset of 200"):
        ev = m.evaluate()
    assert ev == {"val": s["best_val"], "test": s["best_test"]}
    cli = subprocess.run([str(tma_bin), "eval", run.dir, "--json"], capture_output=True, text=True, check=True)
    j = json.loads(cli.stdout)
    assert (j["val"], j["test"], j["summary_matches"]) == (s["best_val"], s["best_test"], True)

    # logits: the test accuracy of the summary, and the full pass's values
    logits = m.embeddings(output="logits")
    assert logits.shape == (2708, 7) and logits.dtype == np.float32
    y, test = cora_arrays["y"], cora_arrays["test_idx"]
    assert (logits[test].argmax(1) == y[test]).mean() == s["best_test"]["all"]["accuracy"]
    np.testing.assert_allclose(logits, run.embeddings(), rtol=1e-5, atol=1e-5)
    assert np.array_equal(m.embeddings(nodes=[5, 0], output="logits"), logits[[5, 0]])
    # the hidden layer entering the last one, in memory, in a file, and from the CLI: the
    # same bytes (the same chunks within the same budget)
    h = m.embeddings()
    assert h.shape == (2708, 16)
    rep = m.embed(tmp_path / "h.npy", memory_budget="1GiB")
    assert (rep["rows"], rep["dim"]) == (2708, 16)
    assert np.array_equal(np.load(tmp_path / "h.npy"), h)
    subprocess.run([str(tma_bin), "embed", run.dir, "--out", str(tmp_path / "h_cli.npy")], check=True,
                   capture_output=True)
    assert (tmp_path / "h_cli.npy").read_bytes() == (tmp_path / "h.npy").read_bytes()
    # within 16 MiB, in chunks: the same values up to the last bits of the dense products
    m.embed(tmp_path / "h16.npy", memory_budget=16 << 20)
    np.testing.assert_allclose(np.load(tmp_path / "h16.npy"), h, rtol=1e-5, atol=1e-5)


def test_saved_model_errors_name_the_path(tmp_path, cora_dir):
    run = tma.train(cora_dir, out=tmp_path / "run", task="link", **dict(OPTS, time_limit="600ms"))
    with pytest.raises(FileNotFoundError, match="nowhere: no such run directory or model file"):
        tma.load_model(tmp_path / "nowhere")
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "m.safetensors").write_bytes((tmp_path / "run" / "model_best.safetensors").read_bytes())
    with pytest.raises(FileNotFoundError, match="m.safetensors: no config.toml next to it"):
        tma.load_model(lone / "m.safetensors")
    with pytest.raises(ValueError, match="which=\"last\""):
        tma.load_model(run.dir, which="last")
    with pytest.raises(ValueError, match="which=\"last\""):
        run.evaluate("last")
    m = tma.load_model(run.dir, which="final")
    assert m.path.endswith("model_final.safetensors")
    with pytest.raises(ValueError, match="a link model has no logits"):
        m.embeddings(output="logits")
    m.embed(tmp_path / "e.npy")
    assert np.load(tmp_path / "e.npy").shape == (2708, 16)
    with pytest.raises(FileExistsError, match="e.npy: the file exists"):
        m.embed(tmp_path / "e.npy")
    citeseer = cora_dir.parent / "planetoid_citeseer"
    with pytest.raises(ValueError, match=r"does not fit dataset .*planetoid_citeseer \(3703 features, a link model\)"):
        m.evaluate(dataset=citeseer)


def test_resume_continues_an_interrupted_run(tmp_path, cora_dir):
    class Stop(Exception):
        pass

    def stop_at_2(r):
        if r["round"] >= 2:
            raise Stop()

    out = tmp_path / "run"
    with pytest.raises(Stop):
        tma.train(cora_dir, out=out, on_round=stop_at_2, **dict(OPTS, time_limit="20s"))
    first = json.loads((out / "summary.json").read_text())
    assert first["interrupted"] is True
    done = first["rounds"]
    run = tma.resume(out, time_limit="2500ms")
    s = run.summary
    assert s["interrupted"] is False and s["rounds"] > done
    # rounds continue the count; the configuration is the run's, with the new time limit
    assert run.rounds[0]["round"] == done + 1
    assert run.config["time_limit"] == "2s 500ms" and run.config["seed"] == 2
    lines = [json.loads(l) for l in (out / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in lines] == list(range(1, s["rounds"] + 1))
    assert run.evaluate() == {"val": s["best_val"], "test": s["best_test"]}
    # a finished run has nothing to resume; another model option is refused naming it
    with pytest.raises(ValueError, match="holds a finished run"):
        tma.resume(out)
    with pytest.raises(FileNotFoundError, match="no config.toml there"):
        tma.resume(tmp_path)
