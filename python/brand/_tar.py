"""Decoding a batch's tar stream into WebDataset-style samples.

A batch is one ``bytes`` object holding a tar archive. Members are grouped
into samples by key (docs/format.md, section 1.2): ``a/b.c.d`` has key
``a/b`` and extension ``c.d``; consecutive members with the same key form a
sample, a dict ``{"__key__": key, ext: data, ...}``.

Plain ustar (and GNU) headers of regular files, which is what Brand's chunks
nearly always hold, are decoded in place from a ``memoryview``; anything else
(PAX extended headers, GNU long names, directories, ...) makes the decoder
start over with :mod:`tarfile`, which handles every format.
"""

from __future__ import annotations

import io
import tarfile
from typing import Any, Dict, List

__all__ = ["TarError", "decode_tar", "split_key"]

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


def _plain_members(buf: bytes) -> List["tuple[str, int, int]"]:
    """(name, data start, data end) of every member, or _NotPlain."""
    mv = memoryview(buf)
    n = len(buf)
    out = []
    off = 0
    while off + _BLOCK <= n:
        if buf[off + 156] != 0x30:  # typeflag '0'
            if buf[off] == 0 and mv[off : off + _BLOCK] == _ZERO_BLOCK:
                return out  # end of archive
            raise _NotPlain()
        magic = buf[off + 257 : off + 263]
        if magic == b"ustar\x00":
            prefix = buf[off + 345 : off + 500]
            z = prefix.find(b"\x00")
            if z >= 0:
                prefix = prefix[:z]
        elif magic == b"ustar " and buf[off + 263 : off + 265] == b" \x00":
            prefix = b""
        else:
            raise _NotPlain()
        # The checksum counts its own field as eight spaces; either an
        # unsigned or (old tars) signed sum is valid. Signed is rare: only
        # checked when the unsigned sum fails.
        chk = _octal(buf[off + 148 : off + 156])
        s = sum(mv[off : off + 148]) + sum(mv[off + 156 : off + _BLOCK]) + 256
        if s != chk:
            raise _NotPlain()  # tarfile decides: signed checksum, or corrupt
        name = buf[off : off + 100]
        z = name.find(b"\x00")
        if z >= 0:
            name = name[:z]
        if prefix:
            name = prefix + b"/" + name
        size = _octal(buf[off + 124 : off + 136])
        start = off + _BLOCK
        end = start + size
        if end > n:
            raise TarError(f"tar member {name!r} needs {size} bytes, {n - start} left")
        out.append((name.decode("utf-8", "surrogateescape"), start, end))
        off = start + (size + _BLOCK - 1) // _BLOCK * _BLOCK
    if off != n:
        raise TarError(f"tar archive ends inside a header block ({n} bytes)")
    return out  # a stream that simply ends after a complete member


def _tarfile_members(buf: bytes) -> List["tuple[str, bytes]"]:
    out = []
    try:
        with tarfile.open(fileobj=io.BytesIO(buf), mode="r:") as tf:
            for ti in tf:
                if ti.isdir():
                    out.append((None, None))  # ends the sample before it
                    continue
                if not ti.isfile():
                    raise TarError(f"tar member {ti.name!r} is not a regular file (type {ti.type!r})")
                f = tf.extractfile(ti)
                out.append((ti.name, f.read() if f is not None else b""))
    except tarfile.TarError as e:
        raise TarError(f"bad tar archive: {e}") from e
    return out


def decode_tar(buf: bytes) -> List[Sample]:
    """Decode a tar archive held in ``buf`` into samples, in archive order.

    Each sample is a dict ``{"__key__": key, ext: bytes, ...}``; a member
    without an extension is stored under ``""``.

    Raises:
        TarError: ``buf`` is not a valid tar archive.
    """
    samples: List[Sample] = []
    cur: Sample = {}
    key = None
    try:
        for name, start, end in _plain_members(buf):
            k, ext = split_key(name)
            if k != key:
                cur = {"__key__": k}
                samples.append(cur)
                key = k
            cur[ext] = buf[start:end]
        return samples
    except _NotPlain:
        pass
    samples, key = [], None
    for name, data in _tarfile_members(buf):
        if name is None:
            key = None
            continue
        k, ext = split_key(name)
        if k != key:
            cur = {"__key__": k}
            samples.append(cur)
            key = k
        cur[ext] = data
    return samples
