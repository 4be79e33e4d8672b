"""What each entry yields: one type a kind of job, whatever its options.

A step of every kind is one gateway batch of ``batch_size`` units
(samples, sequences, clips, windows) on one rank, as a ``NamedTuple``:
PyTorch's ``DataLoader``, ``pin_memory`` and ``default_convert`` keep a
named tuple's type as they walk it (a dataclass they leave unwalked, and
its tensors unpinned), and a :class:`BrandLoader` finds its tensors to
free their shared blocks as the trainer lets go of them.

Each ``*_batch`` function makes its type of what :class:`BrandDataset`
hands its ``collate`` (a list of samples, or a token or clip step's
dict), in the DataLoader worker, so that the type crosses to the
trainer's process whole.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

import torch

from ._tensors import collate_tensors

__all__ = ["ClipBatch", "SampleBatch", "SequenceBatch", "TensorBatch", "WindowBatch", "BATCH_TYPES"]


class SampleBatch(NamedTuple):
    """A step of :class:`brand.Samples`: ``B`` samples as stored.

    Attributes:
        keys: each sample's key (``"n01440764/000123"``).
        fields: each member's values by extension, in the samples' order
            (``fields["jpg"][i]``: sample ``i``'s JPEG bytes;
            ``fields["cls"][i]``: its label as stored, ``b"3"``); ``None``
            where a sample lacks the member. With ``decode=``, the members
            ``decode`` returned.
        datasets: with a mixture, each sample's dataset; else ``None``.
    """

    keys: List[str]
    fields: Dict[str, List[Any]]
    datasets: Optional[List[str]] = None


class TensorBatch(NamedTuple):
    """A step of :class:`brand.Tensors`: ``B`` images the gateway decoded
    and transformed.

    Attributes:
        images: ``torch.uint8`` of shape ``(B, 3, H, W)`` (``(B, H, W, 3)``
            for a pipeline of layout ``hwc``), stacked in a worker's shared
            block: normalise on the device.
        labels: ``torch.int64`` of shape ``(B,)``: each sample's ``cls``
            member as an integer, ``-1`` where it has none.
        keys: each sample's key.
        fields: every other member by extension (but ``cls``), as
            :class:`SampleBatch`'s.
    """

    images: torch.Tensor
    labels: torch.Tensor
    keys: List[str]
    fields: Dict[str, List[Any]]


class SequenceBatch(NamedTuple):
    """A step of :class:`brand.Sequences`: ``B`` packed token sequences.

    Attributes:
        tokens: ``torch.int32`` of shape ``(B, seq_len)``, the token IDs
            (the gateway's ``input_ids``), the pad after a short one.
        positions: ``torch.int32`` of shape ``(B, seq_len)``: each token's
            position in its document, 0 where a document starts (the
            gateway's ``position_ids``). Both on the received buffer.
    """

    tokens: torch.Tensor
    positions: torch.Tensor

    def cu_seqlens(self) -> torch.Tensor:
        """The documents' boundaries in the flattened batch, for
        variable-length attention (FlashAttention's ``cu_seqlens``): the
        offset of every document's first token, then the end; int32."""
        flat = self.positions.reshape(-1)
        starts = torch.nonzero(flat == 0).flatten()
        end = torch.tensor([flat.numel()], dtype=starts.dtype)
        return torch.cat([starts, end]).to(torch.int32)


class ClipBatch(NamedTuple):
    """A step of :class:`brand.Clips`: ``B`` clips the gateway decoded.

    Attributes:
        frames: ``torch.uint8`` of shape ``(B, T, H, W, 3)`` (or the job's
            ``layout``: ``tchw``, ``cthw``), on the received buffer.
        labels: ``torch.int64`` of shape ``(B,)``, each clip's video's
            class (its folder), ``-1`` where it has none.
        keys: each clip's key.
        info: each clip's source (the gateway's JSON member: video, frame
            numbers, PTS, seconds).
    """

    frames: torch.Tensor
    labels: torch.Tensor
    keys: List[str]
    info: List[Any]


class WindowBatch(NamedTuple):
    """A step of :class:`brand.LeRobot`: ``B`` windows of a LeRobot
    dataset, each around one anchor row.

    Attributes:
        features: a tensor per camera (``(B, T, H, W, 3)`` uint8, or the
            job's ``layout``) and per data column (``(B, T, ...)`` for a
            window, ``(B, ...)`` for the anchor's value), by LeRobot's
            feature names (``"observation.images.top"``, ``"action"``).
        keys: each window's key.
        info: each window's rows, padding and frames (the gateway's JSON
            member).
    """

    features: Dict[str, torch.Tensor]
    keys: List[str]
    info: List[Any]


#: The types the entries yield, which a BrandLoader hands on unwalked.
BATCH_TYPES = (SampleBatch, TensorBatch, SequenceBatch, ClipBatch, WindowBatch)

_NOT_MEMBERS = ("__key__", "__dataset__")


def _members(samples: Sequence[Mapping[str, Any]]) -> List[str]:
    """The members of ``samples`` in first-seen order, keys aside."""
    seen: Dict[str, None] = {}
    for s in samples:
        for k in s:
            if k not in _NOT_MEMBERS:
                seen.setdefault(k, None)
    return list(seen)


def sample_batch(samples: List[Any]) -> SampleBatch:
    """A :class:`SampleBatch` of a batch's samples (dicts)."""
    for s in samples:
        if not isinstance(s, Mapping):
            raise TypeError(f"brand.Samples: decode returned a {type(s).__name__}; it must return the sample's "
                            "dict (its members by extension)")
    keys = [s.get("__key__") for s in samples]
    fields = {m: [s.get(m) for s in samples] for m in _members(samples)}
    datasets = [s.get("__dataset__") for s in samples] if samples and "__dataset__" in samples[0] else None
    return SampleBatch(keys, fields, datasets)


def _label(v: Any) -> int:
    if v is None:
        return -1
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def tensor_batch(samples: List[Any]) -> TensorBatch:
    """A :class:`TensorBatch` of a transformed batch's samples (their
    images tensors on the received buffer), the images stacked by
    :func:`collate_tensors` (in a worker, into a shared block)."""
    cols = collate_tensors(samples)
    stacked = [k for k, v in cols.items() if isinstance(v, torch.Tensor)]
    if not stacked:
        raise ValueError("brand.Tensors: a batch with no image: the pipeline made no tensor of its samples "
                         "(a dataset without images reads with brand.Samples)")
    image = "npy" if "npy" in stacked else stacked[0]
    labels = torch.tensor([_label(v) for v in cols.get("cls", [None] * len(samples))], dtype=torch.int64)
    fields = {k: v for k, v in cols.items() if k not in (image, "__key__", "cls")}
    return TensorBatch(cols[image], labels, list(cols.get("__key__", [])), fields)


def sequence_batch(step: Mapping[str, torch.Tensor]) -> SequenceBatch:
    """A :class:`SequenceBatch` of a token step (:func:`sequence_tensors`)."""
    return SequenceBatch(step["input_ids"], step["position_ids"])


def clip_batch(step: Mapping[str, Any]) -> ClipBatch:
    """A :class:`ClipBatch` of a clip step (:func:`clip_tensors`)."""
    keys = list(step.get("__key__", []))
    labels = step.get("cls")
    if labels is None:
        labels = torch.full((len(keys),), -1, dtype=torch.int64)
    if "frames" not in step:
        raise ValueError("brand.Clips: a batch without frames: a LeRobot dataset's windows read with brand.LeRobot")
    return ClipBatch(step["frames"], labels, keys, list(step.get("json", [])))


def window_batch(step: Mapping[str, Any]) -> WindowBatch:
    """A :class:`WindowBatch` of a LeRobot step (:func:`clip_tensors`)."""
    features = {k: v for k, v in step.items() if k not in ("__key__", "json", "cls")}
    return WindowBatch(features, list(step.get("__key__", [])), list(step.get("json", [])))
