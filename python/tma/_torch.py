"""tma's models as PyTorch modules (``tma.to_torch``).

tma's encoder is a stack of convolutions with, between layers, ``LayerNorm`` (eps 1e-5,
optional) then ``PReLU`` (one slope) then dropout; the last layer's output is the node task's
logits or the link task's embeddings. Parameter names are PyG's and PyTorch's, so a tma
safetensors file loads with ``load_state_dict(strict=True)``:

* ``encoder.{l}.lin_l.weight|bias``, ``encoder.{l}.lin_r.weight``: PyG ``SAGEConv(aggr="mean")``
  ``x_i' = W_l mean_{j in N(i)} x_j + b_l + W_r x_i`` (empty neighbourhood: mean 0);
* ``encoder.{l}.lin.weight``, ``encoder.{l}.bias``: PyG ``GCNConv``
  ``D^-1/2 (A + I) D^-1/2 X W^T + b`` (D: in-degree + 1);
* ``encoder.{l}.weight|bias``: ``nn.Linear`` (the MLP encoder);
* ``encoder.norm.{l}.weight|bias``: ``nn.LayerNorm``; ``encoder.act.{l}.weight``: ``nn.PReLU``;
* link head ``decoder.lin1``, ``decoder.act``, ``decoder.lin2``:
  ``score(u, v) = lin2(PReLU(lin1(h_u * h_v)))``.

Messages flow along ``edge_index`` (row 0 sources, row 1 destinations), as in PyG. With
torch_geometric installed the convolutions are PyG's ``SAGEConv`` / ``GCNConv``; otherwise
plain-PyTorch equivalents with the same parameters. GAT models are not mapped.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

import numpy as np


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("tma.to_torch needs PyTorch (pip install torch)") from e
    return torch


def _pyg():
    try:
        import torch_geometric.nn as pygnn  # noqa: F401

        return pygnn
    except ImportError:
        return None


def _build_classes():
    torch = _torch()
    nn = torch.nn

    class SAGEConv(nn.Module):
        """PyG ``SAGEConv(in, out, aggr="mean")`` in plain PyTorch."""

        def __init__(self, in_channels: int, out_channels: int):
            super().__init__()
            self.lin_l = nn.Linear(in_channels, out_channels, bias=True)
            self.lin_r = nn.Linear(in_channels, out_channels, bias=False)

        def forward(self, x, edge_index):
            src, dst = edge_index[0], edge_index[1]
            n = x.shape[0]
            agg = torch.zeros(n, x.shape[1], dtype=x.dtype, device=x.device)
            agg.index_add_(0, dst, x[src])
            deg = torch.bincount(dst, minlength=n).clamp(min=1).to(x.dtype)
            return self.lin_l(agg / deg[:, None]) + self.lin_r(x)

    class GCNConv(nn.Module):
        """PyG ``GCNConv(in, out)`` (self-loops, symmetric normalisation) in plain PyTorch."""

        def __init__(self, in_channels: int, out_channels: int):
            super().__init__()
            self.lin = nn.Linear(in_channels, out_channels, bias=False)
            self.bias = nn.Parameter(torch.zeros(out_channels))

        def forward(self, x, edge_index):
            src, dst = edge_index[0], edge_index[1]
            n = x.shape[0]
            h = self.lin(x)
            deg = (torch.bincount(dst, minlength=n) + 1).to(x.dtype)
            r = deg.rsqrt()
            out = h / deg[:, None]
            out = out.index_add(0, dst, h[src] * (r[src] * r[dst])[:, None])
            return out + self.bias

    class MLPConv(nn.Linear):
        """The MLP encoder's layer: ``nn.Linear`` that ignores the edges."""

        def forward(self, x, edge_index=None):  # noqa: D401
            return super().forward(x)

    class Encoder(nn.Module):
        def __init__(self, kind, dims, layer_norm, pyg):
            super().__init__()
            self.kind = kind
            for l in range(len(dims) - 1):
                a, b = dims[l], dims[l + 1]
                if kind == "sage":
                    conv = pyg.SAGEConv(a, b, aggr="mean") if pyg else SAGEConv(a, b)
                elif kind == "gcn":
                    conv = pyg.GCNConv(a, b) if pyg else GCNConv(a, b)
                else:
                    conv = MLPConv(a, b)
                self.add_module(str(l), conv)
            hidden = dims[1:-1]
            self.norm = nn.ModuleList([nn.LayerNorm(h, eps=1e-5) for h in hidden]) if layer_norm else None
            self.act = nn.ModuleList([nn.PReLU(1) for _ in hidden])
            self.num_layers = len(dims) - 1

        def forward(self, x, edge_index):
            for l in range(self.num_layers):
                x = getattr(self, str(l))(x, edge_index)
                if l < self.num_layers - 1:
                    if self.norm is not None:
                        x = self.norm[l](x)
                    x = self.act[l](x)
            return x

    class Decoder(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.lin1 = nn.Linear(d, d)
            self.act = nn.PReLU(1)
            self.lin2 = nn.Linear(d, 1)

        def forward(self, hu, hv):
            return self.lin2(self.act(self.lin1(hu * hv))).squeeze(-1)

    class TmaModel(nn.Module):
        """tma's model: ``forward(x, edge_index)`` gives the encoder output (node task:
        logits; link task: embeddings); ``score(h, src, dst)`` the link head's logits."""

        def __init__(self, kind, dims, layer_norm, link, pyg):
            super().__init__()
            self.encoder = Encoder(kind, dims, layer_norm, pyg)
            self.decoder = Decoder(dims[-1]) if link else None

        def forward(self, x, edge_index):
            return self.encoder(x, edge_index)

        def score(self, h, src, dst):
            if self.decoder is None:
                raise ValueError("score: a node-classification model has no link decoder")
            return self.decoder(h[src], h[dst])

    return TmaModel


def _infer(params: Dict[str, np.ndarray]):
    """(kind, dims, layer_norm, link) from the parameter names and shapes."""
    layers = 0
    while any(k.startswith(f"encoder.{layers}.") for k in params):
        layers += 1
    if layers == 0:
        raise ValueError("not a tma model: no encoder.0.* parameters")
    if "encoder.0.lin_l.weight" in params:
        kind, w = "sage", "lin_l.weight"
    elif "encoder.0.att_src" in params:
        raise NotImplementedError("to_torch: GAT models are not mapped to PyTorch yet (sage, gcn, mlp are)")
    elif "encoder.0.lin.weight" in params:
        kind, w = "gcn", "lin.weight"
    elif "encoder.0.weight" in params:
        kind, w = "mlp", "weight"
    else:
        raise ValueError(f"not a tma model: unknown layer parameters {sorted(params)[:4]}")
    dims = [params[f"encoder.0.{w}"].shape[1]]
    for l in range(layers):
        dims.append(params[f"encoder.{l}.{w}"].shape[0])
    layer_norm = "encoder.norm.0.weight" in params
    link = "decoder.lin1.weight" in params
    return kind, dims, layer_norm, link


def to_torch(model: Any, which: str = "best", use_pyg: Optional[bool] = None):
    """A ``torch.nn.Module`` in eval mode holding a tma model.

    ``model``: a :class:`tma.Run` (its ``model_{which}.safetensors``), a run directory, a
    ``.safetensors`` file, or a ``{name: array}`` dict. ``use_pyg``: build from PyG's
    ``SAGEConv`` / ``GCNConv`` (default: when torch_geometric is importable)."""
    from ._safetensors import load_safetensors

    torch = _torch()
    if which not in ("best", "final"):
        raise ValueError(f'which={which!r}: expected "best" or "final"')
    if isinstance(model, dict):
        params = model
    else:
        path = model.dir if hasattr(model, "dir") and hasattr(model, "summary") else os.fspath(model)
        if os.path.isdir(path):
            path = os.path.join(path, f"model_{which}.safetensors")
        params = load_safetensors(path)
    kind, dims, layer_norm, link = _infer(params)
    pyg = _pyg() if use_pyg is None or use_pyg else None
    if use_pyg and pyg is None:
        raise ImportError("use_pyg=True needs torch_geometric")
    if kind == "mlp":
        pyg = None
    net = _build_classes()(kind, dims, layer_norm, link, pyg)
    state = {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in params.items()}
    net.load_state_dict(state, strict=True)
    return net.eval()
