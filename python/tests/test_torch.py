"""tma's models in PyTorch (tma.to_torch): a tma-trained model, loaded from its safetensors
file, reproduces tma's logits on a shared graph. Runs where torch is importable (the package
itself needs only NumPy)."""

import numpy as np
import pytest

import tma

torch = pytest.importorskip(
    "torch", reason="torch is not installed here: tma.to_torch and its test need PyTorch (optional)"
)


@pytest.mark.parametrize(
    "opts",
    [
        dict(model="sage"),
        dict(model="gcn", layer_norm=False, layers=3, fanouts=[5, 5, 5]),
        dict(model="mlp"),
    ],
    ids=["sage-layernorm", "gcn-3-layers", "mlp"],
)
def test_to_torch_reproduces_tma_logits_on_cora(tmp_path, cora_dir, opts):
    run = tma.train(tma.Dataset.load(cora_dir), out=tmp_path / "r", trainers=2, hidden=32,
                    sync_every="500ms", time_limit="2s", lr=0.01, threads=2, **opts)
    edge_index, x = run.inference_inputs()
    assert edge_index.shape == (2, 10556) and x.shape == (2708, 1433)
    for which in ("best", "final"):
        net = to = tma.to_torch(run, which=which, use_pyg=False)
        assert not to.training
        with torch.no_grad():
            out = net(torch.from_numpy(x), torch.from_numpy(edge_index)).numpy()
        ref = run.embeddings(which=which)
        assert out.shape == ref.shape == (2708, 7)
        err = np.abs(out - ref).max()
        assert err < 1e-4, f"{which}: max |torch - tma| = {err}"
        # and the predictions are the model's: its test accuracy is the summary's
        test = np.load(cora_dir / "test_idx.npy")
        y = np.load(cora_dir / "y.npy")
        acc = float(np.mean(out[test].argmax(1) == y[test]))
        key = "best_test" if which == "best" else "final_test"
        assert acc == pytest.approx(run.summary[key]["value"], abs=2e-3)


def test_to_torch_link_model_scores(tmp_path):
    # link prediction on the generated graph: embeddings and the decoder's scores
    run = tma.train(None, gen_nodes=400, task="link", eval_num_neg=100, out=tmp_path / "l", trainers=2, hidden=16,
                    sync_every="500ms", time_limit="1500ms", threads=2)
    edge_index, x = run.inference_inputs()
    net = tma.to_torch(run, use_pyg=False)
    with torch.no_grad():
        h = net(torch.from_numpy(x), torch.from_numpy(edge_index))
        ref = run.embeddings()
        assert np.abs(h.numpy() - ref).max() < 1e-4
        s = net.score(h, torch.tensor([0, 1]), torch.tensor([2, 3]))
    assert s.shape == (2,) and torch.isfinite(s).all()
    # the same as the decoder's math on tma's own parameters
    p = run.best_params()
    hu, hv = ref[[0, 1]], ref[[2, 3]]
    z = (hu * hv) @ p["decoder.lin1.weight"].T + p["decoder.lin1.bias"]
    a = p["decoder.act.weight"][0]
    z = np.where(z > 0, z, a * z)
    want = (z @ p["decoder.lin2.weight"].T + p["decoder.lin2.bias"])[:, 0]
    assert np.abs(s.numpy() - want).max() < 1e-4


def test_to_torch_refuses_what_it_cannot_map():
    with pytest.raises(ValueError, match="not a tma model"):
        tma.to_torch({"weight": np.zeros((2, 2))})
    with pytest.raises(NotImplementedError, match="GAT"):
        tma.to_torch({"encoder.0.att_src": np.zeros((1, 1, 2)), "encoder.0.lin.weight": np.zeros((2, 2))})
