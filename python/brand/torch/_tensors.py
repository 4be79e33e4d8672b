"""Tensors on a transformed batch's buffer, and the collate that stacks them.

A transformed batch's image members arrive as ``.npy`` members, which the
client hands on as ``memoryview`` objects of the batch's one buffer;
:func:`npy_tensor` makes each a tensor on that memory, without a copy.
:func:`collate_tensors` stacks a step's images into one tensor, in a
DataLoader worker into a shared-memory block of :mod:`._shm` that the
worker reuses.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Sequence

import numpy
import numpy.lib.format as _npy
import torch
from torch.utils.data import default_collate, get_worker_info

from .._npy import header_end, read_header
from .._tar import Sample
from ._shm import worker_blocks

# A .npy header's bytes -> (data offset, shape, fortran order, torch dtype,
# elements). A pipeline's tensors share a few headers, so each is parsed
# once (brand._npy, by numpy.lib.format's rules), rather than once an image.
_NpyHeader = "tuple[int, tuple, bool, torch.dtype, int]"
_npy_headers: Dict[bytes, _NpyHeader] = {}
_NPY_HEADERS_KEPT = 256


def _npy_header(mv: memoryview) -> _NpyHeader:
    head = bytes(mv[: header_end(mv)])
    got = _npy_headers.get(head)
    if got is not None:
        return got
    end, descr, fortran, shape = read_header(head)
    try:
        dtype = _npy.descr_to_dtype(descr)
    except (TypeError, ValueError) as e:
        raise ValueError(f"brand: a .npy array of descr {descr!r}: {e}") from e
    if dtype.hasobject or not dtype.isnative and dtype.itemsize > 1:
        raise ValueError(f"brand: a .npy array of {dtype}: only native-endian numbers can be viewed in place")
    tdtype = torch.from_numpy(numpy.empty(0, dtype=dtype)).dtype
    got = (end, tuple(shape), bool(fortran), tdtype, math.prod(shape))
    if len(_npy_headers) >= _NPY_HEADERS_KEPT:
        _npy_headers.clear()
    _npy_headers[head] = got
    return got


def npy_tensor(buf: Any) -> torch.Tensor:
    """The array a ``.npy`` member holds (a :class:`brand.Client`'s
    ``memoryview`` of a transformed batch), as a tensor on the same memory:
    no copy. The header is read by ``numpy.lib.format``'s rules (versions
    1.0 to 3.0, any numeric dtype, C or Fortran order); a gateway's
    pipelines write uint8, C order, ``(3, H, W)`` or ``(H, W, 3)``.

    A read-only buffer (``bytes``) is copied first: PyTorch has no
    read-only tensors.

    Raises:
        ValueError: ``buf`` is not a ``.npy`` array this can view, or is
            shorter than its header says.
    """
    mv = memoryview(buf).cast("B")
    off, shape, fortran, dtype, count = _npy_header(mv)
    size = torch.empty(0, dtype=dtype).element_size() * count
    if len(mv) - off < size:
        raise ValueError(f"brand: a .npy array of shape {shape} needs {size} bytes, has {len(mv) - off}")
    if mv.readonly:
        mv = memoryview(bytearray(mv[: off + size]))
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    t = torch.frombuffer(mv, dtype=dtype, count=count, offset=off)
    if fortran:
        return t.view(shape[::-1]).permute(*reversed(range(len(shape))))
    return t.view(shape)


def collate_tensors(samples: Sequence[Any]) -> Any:
    """A DataLoader's ``collate_fn`` for samples with tensors (a job with a
    ``transform``): a list of sample dicts becomes one dict of columns,
    each key's tensors stacked into one tensor (``N`` of ``(3, H, W)``
    uint8 images: ``(N, 3, H, W)``) and every other value (``__key__``,
    ``cls``, ``__dataset__``, ...) a list, as it is. Tuples of equal length
    (a ``decode`` that returns ``(image, label)``) are collated column by
    column alike; a list of tensors is stacked.

    In a DataLoader worker the stack is made in shared memory, so that the
    step reaches the trainer's process without its pixels being pickled
    (``torch.utils.data.default_collate`` stacks so).

    Raises:
        ValueError: samples with other keys than the first's, or one key's
            tensors of different shapes (a pipeline without a crop to a
            fixed size: collate those as lists).
    """
    if not samples:
        return []
    first = samples[0]
    if isinstance(first, Mapping):
        keys = list(first.keys())
        for s in samples:
            if len(s) != len(keys) or any(k not in s for k in keys):
                raise ValueError(f"brand: collate_tensors: sample {s.get('__key__', '?')!r} has members "
                                 f"{sorted(s)}, the first {sorted(keys)}")
        return {k: _column(k, [s[k] for s in samples]) for k in keys}
    if isinstance(first, tuple):
        n = len(first)
        if any(len(s) != n for s in samples):
            raise ValueError("brand: collate_tensors: tuples of different lengths")
        return tuple(_column(str(i), [s[i] for s in samples]) for i in range(n))
    return _column("", list(samples))


def _column(name: str, values: List[Any]) -> Any:
    """One key's values: stacked if tensors, else the list."""
    first = values[0]
    if not isinstance(first, torch.Tensor):
        return values
    shape = first.shape
    for v in values:
        if not isinstance(v, torch.Tensor) or v.shape != shape:
            got = sorted({tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__ for x in values},
                         key=str)
            raise ValueError(f"brand: collate_tensors: {name!r} holds {got}; stacking needs one shape")
    if first.dtype == torch.uint8 and not first.is_cuda:
        blocks = worker_blocks() if get_worker_info() is not None else None
        if blocks is not None:
            out = blocks.take(len(values) * first.numel(), (len(values), *shape))
            if out is not None:
                return torch.stack(values, out=out)
    return default_collate(values)



def to_tensors(batch: List[Sample]) -> None:
    """A transformed batch's .npy members (memoryviews of its buffer) as
    tensors on that buffer, in place."""
    for s in batch:
        for k, v in s.items():
            if type(v) is memoryview:
                s[k] = npy_tensor(v)
