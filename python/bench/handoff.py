#!/usr/bin/env python3
"""The hand-off of steps from a BrandLoader's workers to the trainer, by
torch's private storage calls and by the public path, side by side.

A BrandLoader's workers stack each step's images into shared blocks they
reuse, and hand the trainer's process the block by reference
(``brand/torch/_shm.py``). Where torch has its private storage calls
(``UntypedStorage._new_shared``, ``_share_fd_cpu_``,
``_new_shared_fd_cpu``) a block is made without touching its pages and
the loader's process keeps the workers' blocks from one iteration to the
next; without them (the public path: ``Tensor.share_memory_()``, no block
kept) each iteration's workers make their blocks anew.

This drives a BrandLoader over a dataset of no gateway: each worker stacks
``--batch`` random uint8 images of ``3 × --side × --side`` into a step
(``collate_tensors``, as a ``brand.Tensors`` step is), and the trainer
takes the steps, touching one byte of each. It reads ``--iterations``
iterations of ``--steps`` steps each way, alternating the two ``--rounds``
times, with workers forked for each iteration (not persistent, where the
two differ), and prints per way the steps' MB/s and the CPU a step of the
trainer's process and its workers (``getrusage`` of the process and its
ended children), each round and the median.

    PYTHONPATH=python python3 python/bench/handoff.py --rounds 3

The public path is taken as on a torch without the private calls: the
module's storage class replaced by one without them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
import types
import warnings
from typing import Any, Dict, Iterator, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), ""))

import torch  # noqa: E402
from torch.utils.data import IterableDataset, get_worker_info  # noqa: E402

import brand  # noqa: E402
from brand.torch import BrandLoader, collate_tensors  # noqa: E402
from brand.torch import _shm  # noqa: E402


class Synthetic(IterableDataset):
    """What a BrandLoader asks of a dataset (its public API), with steps
    of random images made in the worker: the hand-off alone."""

    def __init__(self, batch: int, side: int, steps: int) -> None:
        super().__init__()
        self.batch, self.side, self.steps_per = batch, side, steps
        self.batches = True
        self.batch_size = batch
        self.options = brand.Options()

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        k, w = (info.num_workers, info.id) if info is not None else (1, 0)
        g = torch.Generator().manual_seed(w)
        images = [torch.randint(0, 256, (3, self.side, self.side), dtype=torch.uint8, generator=g)
                  for _ in range(self.batch)]
        for i in range(w, self.steps_per, k):
            yield {"__key__": [f"{i}/{j}" for j in range(self.batch)], "npy": collate_tensors(
                [{"npy": im} for im in images])["npy"]}

    def begin_iteration(self) -> None:
        pass

    def step_received(self) -> None:
        pass

    def end_iteration(self, finished: bool) -> None:
        pass

    def iteration_state(self) -> Dict[str, Any]:
        return {}

    def steps(self, workers: int = 0, **_: Any) -> int:
        return self.steps_per


def cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def measure(args: argparse.Namespace) -> Dict[str, float]:
    ds = Synthetic(args.batch, args.side, args.steps)
    loader = BrandLoader(ds, num_workers=args.workers, prefetch_factor=2)
    steps, nbytes = 0, 0
    c0, t0 = cpu(), time.perf_counter()
    for _ in range(args.iterations):
        it = iter(loader)
        for step in it:
            x = step["npy"]
            x[0, 0, 0, 0].item()
            nbytes += x.numel()
            steps += 1
            del x, step
        del it  # the iteration's workers end and are waited for (RUSAGE_CHILDREN)
    wall, used = time.perf_counter() - t0, cpu() - c0
    return {"steps": steps, "mb_s": nbytes / wall / 1e6, "cpu_ms_step": used / steps * 1e3,
            "wall_s": wall, "kept": loader._board.keeps if loader._board is not None else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--side", type=int, default=224)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    warnings.simplefilter("ignore", _shm.PrivateTorchWarning)
    private = _shm.UntypedStorage
    got: Dict[str, List[Dict[str, float]]] = {"private": [], "public": []}
    for r in range(args.rounds):
        for way in ("private", "public"):
            _shm.UntypedStorage = private if way == "private" else types.SimpleNamespace()
            m = measure(args)
            got[way].append(m)
            print(json.dumps({"round": r, "way": way, **{k: round(v, 3) if isinstance(v, float) else v
                                                       for k, v in m.items()}}), flush=True)
    _shm.UntypedStorage = private
    step_mb = args.batch * 3 * args.side * args.side / 1e6
    print(f"torch {torch.__version__}; {args.workers} workers, steps of {args.batch} images of 3x{args.side}x"
          f"{args.side} ({step_mb:.1f} MB), {args.iterations} iterations of {args.steps} steps, median of "
          f"{args.rounds} rounds:")
    for way, ms in got.items():
        print(f"  {way:8s} {statistics.median(m['mb_s'] for m in ms):8.0f} MB/s "
              f"{statistics.median(m['cpu_ms_step'] for m in ms):7.2f} ms CPU a step "
              f"({statistics.median(m['cpu_ms_step'] for m in ms) / step_mb * 1e3:5.0f} µs a MB)")


if __name__ == "__main__":
    main()
