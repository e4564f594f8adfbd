"""A reader of safetensors files (tma's ``model_{final,best}.safetensors``) into NumPy arrays,
without the ``safetensors`` package: an 8-byte little-endian header length, a JSON header
``{name: {"dtype", "shape", "data_offsets": [begin, end]}}``, then the raw little-endian
tensors."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Dict, Union

import numpy as np

_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}


def _read(path: str):
    """(header dict, whole file bytes, header length) of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} exceeds the file ({len(raw)} bytes)")
    try:
        header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    return header, raw, n


def load_metadata(path: Union[str, "os.PathLike[str]"]) -> Dict[str, str]:
    """The header's ``__metadata__`` of a safetensors file (``{}`` when it has none); tma's
    model files have ``tma.model``, a JSON description of the model (encoder, its options,
    widths, each layer's PyTorch module). Errors as :func:`load_safetensors`."""
    path = os.fspath(path)
    header, _, _ = _read(path)
    meta = header.get("__metadata__") or {}
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: __metadata__ is not a JSON object")
    return dict(meta)


def load_safetensors(path: Union[str, "os.PathLike[str]"]) -> Dict[str, np.ndarray]:
    """``{name: numpy.ndarray}`` of a safetensors file, in file order. ``ValueError`` naming
    the file for a malformed one; ``OSError`` when it cannot be read."""
    path = os.fspath(path)
    header, raw, n = _read(path)
    body = memoryview(raw)[8 + n :]
    out: Dict[str, np.ndarray] = {}
    entries = [(k, v) for k, v in header.items() if k != "__metadata__"]
    entries.sort(key=lambda kv: kv[1]["data_offsets"][0])
    for name, spec in entries:
        dt = _DTYPES.get(spec.get("dtype"))
        if dt is None:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {spec.get('dtype')}")
        b, e = spec["data_offsets"]
        shape = tuple(spec["shape"])
        if not (0 <= b <= e <= len(body)):
            raise ValueError(f"{path}: tensor {name}: data offsets {b}..{e} outside the file")
        arr = np.frombuffer(body[b:e], dtype=dt)
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor {name}: {arr.size} values for shape {list(shape)}")
        out[name] = arr.reshape(shape).astype(dt[-2:] if dt.startswith("<") else dt, copy=True)
    _check_sha256(path, header, body)
    return out


def _check_sha256(path: str, header, body) -> None:
    """A file tma wrote records the sha256 of its tensors' bytes (``tma.data_sha256``, the
    tensors in ``tma.param_order``); a file whose bytes differ is damaged: ``ValueError``
    naming it, as tma's own reader says. Files of other writers have no such key."""
    meta = header.get("__metadata__") or {}
    want = meta.get("tma.data_sha256") if isinstance(meta, dict) else None
    if want is None:
        return
    order = meta.get("tma.param_order", "")
    names = order.split(",") if order else []
    h = hashlib.sha256()
    for name in names:
        spec = header.get(name)
        if not isinstance(spec, dict):
            raise ValueError(f"{path}: tma.param_order names {name!r}, which the file does not hold")
        b, e = spec["data_offsets"]
        h.update(body[b:e])
    got = h.hexdigest()
    if got != want:
        raise ValueError(
            f"{path}: damaged: its tensors' sha256 is {got}, its header says {want} "
            "(written by tma; a changed byte, e.g. a disk or copy error)"
        )
