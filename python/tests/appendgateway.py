"""A real `brand serve` of a Parquet dataset served in place, to which
files can be appended while a job reads it: the one kind of dataset
`brand index --append` extends (docs/format.md §6.11).

AppendGateway() writes FILES Parquet files of ROWS rows under data/ (one
string column, "text", a row group of GROUP rows each), indexes them in
place with `brand index`, and serves them as dataset "d", reloading the
index every --index-poll. append(name, rows) writes one more file and
runs `brand index --append`, then waits until the gateway holds the
version it printed, which it returns. Row i of file data/NAME.parquet
is the sample "data/NAME/i" (i as wide as the file's row count has it)
and its text "NAME/i".

The append is made beside the dataset (`--dst` a copy of its _brand/)
and published into it with the index last. `brand index` stores the
index before the manifest naming it, and a gateway whose poll falls
between the two finds the manifest naming the old index, fails to open
the new one, and (at this commit) takes the new index's ETag as seen:
it never loads that version (internal/job/catalog's reloadDataset
records the ETag before it opens the index). Published index last, the
poll finds the new index with its manifest and description beside it.

The Parquet files are written by write_parquet, with the standard library
alone (the test Python has no pyarrow): one required UTF8 column, PLAIN
pages, uncompressed, as parquet.thrift describes them; write_columns, the
same way, writes required string, binary and int64 columns (test_readme's
Hub-like table of images and labels). Each gateway is a
test's own: an append changes the dataset for good.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
import urllib.request
from typing import Any, Dict, List, Tuple

from servetest import Fixture, brand_binary

FILES = 3
ROWS = 40
GROUP = 8  # rows a row group: a chunk of its own (INDEX_CHUNK is small)
INDEX_CHUNK = "128B"


def row_keys(name: str, rows: int) -> List[str]:
    """The sample keys of data/NAME.parquet's rows."""
    width = len(str(rows))
    return [f"data/{name}/{i:0{width}d}" for i in range(rows)]


def row_texts(name: str, rows: int) -> List[str]:
    width = len(str(rows))
    return [f"{name}/{i:0{width}d}" for i in range(rows)]


# -- a Parquet writer ----------------------------------------------------------
#
# Thrift's compact protocol, as parquet.thrift's structures need it: field
# headers as deltas, i32 and i64 as zigzag varints, binaries and lists
# with varint lengths.

_I32, _I64, _BINARY, _LIST, _STRUCT = 5, 6, 8, 9, 12


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


