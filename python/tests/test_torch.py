"""tma's models in PyTorch (tma.to_torch): a tma-trained model of every encoder, loaded from
its safetensors file as its metadata describes it, reproduces tma's logits on a shared graph;
model files written before tma recorded that metadata are still read (by their parameter
names). Runs where torch is importable (the package itself needs only NumPy)."""

import json
import pathlib
import struct

import numpy as np
import pytest

import tma
from tma._safetensors import load_metadata

torch = pytest.importorskip(
    "torch", reason="torch is not installed here: tma.to_torch and its test need PyTorch (optional)"
)


def rewrite_metadata(src, dst, change):
    """A copy of the safetensors file ``src`` at ``dst`` whose ``__metadata__`` is
    ``change(metadata)`` (``None``: no metadata at all), tensors unchanged."""
    raw = open(src, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = change(dict(header.pop("__metadata__", {})))
    if meta is not None:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + raw[8 + n :])


# every registered encoder (tma._tma lists them: the same registry as `tma train --model`)
ENCODERS = [
    dict(model="sage"),
    dict(model="gcn", layer_norm=False, layers=3, fanouts=[5, 5, 5]),
    dict(model="mlp"),
    dict(model="gat", heads=4),
]


def test_the_parametrized_encoders_are_the_registry():
    assert sorted(o["model"] for o in ENCODERS) == sorted(tma.encoders())


@pytest.mark.parametrize("opts", ENCODERS, ids=["sage-layernorm", "gcn-3-layers", "mlp", "gat-4-heads"])
def test_to_torch_reproduces_tma_logits_on_cora(tmp_path, cora_dir, opts):
    run = tma.train(tma.Dataset.load(cora_dir), out=tmp_path / "r", trainers=2, hidden=32,
                    sync_every="500ms", time_limit="2s", lr=0.01, threads=2, **opts)
    edge_index, x = run.inference_inputs()
    assert edge_index.shape == (2, 10556) and x.shape == (2708, 1433)
    meta = json.loads(load_metadata(pathlib.Path(run.dir) / "model_best.safetensors")["tma.model"])
    assert meta["encoder"] == opts["model"]
    assert meta["options"] == ({"heads": 4} if opts["model"] == "gat" else {})
    assert (meta["in_dim"], meta["hidden"], meta["out_dim"]) == (1433, 32, 7)
    for which in ("best", "final"):
        net = to = tma.to_torch(run, which=which, use_pyg=False)
        assert not to.training
        with torch.no_grad():
            out = net(torch.from_numpy(x), torch.from_numpy(edge_index)).numpy()
        ref = run.embeddings(which=which)
        assert out.shape == ref.shape == (2708, 7)
        err = np.abs(out - ref).max()
        assert err < 1e-4, f"{which}: max |torch - tma| = {err}"
        # the saved model evaluated by tma.load_model gives the same logits
        loaded = tma.load_model(run.dir, which=which)
        assert np.abs(loaded.embeddings(output="logits") - ref).max() < 1e-5
        # and the predictions are the model's: its test accuracy is the summary's
        test = np.load(cora_dir / "test_idx.npy")
        y = np.load(cora_dir / "y.npy")
        acc = float(np.mean(out[test].argmax(1) == y[test]))
        key = "best_test" if which == "best" else "final_test"
        assert acc == pytest.approx(run.summary[key]["value"], abs=2e-3)


def test_a_model_file_without_metadata_still_loads(tmp_path, cora_dir):
    # the old form: a GAT model file without tma.model (as tma wrote before it recorded it)
    # loads in tma (from the run's config.toml) and in PyTorch (from the parameter names)
    run = tma.train(tma.Dataset.load(cora_dir), out=tmp_path / "r", trainers=2, hidden=32, model="gat",
                    heads=2, sync_every="500ms", time_limit="1500ms", threads=2)
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.toml").write_text((pathlib.Path(run.dir) / "config.toml").read_text())
    rewrite_metadata(pathlib.Path(run.dir) / "model_best.safetensors", old / "model_best.safetensors",
                     lambda m: {k: v for k, v in m.items() if k != "tma.model"})
    assert "tma.model" not in load_metadata(old / "model_best.safetensors")
    ref = run.embeddings()
    assert np.abs(tma.load_model(old).embeddings(output="logits") - ref).max() < 1e-5
    edge_index, x = run.inference_inputs()
    with torch.no_grad():
        out = tma.to_torch(old / "model_best.safetensors", use_pyg=False)(
            torch.from_numpy(x), torch.from_numpy(edge_index)).numpy()
    assert np.abs(out - ref).max() < 1e-4


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


def test_to_torch_refuses_what_it_cannot_map(tmp_path):
    with pytest.raises(ValueError, match="not a tma model"):
        tma.to_torch({"weight": np.zeros((2, 2))})
    # a GAT given as bare parameters is recognised by its names
    net = tma.to_torch({"encoder.0.att_src": np.zeros((1, 1, 2)), "encoder.0.att_dst": np.zeros((1, 1, 2)),
                        "encoder.0.lin.weight": np.zeros((2, 3)), "encoder.0.bias": np.zeros(2)})
    assert tuple(net(torch.zeros(4, 3), torch.tensor([[0, 1], [1, 2]])).shape) == (4, 2)
    # a layer this package cannot build (a newer encoder) is named
    run = tma.train(None, gen_nodes=300, out=tmp_path / "m", trainers=1, hidden=8, model="mlp",
                    sync_every="500ms", time_limit="700ms", threads=2)

    def newer(m):
        d = json.loads(m["tma.model"])
        d["layers"][0]["module"] = "FancyConv"
        return {**m, "tma.model": json.dumps(d)}

    rewrite_metadata(pathlib.Path(run.dir) / "model_best.safetensors", tmp_path / "new.safetensors", newer)
    with pytest.raises(NotImplementedError, match="layer 0 is a FancyConv"):
        tma.to_torch(tmp_path / "new.safetensors")
