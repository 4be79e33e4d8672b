#!/usr/bin/env python3
"""CPU a sample of the PyTorch loaders over one gateway, before and after, in one run.

Runs ``loaders.py`` (each run a process of its own) for every dataset given,
alternating, ``--rounds`` times: mode ``brand`` (``BrandDataset`` per
sample, ``ds.loader(collate_fn=keep)``: the loader issue 67 measured) and
mode ``samples`` (``brand.Samples``) of the ``--baseline`` tree
("before"; ``--baseline-modes``) and of this tree ("after"). Each run reads ``--warmup`` epochs
unmeasured (workers started, memory mapped) and measures ``--epochs``
more through the same loader, with persistent workers; CPU is the
trainer's process and its workers'. Prints each run and the median µs of
CPU a sample of each.

Two shapes of sample, as ``--write-trees DIR`` lays them out for ``brand
pack``: one member of random bytes (``k10``: 12,288 samples of 10 KiB,
``k100``: 3,072 of 100 KiB, a ``.bin`` each), and an image and its label
as ImageNet's are (``i100``: 3,072 samples of a 100 KiB ``.jpg`` of random
bytes and a ``.cls`` of ``N % 1000``).

    python3 python/bench/loader_cpu.py --write-trees /tmp/lc
    for d in k10 k100 i100; do brand pack --src /tmp/lc/$d --dst /tmp/lc/$d.store --chunk-size 4MiB; done
    brand serve --listen 127.0.0.1:18181 --cache-size 1GiB \\
        --dataset k10=/tmp/lc/k10.store --dataset k100=/tmp/lc/k100.store --dataset i100=/tmp/lc/i100.store &
    mkdir -p /tmp/before && git archive main python | tar -x -C /tmp/before
    python3 python/bench/loader_cpu.py --url http://127.0.0.1:18181 --datasets k10,k100,i100 \\
        --baseline /tmp/before/python --baseline-modes samples --modes samples --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))

#: The trees --write-trees makes: (name, samples, bytes of the first member, with a .cls).
TREES = (("k10", 12288, 10 << 10, False), ("k100", 3072, 100 << 10, False), ("i100", 3072, 100 << 10, True))


def write_trees(root: str) -> None:
    """The benchmark's source trees under ``root``, one a dataset: samples
    ``cN/sNNNNNN`` (``N`` the sample's number), of random bytes."""
    for name, n, size, cls in TREES:
        for i in range(n):
            d = os.path.join(root, name, f"c{i % 10}")
            os.makedirs(d, exist_ok=True)
            stem = os.path.join(d, f"s{i:06d}")
            with open(stem + (".jpg" if cls else ".bin"), "wb") as f:
                f.write(os.urandom(size))
            if cls:
                with open(stem + ".cls", "wb") as f:
                    f.write(str(i % 1000).encode())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--write-trees", metavar="DIR", help="write the benchmark's source trees under DIR and exit")
    p.add_argument("--url")
    p.add_argument("--datasets", help="comma-separated")
    p.add_argument("--baseline", help="another python/ tree, measured as 'before'")
    p.add_argument("--baseline-modes", default="brand,samples",
                   help="the modes the baseline runs, comma-separated (samples: a tree with brand.Samples)")
    p.add_argument("--modes", default="brand,samples", help="the modes this tree runs, comma-separated")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--python", default=sys.executable)
    a = p.parse_args()
    if a.write_trees:
        write_trees(a.write_trees)
        return
    if not a.url or not a.datasets:
        p.error("--url and --datasets are needed to measure")
    tmp = tempfile.mkdtemp(prefix="loader-cpu-")
    try:
        runs: List[Tuple[str, str, str]] = []  # (name, loaders.py, mode)
        if a.baseline:
            # This loaders.py beside the baseline's package: the same harness.
            os.makedirs(os.path.join(tmp, "bench"))
            shutil.copy(os.path.join(HERE, "loaders.py"), os.path.join(tmp, "bench", "loaders.py"))
            os.symlink(os.path.abspath(os.path.join(a.baseline, "brand")), os.path.join(tmp, "brand"))
            for mode in a.baseline_modes.split(","):
                runs.append((f"before {mode}", os.path.join(tmp, "bench", "loaders.py"), mode))
        for mode in a.modes.split(","):
            runs.append((f"after {mode}", os.path.join(HERE, "loaders.py"), mode))
        got: Dict[Tuple[str, str], List[float]] = {}
        epoch = a.warmup
        for r in range(a.rounds):
            for ds in a.datasets.split(","):
                for name, script, mode in runs:
                    cmd = [a.python, script, mode, "--url", a.url, "--dataset", ds, "--batch-size", str(a.batch_size),
                           "--workers", str(a.workers), "--epoch", str(epoch), "--warmup", str(a.warmup),
                           "--epochs", str(a.epochs), "--persistent"]
                    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900).stdout
                    m = json.loads(out.strip().splitlines()[-1])
                    us = m["cpu_seconds"] / m["samples"] * 1e6
                    got.setdefault((ds, name), []).append(us)
                    print(f"round {r} {ds:6s} {name:14s} {m['samples']:7d} samples {us:7.1f} µs CPU a sample "
                          f"{m['samples'] / m['seconds']:8.0f} samples/s", flush=True)
            epoch += a.warmup + a.epochs
        print(f"median of {a.rounds} rounds, µs of CPU a sample (trainer and {a.workers} workers, batch "
              f"{a.batch_size}):")
        for (ds, name), v in got.items():
            print(f"  {ds:6s} {name:14s} {statistics.median(v):7.1f}  ({', '.join(f'{x:.1f}' for x in v)})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
