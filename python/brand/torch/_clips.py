"""A clip job's batch as a step: ``(B, T, H, W, 3)`` uint8 tensors on its buffer.

The clips of a clip job's batch are evenly spaced in its buffer
(``brand._clips.layout``): each ``.npy`` member of the ``B`` samples is one
strided tensor over the buffer, with no copy. A batch whose members are
not evenly spaced, or a read-only buffer, is copied.
"""

from __future__ import annotations

from typing import Any, Dict

import torch

from .._clips import clip_arrays
from ._shm import worker_blocks


def clip_tensors(batch: Any) -> Dict[str, Any]:
    """A clip job's batch (a :class:`brand.Batch` of a job with ``clip``,
    ``delta_timestamps`` or ``frames``) as a step: ``{"frames": ...,
    "cls": ..., "json": [...], "__key__": [...]}`` over a tree of videos —
    ``frames`` a ``torch.uint8`` tensor of shape ``(B, T, H, W, 3)`` (or
    the job's ``clip_layout``) on the batch's buffer, without a copy;
    ``cls`` the labels, int64 (-1: none) — and over a LeRobot dataset a
    tensor per camera (``(B, T, H, W, 3)``) and per data column (``(B, T,
    ...)`` for a window, ``(B, ...)`` for the anchor's value) by its key,
    with ``json`` each sample's rows, padding and frames.

    Raises:
        ValueError: a batch that is not a clip job's.
    """
    out: Dict[str, Any] = {}
    # In a BrandLoader's worker the batch was read into a shared block
    # (BrandDataset gives the client its blocks): its frames are handed to
    # the trainer's process by reference.
    blocks = worker_blocks()
    for k, v in clip_arrays(batch).items():
        shared = blocks.tensor_of(v) if blocks is not None else None
        if shared is not None:
            out[k] = shared
        elif hasattr(v, "dtype"):
            # PyTorch has no read-only tensors: a read-only buffer is copied.
            out[k] = torch.from_numpy(v if v.flags.writeable else v.copy())
        else:
            out[k] = v
    return out
