"""DGL peer of `tma bench` groups sampler and minibatch (DGL is what the paper's release uses).

Graph: N=1,000,000 nodes, 15 random in-neighbours each (E=15M), 128-d random features.
Fanouts: 10 neighbours nearest the seeds, 25 at the outer hop, i.e. DGL
`NeighborSampler([25, 10])` (DGL lists fanouts input layer first; tma lists them seed side
first: tma `[10, 25]`).
- sampler: `sample_blocks` alone on batches of 1024 random seed nodes, sampled edges/s.
- minibatch.link: `as_edge_prediction_sampler(..., negative_sampler=Uniform(1))`, batches of
  65536 random positive edges; SAGEConv(mean) 128->256 -> LayerNorm -> PReLU -> SAGEConv 256->256;
  decoder Linear(256,256) -> PReLU -> Linear(256,1) on h_u * h_v; BCE; Adam. Seed edges/s.
- minibatch.node: batches of 1024 random seed nodes, same encoder with 40 outputs, CE, Adam.
  Seed nodes/s.
Everything runs in this one process (no DataLoader workers), as tma does.

Usage: python dgl_minibatch.py [--only sampler,minibatch] [--nodes N] [--degree D] [--iters K]
       [--link-batch B] [--link-iters K] [--node-batch B] [--quick]
Prints `BENCH {json}` lines (see peer_common.py).
"""
import argparse, os, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F
import dgl
from dgl.nn import SAGEConv
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_common import emit, median, reset_peak_rss

ap = argparse.ArgumentParser()
ap.add_argument("--only", default="sampler,minibatch")
ap.add_argument("--quick", action="store_true")
ap.add_argument("--nodes", type=int)
ap.add_argument("--degree", type=int)
ap.add_argument("--iters", type=int)
ap.add_argument("--link-batch", type=int)
ap.add_argument("--link-iters", type=int)
ap.add_argument("--node-batch", type=int)
a = ap.parse_args()
q = a.quick
N = a.nodes or (5000 if q else 1_000_000)
DEG = a.degree or (5 if q else 15)
ITERS = a.iters or (2 if q else 5)
LB = a.link_batch or (256 if q else 65536)
LITERS = a.link_iters or (1 if q else 4)
NB = a.node_batch or (64 if q else 1024)
MIN_SECS = 0.0 if q else 2.0
only = set(a.only.split(","))
IMPL = f"dgl {dgl.__version__} (torch {torch.__version__}, {torch.get_num_threads()} threads)"
torch.manual_seed(0)

reset_peak_rss()
E = N * DEG
src = torch.randint(0, N, (E,))
dst = torch.arange(N).repeat_interleave(DEG)
g = dgl.graph((src, dst), num_nodes=N)
del src, dst
g.create_formats_()
x = torch.rand(N, 128) * 2 - 1
labels = torch.arange(N) % 40
sampler = dgl.dataloading.NeighborSampler([25, 10])


class Enc(nn.Module):
    def __init__(s, out):
        super().__init__()
        s.c1 = SAGEConv(128, 256, "mean"); s.norm = nn.LayerNorm(256); s.act = nn.PReLU()
        s.c2 = SAGEConv(256, out, "mean")

    def forward(s, blocks, h):
        h = s.act(s.norm(s.c1(blocks[0], h)))
        return s.c2(blocks[1], h)


class Dec(nn.Module):
    def __init__(s):
        super().__init__(); s.l1 = nn.Linear(256, 256); s.act = nn.PReLU(); s.l2 = nn.Linear(256, 1)

    def forward(s, h, u, v):
        return s.l2(s.act(s.l1(h[u] * h[v]))).view(-1)


if "sampler" in only:
    batches = [torch.randperm(N)[:NB] for _ in range(16)]
    sampler.sample_blocks(g, batches[0])
    t = time.perf_counter(); edges = 0; i = 0
    while i < max(ITERS, 10) or time.perf_counter() - t < MIN_SECS:
        _, _, blocks = sampler.sample_blocks(g, batches[i % len(batches)])
        edges += sum(b.num_edges() for b in blocks); i += 1
    secs = time.perf_counter() - t
    emit("sampler", edges / secs, "edges/s", True, IMPL,
         f"DGL NeighborSampler([25,10]).sample_blocks, {NB} seeds, N={N} E={E}; {i} batches")

if "minibatch" in only:
    # link prediction
    enc = Enc(256); dec = Dec()
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-3)
    esampler = dgl.dataloading.as_edge_prediction_sampler(
        sampler, negative_sampler=dgl.dataloading.negative_sampler.Uniform(1))
    ts = []
    for it in range(LITERS + 1):
        t = time.perf_counter()
        eids = torch.randint(0, E, (LB,))
        input_nodes, pos, neg, blocks = esampler.sample(g, eids)
        h = enc(blocks, x[input_nodes])
        pu, pv = pos.edges(); nu, nv = neg.edges()
        logits = torch.cat([dec(h, pu, pv), dec(h, nu, nv)])
        tgt = torch.cat([torch.ones(pu.numel()), torch.zeros(nu.numel())])
        loss = F.binary_cross_entropy_with_logits(logits, tgt)
        opt.zero_grad(); loss.backward(); opt.step()
        ts.append(time.perf_counter() - t)
        print("link", it, float(loss), ts[-1], file=sys.stderr, flush=True)
    emit("minibatch.link", LB / median(ts[1:]), "edges/s", True, IMPL,
         f"DGL link prediction, batch {LB} edges + Uniform(1) negatives, fanouts [25,10], N={N} E={E}")
    del enc, dec, opt
    # node classification
    reset_peak_rss()
    enc = Enc(40); opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
    ts = []; t_all = time.perf_counter(); it = 0
    while it <= ITERS or time.perf_counter() - t_all < MIN_SECS:
        t = time.perf_counter()
        seeds = torch.randperm(N)[:NB]
        input_nodes, out_nodes, blocks = sampler.sample(g, seeds)
        out = enc(blocks, x[input_nodes])
        loss = F.cross_entropy(out, labels[out_nodes])
        opt.zero_grad(); loss.backward(); opt.step()
        ts.append(time.perf_counter() - t); it += 1
    emit("minibatch.node", NB / median(ts[1:]), "nodes/s", True, IMPL,
         f"DGL node classification, batch {NB} seeds, fanouts [25,10], N={N} E={E}; {it - 1} steps")
