"""Decoding a batch's tar stream into WebDataset-style samples.

A batch is one ``bytes`` object holding a tar archive. Members are grouped
into samples by key (docs/format.md, section 1.2): ``a/b.c.d`` has key
``a/b`` and extension ``c.d``; consecutive members with the same key form a
sample, a dict ``{"__key__": key, ext: data, ...}``.

Plain ustar (and GNU) headers of regular files, which is what Brand's chunks
nearly always hold, are decoded in place from a ``memoryview``; anything else
(PAX extended headers, GNU long names, directories, ...) makes the decoder
start over with :mod:`tarfile`, which handles every format.

A member's data is a copy (``bytes``), except, when asked, a ``.npy``
member's: a batch transformed by the gateway (``transform=``) carries its
images as ``.npy`` tensors, which are handed out as ``memoryview`` slices of
the batch's buffer so that numpy and PyTorch can use them in place.
"""

from __future__ import annotations

import io
import struct
import tarfile
from zlib import adler32
from typing import Any, Dict, List

__all__ = ["TarError", "decode_tar", "is_npy", "split_key"]

Sample = Dict[str, Any]

_BLOCK = 512
_ZERO_BLOCK = bytes(_BLOCK)


class TarError(ValueError):
    """A batch body that is not a valid tar archive."""


class _NotPlain(Exception):
    """Raised internally for a header the fast path leaves to tarfile."""


def split_key(name: str) -> "tuple[str, str]":
    """Split a member path into (key, extension), WebDataset's convention.

    >>> split_key("train/n01/x.JPEG")
    ('train/n01/x', 'JPEG')
    >>> split_key("a/b.c.d")
    ('a/b', 'c.d')
    >>> split_key("dir.v2/x.jpg")
    ('dir.v2/x', 'jpg')
    >>> split_key("a/b")
    ('a/b', '')
    """
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    if dot < 0:
        return name, ""
    return name[:dot], name[dot + 1 :]


def _octal(field: bytes) -> int:
    field = field.strip(b" \x00")
    nul = field.find(b"\x00")
    if nul >= 0:
        field = field[:nul]
    if not field:
        return 0
    try:
        return int(field, 8)
    except ValueError:
        raise _NotPlain() from None


# The fields of a ustar header the fast path reads, in one C call: name,
# size, checksum, typeflag, magic, version and prefix.
_HEADER = struct.Struct("100s24x12s12x8sc100x6s2s80x155s")
_REGULAR = b"0"


def _plain_members(buf: bytes) -> List["tuple[bytes, int, int]"]:
    """(name, data start, data end) of every member, or _NotPlain.

    The header checksum is the sum of the block's 512 bytes with its own
    field counted as eight spaces. Summing bytes in Python costs more than
    the rest of a member's decoding, so it is taken from ``zlib.adler32``,
    whose low 16 bits are 1 + the byte sum modulo 65521: over 256 bytes the
    sum is at most 65,280, below the modulus, so two halves give the exact
    sum of the block and the check is the one tarfile makes.
    """
    mv = memoryview(buf)
    n = len(buf)
    out = []
    append = out.append
    unpack = _HEADER.unpack_from
    off = 0
    while off + _BLOCK <= n:
        name, size_f, chk_f, typeflag, magic, version, prefix = unpack(buf, off)
        if typeflag != _REGULAR:
            if buf[off] == 0 and mv[off : off + _BLOCK] == _ZERO_BLOCK:
                return out  # end of archive
            raise _NotPlain()
        if magic == b"ustar\x00":
            z = prefix.find(b"\x00")
            if z >= 0:
                prefix = prefix[:z]
        elif magic == b"ustar " and version == b" \x00":
            prefix = b""
        else:
            raise _NotPlain()
        # The checksum counts its own field as eight spaces; either an
        # unsigned or (old tars) signed sum is valid. Signed is rare: only
        # the unsigned sum is checked here, and a mismatch goes to tarfile,
        # which decides (signed checksum, or corrupt).
        s = (adler32(mv[off : off + 256]) & 0xFFFF) + (adler32(mv[off + 256 : off + _BLOCK]) & 0xFFFF) - 2
        try:  # six digits, NUL, space, as tar writers put it; else in full
            chk = int(chk_f[:6], 8) if chk_f[6:] == b"\x00 " else _octal(chk_f)
        except ValueError:
            chk = _octal(chk_f)
        if s - sum(chk_f) + 256 != chk:
            raise _NotPlain()
        z = name.find(b"\x00")
        if z >= 0:
            name = name[:z]
        if prefix:
            name = prefix + b"/" + name
        try:  # eleven digits and a terminator, as tar writers put it; else in full
            size = int(size_f[:11], 8) if size_f[11] in (0, 32) else _octal(size_f)
        except ValueError:
            size = _octal(size_f)
        start = off + _BLOCK
        end = start + size
        if end > n:
            raise TarError(f"tar member {name!r} needs {size} bytes, {n - start} left")
        append((name, start, end))
        off = start + ((size + 511) & ~511)
    if off != n:
        raise TarError(f"tar archive ends inside a header block ({n} bytes)")
    return out  # a stream that simply ends after a complete member


