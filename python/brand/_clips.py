"""A clip job's batch as arrays on its buffer: ``(B, T, H, W, 3)`` frames.

Each sample of a clip job's batch (docs/http-api.md, *Video clips*) is one
clip: over a tree of videos ``KEY.frames.npy`` (uint8 ``(T, H, W, 3)``, or
the job's ``clip_layout``), ``KEY.cls`` (its label, when its video has
one) and ``KEY.json`` (the frames' source: video, frame numbers, PTS and
seconds); over a LeRobot dataset a ``KEY.{camera}.npy`` per camera window,
a ``KEY.{column}.npy`` per data column and ``KEY.json``. The gateway
writes every sample's members in one order and of one size within a batch
(its JSON members padded to one length), so each ``.npy`` member of the
``B`` samples starts at ``first + i * stride`` in the batch's buffer: one
strided ``(B, ...)`` array over the buffer, no copy. :func:`layout` finds
``first`` and ``stride`` from the archive's headers and checks that
spacing; :func:`clip_arrays` makes numpy arrays of it
(``brand.torch.clip_tensors`` makes tensors). A batch whose members are not
evenly spaced (a tar the gateway did not write) is copied instead.

Standard library only, but for :func:`clip_arrays`, which needs numpy.
"""

from __future__ import annotations

import ast
import json
from typing import Any, Dict, List, NamedTuple, Optional

from ._tar import _NotPlain, _plain_members, split_key

__all__ = ["Column", "layout", "clip_arrays", "column_name"]


class Column(NamedTuple):
    """One ``.npy`` member of every sample of a batch, as a strided array:
    sample ``i``'s data at ``first + i * stride`` (``stride`` 0 for a batch
    of one), of numpy dtype ``descr`` and ``shape``; ``None`` as ``first``
    when the members are not evenly spaced or not alike (then copied)."""

    ext: str
    descr: str
    shape: "tuple[int, ...]"
    first: Optional[int]
    stride: int


def column_name(ext: str) -> str:
    """The step's key of a member's extension: ``frames.npy`` is
    ``"frames"``, ``observation.images.top.npy`` is
    ``"observation.images.top"``; others as they are (``cls``, ``json``)."""
    return ext[: -len(".npy")] if ext.endswith(".npy") else ext


def _header(mv: memoryview, start: int, end: int) -> "tuple[int, str, tuple[int, ...]]":
    """(data offset from ``start``, descr, shape) of a ``.npy`` member."""
    head = bytes(mv[start : min(end, start + 12)])
    if len(head) < 10 or head[:6] != b"\x93NUMPY":
        raise ValueError("brand: not a .npy member")
    if head[6] == 1:
        n, pre = int.from_bytes(head[8:10], "little"), 10
    else:
        n, pre = int.from_bytes(head[8:12], "little"), 12
    d = ast.literal_eval(bytes(mv[start + pre : start + pre + n]).decode("latin-1").strip())
    if not isinstance(d, dict) or d.get("fortran_order") is not False:
        raise ValueError("brand: a .npy member not in C order")
    return pre + n, str(d["descr"]), tuple(int(x) for x in d["shape"])


