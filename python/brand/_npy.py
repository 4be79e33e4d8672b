"""The header of a ``.npy`` member, read as ``numpy.lib.format`` reads it.

The package's one ``.npy`` reader (the gateway's is Go's
``internal/codec/npy``): versions 1.0, 2.0 and 3.0, the header's dict
evaluated as a Python literal, as numpy evaluates it. Standard library
only, so that a client without numpy reads a member's shape and where its
data starts; :func:`brand.transform.npy_header` (a pipeline's tensors),
the token batches' sequences (``_sequences``) and
:func:`brand.torch.npy_tensor` all read through it.
"""

from __future__ import annotations

import ast
import re
from typing import Any, NamedTuple, Tuple

__all__ = ["Header", "header_end", "read_header"]

MAGIC = b"\x93NUMPY"

# numpy.load's default bound on a header (max_header_size), which keeps a
# hostile one from costing ast.literal_eval unbounded time.
MAX_HEADER = 10000


class Header(NamedTuple):
    """What a ``.npy`` header says: where the data starts (``offset``, from
    the magic), numpy's type string (``descr``: ``'|u1'``, ``'<i4'``; a
    list for a structured dtype), the order and the shape."""

    offset: int
    descr: Any
    fortran: bool
    shape: Tuple[int, ...]


def header_end(buf: Any) -> int:
    """Where the header at the start of ``buf`` ends, from its magic,
    version and length alone: where its data starts.

    Raises:
        ValueError: not a ``.npy`` array, a version numpy does not write,
            a header cut short or longer than numpy reads.
    """
    mv = memoryview(buf).cast("B")
    if len(mv) < 10 or bytes(mv[:6]) != MAGIC:
        raise ValueError("brand: not a .npy array (no \\x93NUMPY magic)")
    major, minor = mv[6], mv[7]
    if major == 1:
        size = 2
    elif major in (2, 3):
        size = 4
    else:
        raise ValueError(f"brand: .npy format version {major}.{minor}")
    if len(mv) < 8 + size:
        raise ValueError("brand: a .npy array cut inside its header")
    n = int.from_bytes(mv[8 : 8 + size], "little")
    if n > MAX_HEADER:
        raise ValueError(f"brand: a .npy header of {n} bytes, more than the {MAX_HEADER} numpy reads")
    if 8 + size + n > len(mv):
        raise ValueError("brand: a .npy array cut inside its header")
    return 8 + size + n


def read_header(buf: Any) -> Header:
    """The header at the start of ``buf`` (``bytes``, ``bytearray`` or a
    ``memoryview`` of one).

    Raises:
        ValueError: as :func:`header_end`, or a dict numpy would refuse.
    """
    mv = memoryview(buf).cast("B")
    end = header_end(mv)
    major = mv[6]
    text = bytes(mv[(10 if major == 1 else 12) : end]).decode("utf-8" if major == 3 else "latin-1")
    try:
        d = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        # A version 1.0 header Python 2 wrote: its sizes are longs ("3L").
        try:
            d = ast.literal_eval(re.sub(r"(\d+)L\b", r"\1", text)) if major == 1 else None
        except (ValueError, SyntaxError):
            d = None
    if not isinstance(d, dict) or set(d) != {"descr", "fortran_order", "shape"}:
        raise ValueError(f"brand: .npy header {text!r}: not the dict numpy writes")
    shape, fortran = d["shape"], d["fortran_order"]
    if not isinstance(shape, tuple) or not all(type(x) is int and x >= 0 for x in shape):
        raise ValueError(f"brand: .npy header {text!r}: shape is not a tuple of sizes")
    if not isinstance(fortran, bool):
        raise ValueError(f"brand: .npy header {text!r}: fortran_order is not a bool")
    return Header(end, d["descr"], fortran, shape)
