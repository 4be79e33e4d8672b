#!/usr/bin/env python3
"""An independent writer of Megatron indexed datasets, for package megatron's tests.

It mirrors megatron/core/datasets/indexed_dataset.py's IndexedDatasetBuilder
and _IndexWriter (numpy only, no torch): the .bin is every sequence's
tokens back to back in the dtype, C order; the .idx is

    b"MMIDIDX\\x00\\x00", <Q 1, <B dtype code, <Q sequences, <Q len(document_indices),
    sizes int32, pointers int64 (cumulative bytes), document_indices int64 (from 0),
    [modes int8, multimodal only]

Usage:
    megatron_writer.py make SPEC.json DIR    write the prefixes SPEC names under DIR
    megatron_writer.py check SPEC.json TAR   check a tar of decoded samples against SPEC

SPEC is {"prefixes": [{"name": "a/b", "dtype": "uint16", "seed": 1,
"docs": [[3, 5], [0], [7]], "multimodal": false}]}: each document a list of
its sequences' lengths; the tokens are drawn from numpy's PCG64 with the
seed, over the dtype's range, so check draws them again.
"""

import io
import json
import os
import struct
import sys
import tarfile

import numpy

_INDEX_HEADER = b"MMIDIDX\x00\x00"

# Megatron's DType enum.
CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7, "uint16": 8}


class Builder:
    """IndexedDatasetBuilder's add_item / end_document / add_document / finalize."""

    def __init__(self, bin_path, dtype, multimodal=False):
        self.data_file = open(bin_path, "wb")
        self.dtype = dtype
        self.multimodal = multimodal
        self.sequence_lengths = []
        self.document_indices = [0]
        self.sequence_modes = [] if multimodal else None

    def add_item(self, array, mode=0):
        a = numpy.array(array, dtype=self.dtype)
        self.data_file.write(a.tobytes(order="C"))
        self.sequence_lengths.append(a.size)
        if self.multimodal:
            self.sequence_modes.append(mode)

    def end_document(self):
        self.document_indices.append(len(self.sequence_lengths))

    def finalize(self, idx_path):
        self.data_file.close()
        itemsize = numpy.dtype(self.dtype).itemsize
        pointers, ptr = [], 0
        for n in self.sequence_lengths:
            pointers.append(ptr)
            ptr += n * itemsize
        with open(idx_path, "wb") as f:
            f.write(_INDEX_HEADER)
            f.write(struct.pack("<Q", 1))
            f.write(struct.pack("<B", CODES[numpy.dtype(self.dtype).name]))
            f.write(struct.pack("<Q", len(self.sequence_lengths)))
            f.write(struct.pack("<Q", len(self.document_indices)))
            f.write(numpy.array(self.sequence_lengths, dtype=numpy.int32).tobytes(order="C"))
            f.write(numpy.array(pointers, dtype=numpy.int64).tobytes(order="C"))
            f.write(numpy.array(self.document_indices, dtype=numpy.int64).tobytes(order="C"))
            if self.sequence_modes is not None:
                f.write(numpy.array(self.sequence_modes, dtype=numpy.int8).tobytes(order="C"))


def documents(p):
    """Each document of prefix spec p as a list of its sequences' arrays."""
    dt = numpy.dtype(p["dtype"])
    rng = numpy.random.Generator(numpy.random.PCG64(p.get("seed", 0)))
    out = []
    for lengths in p.get("docs") or []:
        seqs = []
        for n in lengths:
            if dt.kind == "f":
                seqs.append(rng.standard_normal(n).astype(dt))
            else:
                info = numpy.iinfo(dt)
                seqs.append(rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dt))
        out.append(seqs)
    return out


def make(spec, root):
    for p in spec["prefixes"]:
        base = os.path.join(root, p["name"])
        os.makedirs(os.path.dirname(base), exist_ok=True)
        b = Builder(base + ".bin", numpy.dtype(p["dtype"]).type, p.get("multimodal", False))
        for doc in documents(p):
            for seq in doc:
                b.add_item(seq)
            b.end_document()
        b.finalize(base + ".idx")


def check(spec, tar_path):
    want = {}
    for p in spec["prefixes"]:
        for i, doc in enumerate(documents(p)):
            dt = numpy.dtype(p["dtype"])
            want["%s/%09d.npy" % (p["name"], i)] = numpy.concatenate(doc) if doc else numpy.zeros(0, dt)
    seen = set()
    with tarfile.open(tar_path) as tf:
        for m in tf:
            if m.name not in want:
                sys.exit("unexpected member %s" % m.name)
            if m.name in seen:
                sys.exit("member %s twice" % m.name)
            seen.add(m.name)
            got = numpy.load(io.BytesIO(tf.extractfile(m).read()), allow_pickle=False)
            w = want[m.name]
            if got.dtype != w.dtype or got.shape != w.shape or got.tobytes() != w.tobytes():
                sys.exit("%s: %s %s, want %s %s" % (m.name, got.dtype, got.shape, w.dtype, w.shape))
    if seen != set(want):
        sys.exit("missing members: %s" % sorted(set(want) - seen)[:5])
    print("ok: %d documents" % len(seen))


if __name__ == "__main__":
    cmd, spec_path, path = sys.argv[1:4]
    with open(spec_path) as f:
        spec = json.load(f)
    {"make": make, "check": check}[cmd](spec, path)
