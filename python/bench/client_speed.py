#!/usr/bin/env python3
"""The Python client's speed beside the Go client's, on one gateway, in one run.

Reads warm epochs of a running gateway alternately with the Go client
(``cmd/brand-bench/internal/bench/clientspeed``, built once with
``go build``) and the Python client (``loaders.py client``), each a process
of its own, and prints samples/s and CPU-seconds per GB (10^9 HTTP body bytes) of each,
then their ratios. Epoch ``--warm`` is read first, unmeasured, so that a
cache that holds the dataset is warm. Run it on a quiet machine and compare
only the ratios: both clients share the machine with the gateway.

    go run ./cmd/brand demo --listen 127.0.0.1:8181 --samples 20000 --cache-size 1GiB &
    python3 python/bench/client_speed.py --url http://127.0.0.1:8181 --batch-size 64 --rounds 3

With ``--gateway-pid`` the gateway's CPU over each measurement is shown too.
With ``--baseline DIR`` (a ``python/`` directory of another checkout, e.g.
``mkdir /tmp/before && git archive main python | tar -x -C /tmp/before``, then
``--baseline /tmp/before/python``), that tree's client is measured in
each round as well, as "before".
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
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def proc_cpu(pid: Optional[int]) -> float:
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(cmd: List[str], gateway_pid: Optional[int]) -> Dict[str, Any]:
    g0 = proc_cpu(gateway_pid)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
    r = json.loads(out.strip().splitlines()[-1])
    r["gateway_cpu_seconds"] = proc_cpu(gateway_pid) - g0  # over the whole process, warm-up included
    return r


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--dataset")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--ahead", type=int, default=2, help="batches each client keeps in flight")
    p.add_argument("--rounds", type=int, default=3, help="Go, then Python, this many times")
    p.add_argument("--warm", type=int, default=0, help="epoch read first to fill the cache (unmeasured)")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--go-bin", help="a built cmd/brand-bench/internal/bench/clientspeed (default: go build it)")
    p.add_argument("--gateway-pid", type=int)
    p.add_argument("--baseline", help="another python/ tree whose client is measured too")
    p.add_argument("--fresh", action="store_true",
                   help="measure each process's first epoch (as a DataLoader worker's, which starts every epoch), not a second")
    a = p.parse_args()

    go_bin = a.go_bin
    tmp = None
    if not go_bin:
        tmp = tempfile.mkdtemp(prefix="client-speed-")
        go_bin = os.path.join(tmp, "clientspeed")
        subprocess.run(["go", "build", "-o", go_bin, "./cmd/brand-bench/internal/bench/clientspeed"], cwd=REPO, check=True)
    warmup = "0" if a.fresh else "1"
    common = ["--url", a.url, "--batch-size", str(a.batch_size), "--ahead", str(a.ahead)]
    if a.dataset:
        common += ["--dataset", a.dataset]

    def go(epoch: int) -> Dict[str, Any]:
        # The epoch twice, the first unmeasured (the last line is kept): a
        # fresh process's first epoch faults its memory in.
        return run([go_bin, *common, "--epochs", str(epoch) if a.fresh else f"{epoch},{epoch}"], a.gateway_pid)

    def py(epoch: int) -> Dict[str, Any]:
        return run([a.python, os.path.join(HERE, "loaders.py"), "client", *common, "--epoch", str(epoch), "--warmup", warmup], a.gateway_pid)

    def before(epoch: int) -> Dict[str, Any]:
        return run([a.python, base_loaders, "client", *common, "--epoch", str(epoch), "--warmup", warmup], a.gateway_pid)

    contenders = [("Go", go), ("Python", py)]
    if a.baseline:
        # loaders.py imports brand from the directory above its own.
        tmp = tmp or tempfile.mkdtemp(prefix="client-speed-")
        os.makedirs(os.path.join(tmp, "bench"), exist_ok=True)
        base_loaders = os.path.join(tmp, "bench", "loaders.py")
        shutil.copy(os.path.join(HERE, "loaders.py"), base_loaders)
        os.symlink(os.path.abspath(os.path.join(a.baseline, "brand")), os.path.join(tmp, "brand"))
        contenders.append(("before", before))
    py(a.warm)
    rows = []
    epoch = a.warm + 1
    for _ in range(a.rounds):
        for name, fn in contenders:
            r = fn(epoch)
            epoch += 1
            gb = r["bytes"] / 1e9
            rows.append((name, r["samples"] / r["seconds"], r["cpu_seconds"] / gb, r["gateway_cpu_seconds"] / ((1 if a.fresh else 2) * gb), r))  # epochs served
            print(f"{name:7s} epoch {epoch - 1:3d}: {rows[-1][1]:9.0f} samples/s, "
                  f"{r['bytes'] / r['seconds'] / 1e6:7.0f} MB/s, client {rows[-1][2]:.3f} CPU-s/GB"
                  + (f", gateway {rows[-1][3]:.3f} CPU-s/GB" if a.gateway_pid else ""), flush=True)
    names = [n for n, _ in contenders]
    med = {n: (statistics.median(r[1] for r in rows if r[0] == n), statistics.median(r[2] for r in rows if r[0] == n))
           for n in names}
    print("median: " + "; ".join(f"{n} {med[n][0]:.0f} samples/s at {med[n][1]:.3f} CPU-s/GB" for n in names))
    for n in names[1:]:
        print(f"{n} ÷ Go: samples/s {med[n][0] / med['Go'][0]:.2f} (target ≥ 0.80), CPU-s/GB {med[n][1] / med['Go'][1]:.2f}")
    if tmp:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
