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

import builtins
import collections.abc
import ctypes
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence

import numpy
import torch
from torch.utils.data import get_worker_info

from ._shm import step_block, storage, worker_blocks
from ._tensors import collate_tensors

__all__ = ["ClipBatch", "SampleBatch", "SequenceBatch", "TensorBatch", "WindowBatch", "BATCH_TYPES"]


class SampleBatch(NamedTuple):
    """A step of :class:`brand.Samples`: ``B`` samples as stored.

    Attributes:
        keys: each sample's key (``"n01440764/000123"``).
        fields: each member's values by extension, in the samples' order:
            ``fields["jpg"][i]`` is sample ``i``'s JPEG, a 1-D
            ``torch.uint8`` tensor of its bytes (``torchvision.io.
            decode_jpeg`` takes it as it is; :meth:`bytes` copies them
            out, :meth:`labels` reads integers); ``None`` where a sample
            lacks the member. Every tensor of a step is a view of the one
            buffer the batch was read into: in a :class:`BrandLoader`'s
            worker, one of its shared blocks, so that no sample's bytes
            are copied between the socket and the trainer (with a plain
            ``DataLoader``, once, into shared memory as PyTorch hands the
            step over). With ``decode=``, the values ``decode`` returned
            instead. In the worker, before the step is handed over, a
            read-only mapping whose tensors are made as first read.
        datasets: with a mixture, each sample's dataset; else ``None``.
    """

    keys: List[str]
    fields: Dict[str, List[Any]]
    datasets: Optional[List[str]] = None

    def bytes(self, member: str) -> List[Optional[builtins.bytes]]:
        """Each sample's ``member`` as ``bytes`` (a copy), ``None`` where it
        has none."""
        return [None if v is None else v.numpy().tobytes() if isinstance(v, torch.Tensor) else builtins.bytes(v)
                for v in self.fields[member]]

    def labels(self, member: str = "cls") -> torch.Tensor:
        """Each sample's ``member`` (ASCII digits, as ``.cls`` files hold
        them) as an int64 tensor, ``-1`` where it has none or no integer."""
        return torch.tensor([_label(v) for v in self.bytes(member)], dtype=torch.int64)

    def __reduce__(self) -> Any:
        # Pickled (a worker's step on its way to the trainer) as the one
        # buffer its tensors view and where each lies, rather than a
        # tensor each: PyTorch would send a descriptor per tensor. On a
        # worker's shared block, as the block's slot and the spans: the
        # loader's process maps each block once (_shm.step_block).
        if isinstance(self.fields, _Spans):
            blocks = worker_blocks()
            crossing = blocks.crossing(self.fields.body) if blocks is not None else None
            if crossing is not None:
                return (_unpack_on_block, (self.keys, *crossing, self.fields.spans, self.datasets))
            return (_unpack, (self.keys, self.fields.body, self.fields.spans, self.datasets))
        packed = _pack(self.fields)
        if packed is None:
            return (SampleBatch, tuple(self))
        return (_unpack, (self.keys, *packed, self.datasets))


def _pack(fields: Mapping[str, List[Any]]) -> Optional["tuple[torch.Tensor, Dict[str, List[Any]]]"]:
    """A step's fields as (the buffer every tensor of them views, each
    tensor's (offset, length) there, ``None`` as it is); ``None`` if they
    hold anything else, or tensors on several buffers."""
    first = None
    base = 0
    spans: Dict[str, List[Any]] = {}
    for name, values in fields.items():
        out = spans[name] = []
        for v in values:
            if v is None:
                out.append(None)
                continue
            if type(v) is not torch.Tensor or v.dtype != torch.uint8 or v.dim() != 1:
                return None
            off = v.storage_offset()
            if first is None:
                first, base = v, v.data_ptr() - off
            elif v.data_ptr() - off != base:  # another storage
                return None
            out.append((off, v.numel()))
    if first is None:
        return None
    st = storage(first)
    return torch.empty(0, dtype=torch.uint8).set_(st, 0, (st.nbytes(),), (1,)), spans


def _unpack(keys: List[str], body: torch.Tensor, spans: Dict[str, List[Any]],
            datasets: Optional[List[str]]) -> SampleBatch:
    return SampleBatch(keys, _views(body, spans), datasets)


