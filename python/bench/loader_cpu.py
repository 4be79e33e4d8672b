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

    mkdir -p /tmp/before && git archive main python | tar -x -C /tmp/before
    python3 python/bench/loader_cpu.py --url http://127.0.0.1:18181 --datasets k10,k100 \\
        --baseline /tmp/before/python --rounds 3
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--datasets", required=True, help="comma-separated")
    p.add_argument("--baseline", help="another python/ tree, measured as 'before'")
    p.add_argument("--baseline-modes", default="brand,samples",
                   help="the modes the baseline runs, comma-separated (samples: a tree with brand.Samples)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--python", default=sys.executable)
    a = p.parse_args()
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
        runs += [("after brand", os.path.join(HERE, "loaders.py"), "brand"),
                 ("after samples", os.path.join(HERE, "loaders.py"), "samples")]
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
