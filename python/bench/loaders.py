#!/usr/bin/env python3
"""One measured pass of a Python data loader, for Brand's benchmark harness.

The harness (cmd/brand-bench/internal/bench, group ``python``) runs this
script as a process of its own, once per measurement, and reads the JSON
object it prints on stdout. Each mode reads samples the way a PyTorch user would:

``per-object``  (p): a ``DataLoader`` over a map-style ``Dataset`` whose
                ``__getitem__`` does one boto3 ``get_object`` per sample,
                a ``RandomSampler``, ``batch_size`` samples a step.
``brand``       the same ``DataLoader`` over ``brand.torch.BrandDataset``,
                per sample, as the README recommends (``ds.loader(...)``).
``samples``     ``brand.Samples``, the entry of samples as stored, through its
                loader (``ds.loader(num_workers=...)``): a step is a
                ``SampleBatch`` of ``batch_size`` samples.
``client``      ``brand.Client.epoch`` alone, no torch: the Python client's
                own speed, compared with the Go client's on one gateway.

Figures: ``samples`` and ``bytes`` (the samples' payload: the bytes of their
files; for ``client`` the HTTP body bytes, tar framing included, as the Go
harness counts them), ``seconds`` from the first request to the last
sample, ``cpu_seconds`` of this process and its reaped children (the
DataLoader's workers, which a pass ends by joining), and ``waits_ms``, the
time the loop waited for each step. Setup (imports, the boto3 client, the
key list) is not measured.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from typing import Any, Dict, Iterable, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def cpu_seconds() -> float:
    """This process's CPU, its reaped children's and its live children's
    (persistent DataLoader workers, from /proc)."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime + live_children_cpu()


def live_children_cpu() -> float:
    me, total = str(os.getpid()), 0
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:  # ppid
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def payload(sample: Dict[str, Any]) -> int:
    return sum(len(v) for k, v in sample.items() if k != "__key__")


def keep(batch: List[Any]) -> List[Any]:
    """The DataLoader's collate_fn: the list of samples as it is (both
    loaders alike; a model's decoding is not what is measured)."""
    return batch


def measure(steps: Iterable[List[Dict[str, Any]]], count_bytes=None, payload_of=payload) -> Dict[str, Any]:
    """Consume steps (lists of samples) and time them."""
    samples = nbytes = 0
    waits = []
    cpu0 = cpu_seconds()
    start = last = time.perf_counter()
    for step in steps:
        if step is START:
            waits, samples, nbytes = [], 0, 0
            cpu0 = cpu_seconds()
            start = last = time.perf_counter()
            continue
        now = time.perf_counter()
        waits.append((now - last) * 1e3)
        last = now
        samples += len(step)
        if count_bytes is None:
            for s in step:
                nbytes += payload_of(s)
    cpu = cpu_seconds() - cpu0
    if count_bytes is not None:
        nbytes = count_bytes()
    return {"samples": samples, "bytes": nbytes, "seconds": last - start, "cpu_seconds": cpu, "waits_ms": waits}


class S3PerSample:
    """A map-style Dataset (DataLoader needs only __len__ and __getitem__):
    sample i is one GET of its own object. The boto3
    client is made in each worker on first use (clients do not survive a
    fork)."""

    def __init__(self, keys: List[str], bucket: str, endpoint: str, region: str, access_key: str, secret_key: str):
        self.keys, self.bucket = keys, bucket
        self.endpoint, self.region, self.access_key, self.secret_key = endpoint, region, access_key, secret_key
        self._s3 = None

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> Dict[str, Any]:
        if self._s3 is None:
            import boto3
            from botocore.config import Config

            self._s3 = boto3.session.Session().client(
                "s3", endpoint_url=self.endpoint, region_name=self.region,
                aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
                config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
            )
        key = self.keys[i]
        body = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return {"__key__": key, "jpg": body}


def per_object(a: argparse.Namespace) -> Dict[str, Any]:
    import torch
    from torch.utils.data import DataLoader, RandomSampler

    with open(a.keys_file) as f:
        keys = [line.strip() for line in f if line.strip()]
    ds = S3PerSample(
        keys, a.bucket, a.endpoint, a.region, os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    )
    n = min(len(keys), a.limit) if a.limit else len(keys)
    sampler = RandomSampler(ds, num_samples=n, generator=torch.Generator().manual_seed(a.seed))
    loader = DataLoader(ds, batch_size=a.batch_size, sampler=sampler, num_workers=a.workers, collate_fn=keep)
    out = measure(loader)
    out["epoch_samples"] = len(keys)
    return out


