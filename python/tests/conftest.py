"""Shared fixtures: the real datasets next to the clone (``../shared/datasets`` from the
repository root; missing is a failure, never a skip) and the ``tma`` binary of this checkout
(for comparisons with the CLI)."""

import os
import pathlib
import shutil

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

# small training options with deterministic rounds: round k forms after exactly 3k steps of
# every trainer, so round k's model and metrics do not depend on timing (only how many rounds
# fit in the time limit does)
SMALL = dict(
    method="random-tma",
    trainers=2,
    sync_every_steps=3,
    time_limit="3s",
    hidden=16,
    fanouts=[5, 5],
    batch_size=32,
    lr=0.01,
    seed=3,
    threads=2,
)

DATASETS = REPO.parent / "shared" / "datasets"


def dataset_dir(name: str) -> pathlib.Path:
    d = DATASETS / name
    if not (d / "meta.json").is_file():
        pytest.fail(
            f"{d} is missing: the Python tests need the shared real datasets next to the "
            f"repository clone ({DATASETS}; layout: docs/dataset-format.md)",
            pytrace=False,
        )
    return d


@pytest.fixture(scope="session")
def cora_dir() -> pathlib.Path:
    return dataset_dir("planetoid_cora")


def load_arrays(d: pathlib.Path) -> dict:
    """A dataset directory's arrays as a user would hold them (dense x, class ids, index lists)."""
    ei = np.load(d / "edge_index.npy")
    ip, ix, xd = (np.load(d / f"x_{k}.npy") for k in ("indptr", "indices", "data"))
    n = len(ip) - 1
    import json

    dim = json.loads((d / "meta.json").read_text())["x_shape"][1]
    x = np.zeros((n, dim), dtype=np.float32)
    rows = np.repeat(np.arange(n), np.diff(ip))
    np.add.at(x, (rows, ix), xd)
    return dict(
        edge_index=ei,
        x=x,
        y=np.load(d / "y.npy"),
        train_idx=np.load(d / "train_idx.npy"),
        val_idx=np.load(d / "val_idx.npy"),
        test_idx=np.load(d / "test_idx.npy"),
    )


@pytest.fixture(scope="session")
def cora_arrays(cora_dir) -> dict:
    return load_arrays(cora_dir)


@pytest.fixture(scope="session")
def tma_bin() -> pathlib.Path:
    """The CLI built from this checkout: $TMA_BIN, else target/{debug,release}/tma under
    $CARGO_TARGET_DIR or the repository (the newest)."""
    env = os.environ.get("TMA_BIN")
    if env:
        return pathlib.Path(env)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    found = [target / p / "tma" for p in ("debug", "release") if (target / p / "tma").is_file()]
    if not found:
        found = [pathlib.Path(p) for p in [shutil.which("tma")] if p]
    if not found:
        pytest.fail(
            f"no tma binary under {target}/{{debug,release}} (build it: cargo build -p tma-cli, "
            "or set TMA_BIN)",
            pytrace=False,
        )
    return max(found, key=lambda p: p.stat().st_mtime)