class _Struct:
    """A Thrift struct, its fields written in increasing id order."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.last = 0

    def _head(self, fid: int, ty: int) -> None:
        assert 0 < fid - self.last <= 15
        self.buf.append((fid - self.last) << 4 | ty)
        self.last = fid

    def i32(self, fid: int, v: int) -> "_Struct":
        self._head(fid, _I32)
        self.buf += _zigzag(v)
        return self

    def i64(self, fid: int, v: int) -> "_Struct":
        self._head(fid, _I64)
        self.buf += _zigzag(v)
        return self

    def binary(self, fid: int, v: bytes) -> "_Struct":
        self._head(fid, _BINARY)
        self.buf += _varint(len(v)) + v
        return self

    def struct(self, fid: int, v: "_Struct") -> "_Struct":
        self._head(fid, _STRUCT)
        self.buf += v.end()
        return self

    def list(self, fid: int, ty: int, items: List[bytes]) -> "_Struct":
        """A list of ``ty`` whose elements are already encoded."""
        self._head(fid, _LIST)
        n = len(items)
        self.buf += bytes([n << 4 | ty]) if n < 15 else bytes([0xF0 | ty]) + _varint(n)
        for it in items:
            self.buf += it
        return self

    def end(self) -> bytes:
        return bytes(self.buf) + b"\x00"


def write_parquet(path: str, column: str, values: List[str], group: int) -> None:
    """``path``, a Parquet file of one required string column ``column``
    holding ``values``, ``group`` rows a row group: a data page (v1,
    PLAIN, uncompressed) a column chunk."""
    write_columns(path, [(column, "string", values)], group)


# Each column kind's physical type, converted type (UTF8, or none) and
# PLAIN encoding of a value.
_KINDS = {
    "string": (6, 0, lambda v: struct.pack("<I", len(v.encode())) + v.encode()),  # BYTE_ARRAY, UTF8
    "binary": (6, None, lambda v: struct.pack("<I", len(v)) + v),  # BYTE_ARRAY
    "int64": (2, None, lambda v: struct.pack("<q", v)),  # INT64
}


def write_columns(path: str, columns: List[Tuple[str, str, List[Any]]], group: int) -> None:
    """``path``, a Parquet file of required ``columns``, each ``(name,
    kind, values)``: ``"string"`` (str, annotated UTF8: a ``.txt``
    member), ``"binary"`` (bytes, no annotation: an image by its magic)
    or ``"int64"`` (int: a ``.cls``), every column as many values,
    ``group`` rows a row group: a data page (v1, PLAIN, uncompressed) a
    column chunk."""
    rows_in = {len(values) for _, _, values in columns}
    assert len(rows_in) == 1, "columns of different lengths"
    total = rows_in.pop()
    out = bytearray(b"PAR1")
    groups = []
    for at in range(0, total, group):
        chunks, size = [], 0
        for name, kind, values in columns:
            physical, _, plain = _KINDS[kind]
            rows = values[at:at + group]
            data = b"".join(plain(v) for v in rows)
            page = (_Struct().i32(1, 0).i32(2, len(data)).i32(3, len(data))  # DATA_PAGE, sizes
                    .struct(5, _Struct().i32(1, len(rows)).i32(2, 0).i32(3, 3).i32(4, 3)).end())  # PLAIN, RLE levels
            offset = len(out)
            out += page + data
            meta = (_Struct().i32(1, physical)
                    .list(2, _I32, [_zigzag(0), _zigzag(3)])  # PLAIN, RLE
                    .list(3, _BINARY, [_varint(len(name)) + name.encode()])
                    .i32(4, 0)  # UNCOMPRESSED
                    .i64(5, len(rows)).i64(6, len(page) + len(data)).i64(7, len(page) + len(data))
                    .i64(9, offset))
            chunks.append(_Struct().i64(2, offset).struct(3, meta).end())
            size += len(page) + len(data)
        groups.append(_Struct().list(1, _STRUCT, chunks).i64(2, size).i64(3, min(group, total - at)).end())
    schema = [_Struct().binary(4, b"schema").i32(5, len(columns)).end()]
    for name, kind, _ in columns:
        physical, converted, _ = _KINDS[kind]
        el = _Struct().i32(1, physical).i32(3, 0).binary(4, name.encode())  # REQUIRED
        if converted is not None:
            el.i32(6, converted)
        schema.append(el.end())
    footer = (_Struct().i32(1, 1).list(2, _STRUCT, schema).i64(3, total).list(4, _STRUCT, groups)
              .binary(6, b"brand python tests").end())
    out += footer + struct.pack("<I", len(footer)) + b"PAR1"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(out)


# -- the gateway --------------------------------------------------------------


class AppendGateway(Fixture):
    src: str
    binary: str
    files: Dict[str, str]  # every sample's key -> its text

    def __init__(self) -> None:
        super().__init__("brand-pytest-append-")

    def start(self) -> None:
        self.binary = brand_binary(self.tmp)
        self.src = os.path.join(self.tmp, "src")
        self.files = {}
        for f in range(FILES):
            self._write(f"train-{f}", ROWS)
        subprocess.run([self.binary, "index", "--src", self.src, "--prefix", "data/", "--name", "d",
                        "--chunk-size", INDEX_CHUNK], check=True, timeout=120, stdout=subprocess.DEVNULL)
        self.serve(self.binary, ["--dataset", "d=" + self.src, "--index-poll", "200ms"])

    def _write(self, name: str, rows: int) -> None:
        write_parquet(os.path.join(self.src, "data", name + ".parquet"), "text", row_texts(name, rows), GROUP)
        self.files.update(zip(row_keys(name, rows), row_texts(name, rows)))

    def append(self, name: str, rows: int, within: float = 30.0) -> str:
        """Writes data/NAME.parquet of ``rows`` rows, appends it to the
        dataset (`brand index --append`) and returns the version made,
        once the gateway holds it."""
        self._write(name, rows)
        stage = tempfile.mkdtemp(prefix="stage-", dir=self.tmp)
        shutil.copytree(os.path.join(self.src, "_brand"), os.path.join(stage, "_brand"))
        out = subprocess.run([self.binary, "index", "--src", self.src, "--prefix", "data/", "--dst", stage, "--append"],
                             check=True, timeout=120, capture_output=True, text=True).stdout
        m = re.search(r"index ([0-9a-f]{16}) extends", out)
        if m is None:
            raise RuntimeError(f"brand index --append printed {out!r}")
        self._publish(stage, ["format/" + m.group(1), "manifest.json", "index"])
        deadline = time.monotonic() + within
        while True:
            with urllib.request.urlopen(self.url + "/datasets", timeout=5) as r:
                if m.group(1) in json.dumps(json.load(r)):
                    return m.group(1)
            if time.monotonic() > deadline:
                raise RuntimeError(f"the gateway did not load index {m.group(1)} in {within} s")
            time.sleep(0.05)

    def _publish(self, stage: str, keys: List[str]) -> None:
        """Moves each of ``stage``'s _brand/KEY into the dataset's, in
        order, each replaced at once (a reader sees the old file or the
        new, never a part)."""
        for key in keys:
            dst = os.path.join(self.src, "_brand", key)
            tmp = dst + ".new"
            shutil.copyfile(os.path.join(stage, "_brand", key), tmp)
            os.replace(tmp, dst)