def epochs(ds: Any, loader: Any, a: argparse.Namespace) -> Iterable[Any]:
    """The loader's steps over epochs ``a.epoch`` to ``a.epoch + a.epochs
    - 1``, after ``a.warmup`` epochs read unmeasured (the workers started
    and their memory mapped, as in a run of many epochs)."""
    for e in range(a.epoch - a.warmup, a.epoch):
        ds.set_epoch(e)
        for _ in loader:
            pass
    yield START
    for e in range(a.epoch, a.epoch + a.epochs):
        ds.set_epoch(e)
        yield from loader


#: What epochs() yields where the measurement starts.
START = object()


def brand_torch(a: argparse.Namespace) -> Dict[str, Any]:
    from brand.torch import BrandDataset

    kw = {"columns": tuple(a.columns.split(","))} if a.columns else {}
    # Malloc tuned, as a trainer opts in (brand.Options.tune_malloc): the
    # loaders measured as docs/benchmarks.md quotes them.
    ds = BrandDataset(a.url, dataset=a.dataset, batch_size=a.batch_size, seed=a.seed, window=a.window,
                      tune_malloc=True, **kw)
    loader = ds.loader(num_workers=a.workers, collate_fn=keep, persistent_workers=a.persistent and a.workers > 0)
    return measure(epochs(ds, loader, a))


def brand_samples(a: argparse.Namespace) -> Dict[str, Any]:
    import brand

    more = {"columns": tuple(a.columns.split(","))} if a.columns else {}
    ds = brand.Samples(a.url, a.dataset, batch_size=a.batch_size, seed=a.seed, window=a.window, tune_malloc=True,
                       **more)
    loader = ds.loader(num_workers=a.workers, persistent_workers=a.persistent and a.workers > 0)

    def steps() -> Iterable[List[Any]]:
        # Each step's members as a list of samples' payloads, so that
        # measure() counts samples and bytes as for the other modes.
        for b in epochs(ds, loader, a):
            if b is START:
                yield b
                continue
            cols = list(b.fields.values())
            yield [{"m": [c[i] for c in cols if c[i] is not None]} for i in range(len(b.keys))]

    return measure(steps(), count_bytes=None, payload_of=lambda s: sum(t.numel() for t in s["m"]))


def brand_client(a: argparse.Namespace) -> Dict[str, Any]:
    import brand

    class CountingClient(brand.Client):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            self.sizes: List[int] = []  # list.append is atomic under the GIL

        def batch_bytes(self, *args: Any, **kw: Any) -> bytes:
            body = super().batch_bytes(*args, **kw)
            self.sizes.append(len(body))
            return body

    c = CountingClient(a.url, dataset=a.dataset, seed=a.seed, batch_size=a.batch_size, window=a.window, ahead=a.ahead,
                       tune_malloc=True)  # opted in, as brand_torch
    with c:
        for _ in range(a.warmup):
            # Unmeasured: a process's first epoch faults in its memory
            # (slow on this VM), which a long-lived loader, like the Go
            # client in the harness's process, has done long before.
            for _ in c.epoch(a.epoch):
                pass
        c.sizes.clear()
        # The plan's request is timed, as the Go client's Epoch makes it too.
        return measure(c.epoch(a.epoch), count_bytes=lambda: sum(c.sizes))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("per-object", "brand", "samples", "client"))
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    # per-object
    p.add_argument("--endpoint", help="S3 endpoint URL; credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--bucket")
    p.add_argument("--keys-file", help="the per-sample objects' keys, one a line")
    p.add_argument("--limit", type=int, default=0, help="read this many samples of the shuffled epoch (0: all)")
    # brand, client
    p.add_argument("--url", help="the gateway")
    p.add_argument("--dataset")
    p.add_argument("--window", type=int)
    p.add_argument("--epoch", type=int, default=0)
    p.add_argument("--columns", help="fields of a dataset served in place, comma-separated (mode brand)")
    p.add_argument("--ahead", type=int, default=2, help="batches the client keeps requested ahead (mode client)")
    p.add_argument("--warmup", type=int, default=0, help="read the epoch this many times, unmeasured, first (mode "
                   "client); the epochs before --epoch, unmeasured, through the same loader (modes brand, samples)")
    p.add_argument("--epochs", type=int, default=1, help="epochs measured from --epoch on (modes brand, samples)")
    p.add_argument("--persistent", action="store_true", help="persistent DataLoader workers (modes brand, samples)")
    a = p.parse_args()
    run = {"per-object": per_object, "brand": brand_torch, "samples": brand_samples, "client": brand_client}[a.mode]
    out = run(a)
    out["mode"], out["epoch"] = a.mode, a.epoch
    if a.mode != "client":
        out["workers"] = a.workers
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
