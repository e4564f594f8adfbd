"""tma's models as PyTorch modules (``tma.to_torch``).

tma's encoder is a stack of convolutions with, between layers, ``LayerNorm`` (eps 1e-5,
optional) then ``PReLU`` (one slope) then dropout; the last layer's output is the node task's
logits or the link task's embeddings. A model file says what its model is: the header's
``__metadata__`` key ``tma.model`` (written by tma) is a JSON object with, per layer, the
PyTorch module and its arguments (``layers``: ``{"module": "GATConv", "in_channels": ...}``,
declared by each encoder in its own Rust file), ``layer_norm`` and ``head``. Files written
before tma recorded it are recognised by their parameter names (below). Parameter names are
PyG's and PyTorch's, so a tma safetensors file loads with ``load_state_dict(strict=True)``:

* ``SAGEConv``: ``encoder.{l}.lin_l.weight|bias``, ``encoder.{l}.lin_r.weight``, PyG
  ``SAGEConv(aggr="mean")`` ``x_i' = W_l mean_{j in N(i)} x_j + b_l + W_r x_i`` (empty
  neighbourhood: mean 0);
* ``GCNConv``: ``encoder.{l}.lin.weight``, ``encoder.{l}.bias``, PyG ``GCNConv``
  ``D^-1/2 (A + I) D^-1/2 X W^T + b`` (D: in-degree + 1);
* ``GATConv``: ``encoder.{l}.lin.weight`` ``[H*C, in]``, ``encoder.{l}.att_src|att_dst``
  ``[1, H, C]``, ``encoder.{l}.bias``, PyG ``GATConv(in, C, heads=H)`` (heads concatenated,
  LeakyReLU slope 0.2, edges ``i -> i`` dropped and one self-loop added per node, softmax over
  each node's incoming edges, no attention dropout);
* ``Linear``: ``encoder.{l}.weight|bias``, ``nn.Linear`` (the MLP encoder);
* ``encoder.norm.{l}.weight|bias``: ``nn.LayerNorm``; ``encoder.act.{l}.weight``: ``nn.PReLU``;
* link head ``decoder.lin1``, ``decoder.act``, ``decoder.lin2``:
  ``score(u, v) = lin2(PReLU(lin1(h_u * h_v)))``.

Messages flow along ``edge_index`` (row 0 sources, row 1 destinations), as in PyG. With
torch_geometric installed SAGE and GCN layers are PyG's ``SAGEConv`` / ``GCNConv``; otherwise,
and for GAT always, plain-PyTorch equivalents with the same parameters.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

import numpy as np

#: The metadata key of a tma model file's description.
METADATA_KEY = "tma.model"


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


def _width(desc: Dict[str, Any]) -> int:
    """Output width of a layer description (heads concatenated)."""
    return int(desc["out_channels"]) * int(desc.get("heads", 1))


def _build_classes():
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional

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

    class GATConv(nn.Module):
        """PyG ``GATConv(in, out, heads)`` (concatenated heads, self-loops, no attention
        dropout) in plain PyTorch."""

        def __init__(self, in_channels: int, out_channels: int, heads: int = 1,
                     negative_slope: float = 0.2):
            super().__init__()
            self.heads, self.out_channels = int(heads), int(out_channels)
            self.negative_slope = float(negative_slope)
            hc = self.heads * self.out_channels
            self.lin = nn.Linear(in_channels, hc, bias=False)
            self.att_src = nn.Parameter(torch.zeros(1, self.heads, self.out_channels))
            self.att_dst = nn.Parameter(torch.zeros(1, self.heads, self.out_channels))
            self.bias = nn.Parameter(torch.zeros(hc))

        def forward(self, x, edge_index):
            n = x.shape[0]
            hh, c = self.heads, self.out_channels
            src, dst = edge_index[0], edge_index[1]
            keep = src != dst
            loops = torch.arange(n, device=x.device, dtype=src.dtype)
            src = torch.cat([src[keep], loops])
            dst = torch.cat([dst[keep], loops])
            h = self.lin(x).view(n, hh, c)
            s_src = (h * self.att_src).sum(-1)
            s_dst = (h * self.att_dst).sum(-1)
            e = F.leaky_relu(s_src[src] + s_dst[dst], self.negative_slope)
            idx = dst[:, None].expand(-1, hh)
            emax = torch.full((n, hh), float("-inf"), dtype=x.dtype, device=x.device)
            emax = emax.scatter_reduce(0, idx, e, reduce="amax", include_self=True)
            ex = (e - emax[dst]).exp()
            denom = torch.zeros(n, hh, dtype=x.dtype, device=x.device).index_add_(0, dst, ex)
            alpha = ex / denom[dst]
            out = torch.zeros(n, hh, c, dtype=x.dtype, device=x.device)
            out.index_add_(0, dst, h[src] * alpha[..., None])
            return out.reshape(n, hh * c) + self.bias

    class MLPConv(nn.Linear):
        """The MLP encoder's layer: ``nn.Linear`` that ignores the edges."""

        def __init__(self, in_channels: int, out_channels: int):
            super().__init__(in_channels, out_channels)

        def forward(self, x, edge_index=None):  # noqa: D401
            return super().forward(x)

    plain = {"SAGEConv": SAGEConv, "GCNConv": GCNConv, "GATConv": GATConv, "Linear": MLPConv}

    def make(l: int, desc: Dict[str, Any], pyg):
        module = desc.get("module")
        args = {k: v for k, v in desc.items() if k != "module"}
        if module not in plain:
            raise NotImplementedError(
                f"to_torch: layer {l} is a {module}, which this tma Python package does not "
                f"build (it builds {', '.join(sorted(plain))}); update the package"
            )
        if pyg is not None and module in ("SAGEConv", "GCNConv"):
            a, b = int(args["in_channels"]), int(args["out_channels"])
            return pyg.SAGEConv(a, b, aggr="mean") if module == "SAGEConv" else pyg.GCNConv(a, b)
        return plain[module](**args)

    class Encoder(nn.Module):
        def __init__(self, layers, layer_norm, pyg):
            super().__init__()
            for l, desc in enumerate(layers):
                self.add_module(str(l), make(l, desc, pyg))
            hidden = [_width(d) for d in layers[:-1]]
            self.norm = nn.ModuleList([nn.LayerNorm(h, eps=1e-5) for h in hidden]) if layer_norm else None
            self.act = nn.ModuleList([nn.PReLU(1) for _ in hidden])
            self.num_layers = len(layers)

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

        def __init__(self, layers, layer_norm, link, pyg):
            super().__init__()
            self.encoder = Encoder(layers, layer_norm, pyg)
            self.decoder = Decoder(_width(layers[-1])) if link else None

        def forward(self, x, edge_index):
            return self.encoder(x, edge_index)

        def score(self, h, src, dst):
            if self.decoder is None:
                raise ValueError("score: a node-classification model has no link decoder")
            return self.decoder(h[src], h[dst])

    return TmaModel


