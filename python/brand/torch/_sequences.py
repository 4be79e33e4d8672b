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

_NPY_HEADER = 128


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

    Raises:
        ValueError: a batch that is not a token job's.
    """
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
