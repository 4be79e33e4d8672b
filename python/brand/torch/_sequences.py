"""A token job's batch as a step: ``(B, seq)`` int32 tensors on its buffer.

The sequences of a token job's batch are evenly spaced in its buffer
(``brand._sequences.layout``): the buffer viewed as int32 and strided by
the spacing is each member's ``(B, seq)`` tensor, with no copy. A batch
whose members are not evenly spaced is copied, member by member.
"""

from __future__ import annotations

from typing import Any, Dict

import torch

from .._sequences import _members, layout
from ._tensors import npy_tensor

_NPY_HEADER = 128
_LOSS_MASK = "loss_mask.npy"


def _vision_tensors(batch: Any) -> Dict[str, Any]:
    """A vision job's batch as a step (sequence_tensors)."""
    out: Dict[str, Any] = {"input_ids": [], "position_ids": [], "loss_mask": [], "image_spans": [],
                           "image_sizes": [], "images": []}
    for s in batch:
        for k in ("input_ids", "position_ids", "loss_mask", "image_spans", "image_sizes"):
            m = s.get(k + ".npy")
            if m is None:
                raise ValueError(f"brand: not a vision batch: sample {s.get('__key__')!r} has no {k}.npy")
            out[k].append(npy_tensor(m))
        n = out["image_sizes"][-1].shape[0]
        images = []
        for k in range(n):
            m = s.get(f"image.{k}.npy")
            if m is None:
                raise ValueError(f"brand: not a vision batch: sample {s.get('__key__')!r} has no image.{k}.npy")
            images.append(npy_tensor(m))
        out["images"].append(images)
    for k in ("input_ids", "position_ids", "loss_mask"):
        dtype = torch.uint8 if k == "loss_mask" else torch.int32
        out[k] = torch.stack(out[k]) if out[k] else torch.empty((0, 0), dtype=dtype)
    return out


def sequence_tensors(batch: Any) -> Dict[str, torch.Tensor]:
    """A token job's batch (a :class:`brand.Batch` of a job with ``seq``)
    as a step: ``{"input_ids": ..., "position_ids": ...}``, two
    ``torch.int32`` tensors of shape ``(B, seq)`` on the batch's buffer,
    without a copy (both views of one storage, the buffer the answer was
    read into; a batch whose members are not evenly spaced is copied). A
    batch of no sequences gives tensors of shape ``(0, 0)``.

    Derive ``cu_seqlens`` for variable-length attention on the GPU:
    ``cu = torch.nonzero(pos.flatten() == 0).flatten()``, then the end,
    ``pos.numel()``.

    A vision job's batch (``vision=``: docs/http-api.md, *Image-text
    sequences*) adds ``"loss_mask"`` (``torch.uint8`` ``(B, seq)``) and,
    per sequence, ``"image_spans"`` and ``"image_sizes"`` (``torch.int32``
    ``(n, 2)``: each image's placeholder tokens as start and length, its
    height and width as resized) and ``"images"`` (a list of ``(3, h, w)``
    ``torch.uint8`` tensors on the received buffer, in the order of their
    spans); its ``(B, seq)`` tensors are copies.

    Raises:
        ValueError: a batch that is not a token job's.
    """
    if any(s.get(_LOSS_MASK) is not None for s in batch):
        return _vision_tensors(batch)
    body = getattr(batch, "body", None)
    lay = layout(body) if body is not None else None
    if lay is not None:
        mv = memoryview(body).cast("B")
        if not mv.readonly:
            flat = torch.frombuffer(mv, dtype=torch.int32, count=len(mv) // 4)
            shape, strides = (lay.n, lay.seq), (lay.stride // 4, 1)
            return {
                "input_ids": flat.as_strided(shape, strides, lay.ids // 4),
                "position_ids": flat.as_strided(shape, strides, lay.pos // 4),
            }
    # PyTorch has no read-only tensors: a read-only body is copied too.
    cols = _members(batch)
    out = {}
    for k, v in cols.items():
        if not v:
            out[k] = torch.empty((0, 0), dtype=torch.int32)
            continue
        t = torch.empty((len(v), (len(v[0]) - _NPY_HEADER) // 4), dtype=torch.int32)
        dst = t.numpy()
        for i, m in enumerate(v):
            dst[i] = memoryview(m)[_NPY_HEADER:].cast("i")
        out[k] = t
    return out