def _unpack_on_block(keys: List[str], token: str, slot: int, carrier: Optional[torch.Tensor],
                     spans: Dict[str, List[Any]], datasets: Optional[List[str]]) -> SampleBatch:
    return SampleBatch(keys, _views(step_block(token, slot, carrier), spans), datasets)


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
        loss_mask: a vision job's (``vision=``): ``torch.uint8``
            ``(B, seq_len)``, 1 on the tokens the loss covers; ``None``
            for a text token job, as are the three below.
        images: per sequence, its images as ``(3, h, w)`` ``torch.uint8``
            tensors on the received buffer, in the order of their spans.
        image_spans: per sequence, ``torch.int32`` ``(n, 2)``: each
            image's placeholder tokens in ``tokens``, start and length.
        image_sizes: per sequence, ``torch.int32`` ``(n, 2)``: each
            image's height and width as resized.
    """

    tokens: torch.Tensor
    positions: torch.Tensor
    loss_mask: Optional[torch.Tensor] = None
    images: Optional[List[List[torch.Tensor]]] = None
    image_spans: Optional[List[torch.Tensor]] = None
    image_sizes: Optional[List[torch.Tensor]] = None

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
    """A :class:`SampleBatch` of a batch's samples (dicts): their members
    tensors on the batch's buffer when they are views of it (a
    :class:`brand.Batch` of a client of ``member_views``), else as they
    are (``decode``'s)."""
    for s in samples:
        if not isinstance(s, Mapping):
            raise TypeError(f"brand.Samples: decode returned a {type(s).__name__}; it must return the sample's "
                            "dict (its members by extension)")
    keys = [s.get("__key__") for s in samples]
    datasets = [s.get("__dataset__") for s in samples] if samples and "__dataset__" in samples[0] else None
    members = _members(samples)
    columns = {m: [s.get(m) for s in samples] for m in members}
    body = getattr(samples, "body", None)
    if body is None:
        return SampleBatch(keys, columns, datasets)
    whole, span, in_block = _on_body(body)
    if any(type(v) is not memoryview and v is not None for values in columns.values() for v in values):
        # Not every member a view of the body: the views made tensors, the
        # rest as they are.
        on = _tensor_on(whole)
        return SampleBatch(keys, {m: [on(span(v)) if type(v) is memoryview else v for v in values]
                                  for m, values in columns.items()}, datasets)
    fields = _Spans(whole, {m: [span(v) for v in values] for m, values in columns.items()})
    if in_block:
        # In a loader's worker, the step on one of its shared blocks: the
        # step is pickled as the block and the spans (SampleBatch.
        # __reduce__), and the trainer's process makes the tensors; making
        # them here too (about 1.5 µs a tensor) would be lost work.
        return SampleBatch(keys, fields, datasets)
    return SampleBatch(keys, fields.made(), datasets)


class _Spans(collections.abc.Mapping):
    """A step's members as spans of the one buffer they view: ``spans[ext]``
    each sample's ``(offset, length)`` in ``body``'s storage, ``None``
    where it has none. A mapping of each member's tensors, made as first
    read: a worker's step is pickled as the spans alone."""

    def __init__(self, body: torch.Tensor, spans: Dict[str, List[Any]]) -> None:
        self.body = torch.empty(0, dtype=torch.uint8).set_(storage(body), 0, (storage(body).nbytes(),), (1,))
        self.spans = spans
        self._made: Optional[Dict[str, List[Any]]] = None

    def made(self) -> Dict[str, List[Any]]:
        if self._made is None:
            self._made = _views(self.body, self.spans)
        return self._made

    def __getitem__(self, ext: str) -> List[Any]:
        return self.made()[ext]

    def __iter__(self) -> Iterator[str]:
        return iter(self.spans)

    def __len__(self) -> int:
        return len(self.spans)


def _views(body: torch.Tensor, spans: Mapping[str, List[Any]]) -> Dict[str, List[Any]]:
    return {name: [None if sp is None else body[sp[0]:sp[0] + sp[1]] for sp in values]
            for name, values in spans.items()}


def _tensor_on(whole: torch.Tensor) -> Callable[[Any], torch.Tensor]:
    base = whole.storage_offset()

    def on(sp: "tuple[int, int]") -> torch.Tensor:
        return whole[sp[0] - base:sp[0] - base + sp[1]]

    return on


def _on_body(body: Any) -> "tuple[torch.Tensor, Callable[[Any], Any], bool]":
    """``body`` as a 1-D uint8 tensor, the function that gives a member
    (a ``memoryview`` of ``body``) as its ``(offset, length)`` in that
    tensor's storage, and whether the tensor is on a worker's shared
    block."""
    arr = numpy.frombuffer(body, numpy.uint8)
    # In a loader's worker, on one of its shared blocks, reused (as
    # brand.Tensors stacks a step): the step leaves the worker by
    # reference, where PyTorch would move the buffer into a new
    # shared-memory file for every step, its pages faulted in each time
    # (docs/benchmarks.md: 129 µs of CPU a sample of 100 KiB so, 61 in a
    # block). The worker's client reads the body into a block
    # (read_batches_into), so the step is on it already; a body read
    # elsewhere (every block held then) is copied into one if one is free
    # now. Elsewhere, or with every block held, the buffer itself; PyTorch
    # has no read-only tensors: a read-only buffer is copied first.
    blocks = worker_blocks() if arr.size and get_worker_info() is not None else None
    whole = blocks.tensor_of(arr) if blocks is not None else None
    if whole is None and blocks is not None:
        whole = blocks.take(arr.size, (arr.size,))
        if whole is not None:
            whole.numpy()[:] = arr
    on_block = whole is not None
    if whole is None:
        whole = torch.frombuffer(body if not memoryview(body).readonly else bytearray(body), dtype=torch.uint8)
    base = arr.ctypes.data - whole.storage_offset()
    if memoryview(body).readonly:
        def address(v: memoryview) -> int:
            return numpy.frombuffer(v, numpy.uint8).ctypes.data
    else:  # a client's buffer, or a block: ctypes finds the address in a quarter of numpy's time
        def address(v: memoryview) -> int:
            return ctypes.addressof(ctypes.c_char.from_buffer(v))

    def span(v: Any) -> Any:
        if v is None:
            return None
        if not v.nbytes:
            return (whole.storage_offset(), 0)
        return (address(v) - base, v.nbytes)

    return whole, span, on_block


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
    return SequenceBatch(step["input_ids"], step["position_ids"], step.get("loss_mask"), step.get("images"),
                         step.get("image_spans"), step.get("image_sizes"))


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