def is_npy(ext: str) -> bool:
    """Whether a member of extension ``ext`` is a ``.npy`` array: ``npy``,
    or a multi-part extension ending in it (``left.npy``)."""
    return ext == "npy" or ext.endswith(".npy")


def _tarfile_members(buf: Any, npy_views: bool = False, views: bool = False) -> List["tuple[str, Any]"]:
    out = []
    mv = memoryview(buf).cast("B")
    try:
        with tarfile.open(fileobj=io.BytesIO(buf), mode="r:") as tf:
            for ti in tf:
                if ti.isdir():
                    out.append((None, None))  # ends the sample before it
                    continue
                if not ti.isfile():
                    raise TarError(f"tar member {ti.name!r} is not a regular file (type {ti.type!r})")
                if (views or npy_views and is_npy(split_key(ti.name)[1])) and not ti.issparse():
                    out.append((ti.name, mv[ti.offset_data : ti.offset_data + ti.size]))
                    continue
                f = tf.extractfile(ti)
                out.append((ti.name, f.read() if f is not None else b""))
    except tarfile.TarError as e:
        raise TarError(f"bad tar archive: {e}") from e
    return out


def decode_tar(buf: Any, npy_views: bool = False, split_repeats: bool = False, views: bool = False) -> List[Sample]:
    """Decode a tar archive held in ``buf`` (``bytes``, or any buffer such
    as a ``bytearray``) into samples, in archive order.

    Each sample is a dict ``{"__key__": key, ext: bytes, ...}``; a member
    without an extension is stored under ``""``. With ``npy_views``, a
    ``.npy`` member (:func:`is_npy`) is a ``memoryview`` of ``buf`` instead
    of a copy, valid as long as ``buf`` is not changed; with ``views``,
    every member is (no copy at all). With
    ``split_repeats``, a member whose extension its sample has already
    starts another sample of the same key: adjacent samples of one key
    (two datasets of a mixture) stay apart as long as they share an
    extension.

    Raises:
        TarError: ``buf`` is not a valid tar archive.
    """
    try:
        members = _plain_members(buf)
    except _NotPlain:
        members = None
    if members is not None:
        return _group(buf, members, npy_views, split_repeats, views)
    return _decode_tarfile(buf, npy_views, split_repeats, views)


def _decode_tarfile(buf: Any, npy_views: bool = False, split_repeats: bool = False,
                    views: bool = False) -> List[Sample]:
    """decode_tar through tarfile alone: the fallback, and the reference
    the fast path is tested against."""
    samples: List[Sample] = []
    cur: Sample = {}
    key = None
    for name, data in _tarfile_members(buf, npy_views, views):
        if name is None:
            key = None
            continue
        k, ext = split_key(name)
        if k != key or split_repeats and ext in cur:
            cur = {"__key__": k}
            samples.append(cur)
            key = k
        cur[ext] = data
    return samples


def _group(buf: Any, members: List["tuple[bytes, int, int]"], npy_views: bool = False,
           split_repeats: bool = False, views: bool = False) -> List[Sample]:
    """Samples from the fast path's members: split_key on the raw name.

    '/' and '.' are ASCII, which UTF-8 never uses inside a multi-byte
    sequence (and surrogateescape decodes an invalid byte on its own), so
    splitting the bytes and decoding the parts gives the strings split_key
    gives on the decoded name. A key is decoded once per sample and an
    extension once per batch.
    """
    samples: List[Sample] = []
    append = samples.append
    exts: Dict[bytes, str] = {}
    cur: Sample = {}
    key = None
    # Slicing bytes copies into bytes; any other buffer is sliced through a
    # memoryview, then copied into bytes unless the member is a view.
    mv = None if type(buf) is bytes else memoryview(buf).cast("B")
    for name, start, end in members:
        dot = name.find(b".", name.rfind(b"/") + 1)
        if dot < 0:
            kb, eb = name, b""
        else:
            kb, eb = name[:dot], name[dot + 1 :]
        ext = exts.get(eb)
        if ext is None:
            ext = exts[eb] = eb.decode("utf-8", "surrogateescape")
        if kb != key or split_repeats and ext in cur:
            key = kb
            cur = {"__key__": kb.decode("utf-8", "surrogateescape")}
            append(cur)
        if views or npy_views and is_npy(ext):
            cur[ext] = (memoryview(buf) if mv is None else mv)[start:end]
        elif mv is None:
            cur[ext] = buf[start:end]
        else:
            cur[ext] = bytes(mv[start:end])
    return samples
