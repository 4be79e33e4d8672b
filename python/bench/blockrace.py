#!/usr/bin/env python3
"""Reproduces a race, found and fixed: a step copied into a BrandLoader
worker's shared block found overwritten before the trainer read it.

``brand.Samples`` was first written to hand each step over in a worker's
shared block (``_shm.Blocks.take``, as ``collate_tensors`` stacks a
``brand.Tensors`` step), its members views of the block. Under load, some
steps' members held another sample's bytes by the time the trainer read
them. This runs that design, as a ``collate`` of its own over
``BrandDataset(member_views=True)`` (the loader's process noting a step's
block by each column's first tensor), and counts the samples whose ``cls``
member is not the one their key names.

    brand serve --dataset k10=... &   # samples cN/sNNNNNN with a .cls of NNNNNN % 10
    PYTHONPATH=python python3 python/bench/blockrace.py --url http://127.0.0.1:18181 --dataset k10 --runs 3

Seen on a loaded 2-core VM (torch 1.13), 12,288 samples of 10 KiB: 1,091
to 4,332 bad samples in each of four loaders of 3 epochs (three with
persistent workers, one without), whole steps each. The cause, found with
each take, free and step logged: the loader's process cleared a slot's
flag once for each of its entries that had expired (``Board._expire``), so
that a worker took the block at the first clearing, filled it with the
next step, and a second clearing handed it back as free, to be filled
again before the trainer had read it. Since each slot is cleared once, and
only when no tensor on its block is left (``test_shm``'s
``TestBlockFreedWhenAllLetGo``): none in four loaders of 3 epochs, nor of
6.

``--entry samples`` runs ``brand.Samples``'s own loader instead (its steps
read into the blocks and crossing as a block's slot and the members'
spans), with ``--classes`` the modulus of the ``.cls`` members
(``loader_cpu.py --write-trees``' ``i100`` has 1000):

    PYTHONPATH=python python3 python/bench/blockrace.py --url http://127.0.0.1:18181 --dataset i100 \\
        --entry samples --classes 1000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import warnings
from typing import Any, List, Mapping

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import get_worker_info  # noqa: E402

from brand.torch import BrandDataset, SampleBatch  # noqa: E402
from brand.torch._batches import _members  # noqa: E402
from brand.torch import _shm  # noqa: E402
from brand.torch._shm import worker_blocks  # noqa: E402


def in_block(samples: List[Any]) -> SampleBatch:
    """A SampleBatch whose members view the batch's body copied into one of
    the worker's shared blocks (the design under suspicion)."""
    body = samples.body  # type: ignore[attr-defined]
    arr = numpy.frombuffer(body, numpy.uint8)
    blocks = worker_blocks() if get_worker_info() is not None else None
    whole = blocks.take(arr.size, (arr.size,)) if blocks is not None else None
    if whole is None:
        whole = torch.frombuffer(bytearray(body), dtype=torch.uint8)
    else:
        whole.numpy()[:] = arr
    base = arr.ctypes.data

    def on(v: Any) -> Any:
        a = numpy.frombuffer(v, numpy.uint8)
        return whole[a.ctypes.data - base:a.ctypes.data - base + a.size]

    fields = {m: [on(s[m]) for s in samples] for m in _members(samples)}
    return SampleBatch([s["__key__"] for s in samples], fields, None)


def tensors_of(item: Any) -> Any:
    """_shm._tensors_of as the first design had it: a SampleBatch's block
    found by the first tensor of each of its columns, so that the loader's
    process frees it once no tensor of the step is left."""
    for v in _shm._values(item):
        if isinstance(v, Mapping):
            for w in v.values():
                yield w[0] if isinstance(w, list) and w else w
        else:
            yield v


def run(url: str, dataset: str, persistent: bool, seed: int, epochs: int, entry: str = "design",
        classes: int = 10) -> int:
    warnings.simplefilter("ignore")
    if entry == "samples":
        import brand

        ds = brand.Samples(url, dataset, batch_size=64, seed=seed, ahead=1)
    else:
        _shm._tensors_of = tensors_of  # in the loader's process, which frees the blocks
        ds = BrandDataset(url, dataset=dataset, batch_size=64, seed=seed, ahead=1, batches=True, collate=in_block,
                          member_views=True)
    loader = ds.loader(num_workers=2, persistent_workers=persistent)
    bad = seen = 0
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        for b in loader:
            for k, c in zip(b.keys, b.bytes("cls")):
                seen += 1
                if c != str(int(k.rsplit("/s", 1)[1]) % classes).encode():
                    bad += 1
    if not seen:
        raise SystemExit("blockrace: no sample read")
    return bad


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--runs", type=int, default=3, help="loaders run at once, with persistent workers, and one without")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--entry", choices=("design", "samples"), default="design",
                   help="the first design's collate (design) or brand.Samples' loader (samples)")
    p.add_argument("--classes", type=int, default=10, help="a sample's .cls is its number modulo this")
    p.add_argument("--one", help=argparse.SUPPRESS)  # persistent,seed: one loader, in a process of its own
    a = p.parse_args()
    if a.one:
        persistent, seed = a.one.split(",")
        print(run(a.url, a.dataset, persistent == "1", int(seed), a.epochs, a.entry, a.classes))
        return
    runs = [("1", str(i)) for i in range(a.runs)] + [("0", "99")]
    procs = [subprocess.Popen([sys.executable, __file__, "--url", a.url, "--dataset", a.dataset, "--epochs",
                               str(a.epochs), "--entry", a.entry, "--classes", str(a.classes),
                               "--one", f"{pers},{seed}"], stdout=subprocess.PIPE, text=True)
             for pers, seed in runs]
    for (pers, seed), proc in zip(runs, procs):
        out, _ = proc.communicate()
        print(f"persistent={pers == '1'} seed={seed}: {out.strip()} samples with another sample's cls")


if __name__ == "__main__":
    main()