def layout(body: Any) -> "tuple[List[str], Dict[str, Column], List[Dict[str, Any]]]":
    """The layout of a clip batch's tar ``body`` (``bytes``, ``bytearray``
    or a ``memoryview`` of one): its samples' keys, a :class:`Column` per
    ``.npy`` extension, and each sample's other members as ``bytes`` (by
    extension).

    Raises:
        ValueError: a batch whose samples have different members, or a
            ``.npy`` member of another dtype or shape than the first
            sample's.
    """
    mv = memoryview(body).cast("B")
    try:
        members = _plain_members(mv)
    except _NotPlain:
        members = None
    if members is None:
        import tarfile, io  # noqa: E401, PLC0415 - the rare path: a tar the gateway did not write

        members = []
        with tarfile.open(fileobj=io.BytesIO(bytes(mv)), mode="r:") as tf:
            for ti in tf:
                if ti.isfile():
                    members.append((ti.name.encode(), ti.offset_data, ti.offset_data + ti.size))
    keys: List[str] = []
    samples: List[Dict[str, "tuple[int, int]"]] = []
    for name, start, end in members:
        k, ext = split_key(name.decode("utf-8", "surrogateescape"))
        if not keys or keys[-1] != k:
            keys.append(k)
            samples.append({})
        samples[-1][ext] = (start, end)
    cols: Dict[str, Column] = {}
    others: List[Dict[str, Any]] = [{} for _ in samples]
    if not samples:
        return keys, cols, others
    exts = list(samples[0])
    for i, s in enumerate(samples):
        if list(s) != exts:
            raise ValueError(f"brand: not a clip batch: sample {keys[i]!r} has members {list(s)}, the first {exts}")
    for ext in exts:
        if not ext.endswith(".npy"):
            for i, s in enumerate(samples):
                a, b = s[ext]
                others[i][ext] = bytes(mv[a:b])
            continue
        a0, b0 = samples[0][ext]
        off, descr, shape = _header(mv, a0, b0)
        head = mv[a0 : a0 + off]
        stride = samples[1][ext][0] - a0 if len(samples) > 1 else 0
        even = True
        for i, s in enumerate(samples):
            a, b = s[ext]
            if b - a != b0 - a0 or mv[a : a + off] != head:
                o, d, sh = _header(mv, a, b)
                if (d, sh) != (descr, shape):
                    raise ValueError(f"brand: not a clip batch: sample {keys[i]!r}'s {ext} is {d} {sh}, "
                                     f"the first's {descr} {shape}")
                even = False
            elif a != a0 + i * stride:
                even = False
        cols[ext] = Column(ext, descr, shape, a0 + off if even else None, stride)
    return keys, cols, others


def clip_arrays(batch: Any) -> Dict[str, Any]:
    """A clip job's batch (:meth:`brand.Client.batch` of a job with
    ``clip``, ``delta_timestamps`` or ``frames``) as a step: each ``.npy``
    member of its samples stacked into one numpy array viewing the batch's
    buffer, without a copy (``"frames"``: uint8 ``(B, T, H, W, 3)``; a
    LeRobot camera's by its key; a column's ``(B, T, ...)`` or ``(B,
    ...)``); ``"cls"`` the labels as an int64 array (-1: none), ``"json"``
    the parsed JSON members, ``"__key__"`` the keys. Members not evenly
    spaced are copied into new arrays. Needs numpy.

    Raises:
        ValueError: a batch that is not a clip job's.
    """
    import numpy  # noqa: PLC0415 - optional, only for this function

    body = getattr(batch, "body", None)
    if body is None:
        raise ValueError("brand: a clip batch's buffer is its body: read it with a client of a clip job")
    mv = memoryview(body).cast("B")
    keys, cols, others = layout(mv)
    out: Dict[str, Any] = {"__key__": keys}
    n = len(keys)
    for ext, c in cols.items():
        dt = numpy.dtype(c.descr)
        if c.first is not None:
            base = numpy.ndarray(c.shape, dt).strides if c.shape else ()
            out[column_name(ext)] = numpy.ndarray((n, *c.shape), dt, body, c.first, (c.stride, *base))
            continue
        arrs = []
        for s in batch:
            m = s[ext]
            off, _, _ = _header(memoryview(m).cast("B"), 0, len(m))
            arrs.append(numpy.frombuffer(m, dt, offset=off).reshape(c.shape))
        out[column_name(ext)] = numpy.stack(arrs)
    if others and "cls" in others[0]:
        out["cls"] = numpy.array([int(o["cls"]) for o in others], dtype=numpy.int64)
    if others and "json" in others[0]:
        out["json"] = [json.loads(o["json"]) for o in others]
    return out
