"""PyG peer of `tma bench` groups fullgraph, inference and mrr (adapted from
../shared/bench/pyg_fullgraph.py: same workload and model).

fullgraph: full-graph 2-layer GraphSAGE (mean), random graph N=200,000, E=4,000,000 (20 random
in-neighbours per node, as tma bench), 128-d features, hidden 256, 40 classes, dropout 0.5,
cross-entropy on a random half of the nodes, Adam; median s/iter (fwd + bwd + step) after one
warm-up.  inference: the same model in eval mode under no_grad over the whole graph (exact
layer-wise full-neighbour inference), nodes/s.  mrr: the tma link decoder
(Linear(256,256) -> PReLU -> Linear(256,1) on h_u * h_v) on P positives x (1 + 1000 negatives),
ranks, positives/s.

Usage: python pyg_fullgraph.py [--only fullgraph,inference,mrr] [--nodes N] [--degree D]
       [--iters K] [--mrr-positives P] [--mrr-negatives Q] [--quick]
Prints `BENCH {json}` lines (see peer_common.py).
"""
import argparse, os, sys, time
import torch
import torch.nn.functional as F
import torch_geometric
from torch_geometric.nn import SAGEConv
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_common import emit, median, reset_peak_rss

ap = argparse.ArgumentParser()
ap.add_argument("--only", default="fullgraph,inference,mrr")
ap.add_argument("--quick", action="store_true")
ap.add_argument("--nodes", type=int)
ap.add_argument("--degree", type=int)
ap.add_argument("--iters", type=int)
ap.add_argument("--mrr-positives", type=int)
ap.add_argument("--mrr-negatives", type=int)
a = ap.parse_args()
q = a.quick
N = a.nodes or (3000 if q else 200_000)
DEG = a.degree or (5 if q else 20)
ITERS = a.iters or (2 if q else 5)
P = a.mrr_positives or (8 if q else 500)
K = a.mrr_negatives or (50 if q else 1000)
Fd, H, C = 128, 256, 40
only = set(a.only.split(","))
IMPL = f"pyg {torch_geometric.__version__} (torch {torch.__version__}, {torch.get_num_threads()} threads)"
torch.manual_seed(0)


def graph():
    E = N * DEG
    src = torch.randint(0, N, (E,))
    dst = torch.arange(N).repeat_interleave(DEG)
    ei = torch.stack([src, dst])
    try:
        from torch_geometric import EdgeIndex
        ei = EdgeIndex(ei, sparse_size=(N, N)).sort_by('col')[0]
    except Exception:
        from torch_geometric.utils import sort_edge_index
        ei = sort_edge_index(ei, num_nodes=N, sort_by_row=False)
    return ei, E


class Net(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.c1 = SAGEConv(Fd, H); s.c2 = SAGEConv(H, C)

    def forward(s, x, ei):
        x = F.relu(s.c1(x, ei)); x = F.dropout(x, 0.5, s.training); return s.c2(x, ei)


if "fullgraph" in only:
    reset_peak_rss()
    ei, E = graph()
    x = torch.randn(N, Fd); y = torch.randint(0, C, (N,)); mask = torch.rand(N) < 0.5
    m = Net(); opt = torch.optim.Adam(m.parameters(), lr=0.01)
    ts = []
    for i in range(ITERS + 1):
        t = time.perf_counter(); opt.zero_grad(); out = m(x, ei)
        loss = F.cross_entropy(out[mask], y[mask]); loss.backward(); opt.step()
        ts.append(time.perf_counter() - t)
        print(i, float(loss), ts[-1], file=sys.stderr, flush=True)
    emit("fullgraph.iter", median(ts[1:]), "s/iter", False, IMPL,
         f"PyG SAGEConv full-graph fwd+bwd+Adam N={N} E={E}")
    del ei, x, y, m, opt, out

if "inference" in only:
    reset_peak_rss()
    ei, E = graph()
    x = torch.randn(N, Fd)
    m = Net().eval()
    ts = []
    with torch.no_grad():
        for i in range(ITERS + 1):
            t = time.perf_counter(); out = m(x, ei); ts.append(time.perf_counter() - t)
    emit("inference.full", N / median(ts[1:]), "nodes/s", True, IMPL,
         f"PyG full-graph no_grad forward N={N} E={E}")
    del ei, x, m, out

if "mrr" in only:
    reset_peak_rss()
    h = torch.rand(N, H) * 2 - 1
    lin1 = torch.nn.Linear(H, H); act = torch.nn.PReLU(); lin2 = torch.nn.Linear(H, 1)
    src = torch.randint(0, N, (P,)).repeat_interleave(K + 1)
    dst = torch.randint(0, N, (P * (K + 1),))
    chunk = 64 * (K + 1)
    ts = []
    with torch.no_grad():
        for i in range(min(ITERS, 3) + 1):
            t = time.perf_counter()
            rr = 0.0
            for s in range(0, src.numel(), chunk):
                z = h[src[s:s + chunk]] * h[dst[s:s + chunk]]
                sc = lin2(act(lin1(z))).view(-1, K + 1)
                rank = 1 + (sc[:, 1:] > sc[:, :1]).sum(1)
                rr += float((1.0 / rank.float()).sum())
            ts.append(time.perf_counter() - t)
    emit("mrr.eval", P / median(ts[1:]), "pos/s", True, IMPL,
         f"torch decoder on {P} positives x (1+{K}) negatives")
