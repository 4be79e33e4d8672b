"""A token job's batch (``seq=``) as two ``(B, seq)`` int32 arrays on its buffer.

Each sample of a token job's batch is one sequence with an
``input_ids.npy`` and a ``position_ids.npy`` member, each a ``.npy`` 1.0 of
``'<i4'`` and shape ``(seq,)`` with a 128-byte header (docs/http-api.md,
*Token jobs*). The gateway writes them back to back, each member a 512-byte
tar header and its data padded to 512 bytes, so sequence ``i``'s tokens
start at ``first + i * stride`` in the batch's buffer for one ``stride``:
the ``B`` sequences of each member are one strided ``(B, seq)`` array over
the buffer, no copy. :func:`layout` finds ``first`` and ``stride`` from the
archive's headers and checks that spacing; :func:`sequence_arrays` makes
numpy arrays of it (``brand.torch.sequence_tensors`` makes tensors). A
batch whose members are not evenly spaced (a tar the gateway did not write:
PAX headers, other members) is copied instead, member by member.

Standard library only, but for :func:`sequence_arrays`, which needs numpy.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, NoReturn, Optional

from ._npy import read_header
from ._tar import _NotPlain, _plain_members

__all__ = ["INPUT_IDS", "POSITION_IDS", "Layout", "layout", "sequence_arrays"]

#: The members of a sequence (docs/http-api.md, *Token jobs*), by extension.
INPUT_IDS = "input_ids.npy"
POSITION_IDS = "position_ids.npy"

_NPY_HEADER = 128  # the gateway's .npy header, magic to newline


class Layout(NamedTuple):
    """Where a token batch's sequences are in its buffer, in bytes: ``n``
    sequences of ``seq`` int32 tokens, sequence ``i``'s ``input_ids`` at
    ``ids + i * stride`` and its ``position_ids`` at ``pos + i * stride``."""

    n: int
    seq: int
    ids: int
    pos: int
    stride: int


def _seq_of(header: bytes) -> Optional[int]:
    """The ``seq`` of a member's 128-byte ``.npy`` header, if it is a 1.0
    header of little-endian int32 of one dimension; else ``None``."""
    if len(header) != _NPY_HEADER or header[:8] != b"\x93NUMPY\x01\x00" or header[-1:] != b"\n":
        return None
    try:
        h = read_header(header)
    except ValueError:
        return None
    if h.offset != _NPY_HEADER or h.descr != "<i4" or h.fortran or len(h.shape) != 1:
        return None
    return h.shape[0]


def layout(body: Any) -> Optional[Layout]:
    """The layout of a token batch's tar ``body`` (``bytes``, ``bytearray``
    or a ``memoryview`` of one), if its sequences can be viewed as strided
    arrays: every member a plain ustar one, the members ``K.input_ids.npy``
    and ``K.position_ids.npy`` of each sequence in turn, each with the same
    128-byte ``.npy`` header of int32 ``(seq,)``, evenly spaced, at offsets
    that are multiples of 4. ``None`` otherwise (:func:`sequence_arrays`
    then copies), and for a batch of no sequences.

    Raises:
        ValueError: a member of another name, or one shorter than its
            header says.
    """
    mv = memoryview(body).cast("B")
    try:
        members = _plain_members(mv)
    except _NotPlain:
        return None
    if not members:
        return None
    if len(members) % 2:
        _bad(f"{len(members)} members, not pairs of {INPUT_IDS} and {POSITION_IDS}")
    head = bytes(mv[members[0][1] : members[0][1] + _NPY_HEADER])
    seq = _seq_of(head)
    if seq is None:
        return None
    size = _NPY_HEADER + 4 * seq
    ids, pos = members[0][1] + _NPY_HEADER, members[1][1] + _NPY_HEADER
    n = len(members) // 2
    stride = members[2][1] - members[0][1] if n > 1 else 0
    even = ids % 4 == 0 and pos % 4 == 0 and stride % 4 == 0
    for i in range(n):
        (ni, si, ei), (np_, sp, ep) = members[2 * i], members[2 * i + 1]
        if not ni.endswith(b"." + INPUT_IDS.encode()) or np_ != ni[: -len(INPUT_IDS)] + POSITION_IDS.encode():
            _bad(f"members {ni!r} and {np_!r} are not a sequence's {INPUT_IDS} and {POSITION_IDS}")
        if ei - si != size or ep - sp != size:
            _bad(f"sequence {ni[: -len(INPUT_IDS) - 1]!r}: members of {ei - si} and {ep - sp} bytes, "
                 f"the first's header says {size}")
        if even and (si != ids - _NPY_HEADER + i * stride or sp != pos - _NPY_HEADER + i * stride):
            even = False
        if mv[si : si + _NPY_HEADER] != head or mv[sp : sp + _NPY_HEADER] != head:
            return None  # another header: each member is read by its own
    return Layout(n, seq, ids, pos, stride) if even else None


def _bad(msg: str) -> NoReturn:
    raise ValueError(f"brand: not a token batch: {msg}")


def sequence_arrays(batch: Any) -> Dict[str, Any]:
    """A token job's batch (:meth:`brand.Client.batch` of a job with
    ``seq``) as ``{"input_ids": ..., "position_ids": ...}``, two numpy int32
    arrays of shape ``(B, seq)`` viewing the batch's buffer, without a copy
    (:func:`layout`; a batch whose members are not evenly spaced is copied
    into new arrays). A batch of no sequences gives arrays of shape ``(0,
    0)``. Needs numpy.

    ``cu_seqlens`` of row ``b`` for variable-length attention are the
    indices where ``position_ids[b] == 0``, then ``seq``.

    Raises:
        ValueError: a batch that is not a token job's.
    """
    import numpy  # noqa: PLC0415 - optional, only for this function

    body = getattr(batch, "body", None)
    lay = layout(body) if body is not None else None
    if lay is not None:
        i4 = numpy.dtype("<i4")
        return {
            "input_ids": numpy.ndarray((lay.n, lay.seq), i4, body, lay.ids, (lay.stride, 4)),
            "position_ids": numpy.ndarray((lay.n, lay.seq), i4, body, lay.pos, (lay.stride, 4)),
        }
    cols = _members(batch)
    return {k: numpy.stack([numpy.frombuffer(m, "<i4", offset=_NPY_HEADER) for m in v]) if v
            else numpy.empty((0, 0), "<i4") for k, v in cols.items()}


def _members(batch: Any) -> Dict[str, List[Any]]:
    """Each sequence's members, checked: the copying path."""
    out: Dict[str, List[Any]] = {"input_ids": [], "position_ids": []}
    seq = None
    for s in batch:
        for k, ext in (("input_ids", INPUT_IDS), ("position_ids", POSITION_IDS)):
            m = s.get(ext)
            if m is None:
                _bad(f"sample {s.get('__key__')!r} has no {ext}")
            n = _seq_of(bytes(memoryview(m)[:_NPY_HEADER]))
            if n is None or len(m) != _NPY_HEADER + 4 * n or seq is not None and n != seq:
                _bad(f"sample {s.get('__key__')!r}: {ext} is not int32 ({seq if seq is not None else 'seq'},) "
                     "with a 128-byte header")
            seq = n
            out[k].append(m)
    return out