def _sniff(params: Dict[str, np.ndarray]) -> Dict[str, Any]:
    """The description of a model file without ``tma.model`` metadata (written before tma
    recorded it), from its parameter names and shapes."""
    layers = 0
    while any(k.startswith(f"encoder.{layers}.") for k in params):
        layers += 1
    if layers == 0:
        raise ValueError("not a tma model: no encoder.0.* parameters")
    descs: List[Dict[str, Any]] = []
    for l in range(layers):
        p = f"encoder.{l}."
        if p + "lin_l.weight" in params:
            w = params[p + "lin_l.weight"]
            descs.append({"module": "SAGEConv", "in_channels": w.shape[1], "out_channels": w.shape[0]})
        elif p + "att_src" in params:
            w, att = params[p + "lin.weight"], params[p + "att_src"]
            descs.append({"module": "GATConv", "in_channels": w.shape[1], "out_channels": att.shape[2],
                          "heads": att.shape[1], "negative_slope": 0.2})
        elif p + "lin.weight" in params:
            w = params[p + "lin.weight"]
            descs.append({"module": "GCNConv", "in_channels": w.shape[1], "out_channels": w.shape[0]})
        elif p + "weight" in params:
            w = params[p + "weight"]
            descs.append({"module": "Linear", "in_channels": w.shape[1], "out_channels": w.shape[0]})
        else:
            raise ValueError(f"not a tma model: unknown layer parameters {sorted(params)[:4]}")
    return {
        "layers": descs,
        "layer_norm": "encoder.norm.0.weight" in params,
        "head": "link" if "decoder.lin1.weight" in params else "node",
    }


def _describe(params: Dict[str, np.ndarray], meta: Dict[str, str], where: str) -> Dict[str, Any]:
    """The model's description: the file's ``tma.model`` metadata, else sniffed."""
    text = meta.get(METADATA_KEY)
    if text is None:
        return _sniff(params)
    try:
        d = json.loads(text)
        if not isinstance(d.get("layers"), list) or not d["layers"]:
            raise ValueError("no layers")
        return d
    except (ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"{where}: its {METADATA_KEY} metadata is not a model description: {e}") from None


def to_torch(model: Any, which: str = "best", use_pyg: Optional[bool] = None):
    """A ``torch.nn.Module`` in eval mode holding a tma model (any encoder).

    ``model``: a :class:`tma.Run` (its ``model_{which}.safetensors``), a run directory, a
    ``.safetensors`` file, or a ``{name: array}`` dict (recognised by its parameter names).
    ``use_pyg``: build SAGE and GCN layers from PyG's ``SAGEConv`` / ``GCNConv`` (default:
    when torch_geometric is importable)."""
    from ._safetensors import load_metadata, load_safetensors

    torch = _torch()
    if which not in ("best", "final"):
        raise ValueError(f'which={which!r}: expected "best" or "final"')
    if isinstance(model, dict):
        params, meta, where = model, {}, "the parameters"
    else:
        path = model.dir if hasattr(model, "dir") and hasattr(model, "summary") else os.fspath(model)
        if os.path.isdir(path):
            path = os.path.join(path, f"model_{which}.safetensors")
        params, meta, where = load_safetensors(path), load_metadata(path), path
    desc = _describe(params, meta, where)
    pyg = _pyg() if use_pyg is None or use_pyg else None
    if use_pyg and pyg is None:
        raise ImportError("use_pyg=True needs torch_geometric")
    net = _build_classes()(desc["layers"], bool(desc.get("layer_norm", True)),
                           desc.get("head") == "link", pyg)
    state = {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in params.items()}
    net.load_state_dict(state, strict=True)
    return net.eval()
