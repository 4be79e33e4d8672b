#!/usr/bin/env python3
"""One measured pass of a training node's video clip loading, for Brand's
video benchmark (``brand-bench video``, cmd/brand-bench/internal/bench).

The harness runs this script as a process of its own, pinned to the
training node's core, once per measurement, and reads the JSON object it
prints on stdout. The clips are the same in every mode: the harness
writes them (``--clips-file``, one JSON object a line: the video's object
key, its label, the PTS of its frames, and for ``pyav-ranges`` the byte
ranges of the GOPs they need and the packets to decode) from the clip
job's epoch as the gateway draws it. Each mode is what a PyTorch user
writes:

``pyav-whole``   (1): a ``DataLoader`` over a map-style Dataset of the clips:
                 per clip one boto3 ``get_object`` of the whole MP4, PyAV
                 opens it, seeks to the keyframe before the clip's first
                 frame and decodes until its last, each frame wanted
                 ``to_ndarray(format="rgb24")``; a clip is a uint8
                 ``(T, H, W, 3)`` tensor, collated to ``(B, T, H, W, 3)``.
``pyav-ranges``  (2): the same, reading only the bytes of the GOPs the
                 clip needs with ranged ``get_object`` calls, and decoding
                 its packets with a PyAV codec context (the approach of
                 loaders that keep their own keyframe index).
``brand-clips``  (3): ``BrandDataset`` with the clip job (``clip=``,
                 ``stride=``): the gateway decodes; each step is one
                 ``(B, T, H, W, 3)`` uint8 tensor on the received buffer.
``brand-resume`` (3) resumed: a state at ``--position`` of the epoch is
                 loaded into a new ``BrandDataset`` and the first step is
                 timed, from the ``load_state_dict`` to the step.

Figures: ``clips``, ``seconds`` from the loader's start to its last step,
``cpu_seconds`` (the process tree's user and system CPU over the pass,
its reaped DataLoader workers included), ``startup_cpu_seconds`` (the
part of it that starting the pass's workers took: this process's CPU
until ``iter()`` returned, which forks a DataLoader's workers (a
BrandLoader forks them at its first step: that share stays with the
clips'), and each worker's own up to the end of its ``worker_init_fn``,
where (1) and (2) also make their boto3 client — so that a clip's CPU is
compared without the fixed cost of a pass, which a small run's few steps
cannot amortize), and for (1) and
(2) the bytes and GETs their workers asked the store for (``store_bytes``,
``requests``, summed over the workers through a file each writes).
``brand-resume`` also reports ``state_seconds`` (to ``load_state_dict``
returned) beside ``seconds`` (to the first step). With ``--passes N``,
``brand-clips`` reads the epoch N times with one loader (its workers
forked for each pass, or, with ``--persistent-workers``, living across
them, their CPU read from /proc) and reports the last pass.
"""

from __future__ import annotations

import argparse
import functools
import glob
import io
import json
import os
import sys
import tempfile
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def tree_cpu() -> float:
    """User and system CPU seconds of this process and its reaped children."""
    with open("/proc/self/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def worker_started(starts: str, prepare, worker_id: int) -> None:
    """A DataLoader worker's ``worker_init_fn``: runs ``prepare`` (what
    each worker makes once, such as a store client), then writes the CPU
    this worker has used since it was forked into a file of its own under
    ``starts``."""
    if prepare is not None:
        prepare()
    with open(os.path.join(starts, f"{os.getpid()}.cpu"), "w") as f:
        f.write(repr(time.process_time()))


def workers_startup(starts: str) -> float:
    """The CPU seconds the workers that wrote under ``starts`` took to start."""
    total = 0.0
    for p in glob.glob(os.path.join(starts, "*.cpu")):
        with open(p) as f:
            total += float(f.read())
    return total


def live_workers_cpu(loader) -> float:
    """User and system CPU seconds of ``loader``'s workers that are alive
    (persistent workers, which tree_cpu counts only once reaped)."""
    it = getattr(loader, "_iterator", None)
    total = 0.0
    for w in getattr(it, "_workers", None) or ():
        try:
            with open(f"/proc/{w.pid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        fields = s[s.rindex(")") + 2:].split()
        total += sum(int(x) for x in fields[11:13]) / os.sysconf("SC_CLK_TCK")
    return total


def measure(make_loader, key: str, prepare=None, passes: int = 1, before_pass=None) -> Dict[str, Any]:
    """The last of ``passes`` passes of the loader ``make_loader(worker_init_fn)``
    returns (one loader; ``before_pass()`` before each): the clips it
    yields, its time and CPU (persistent workers' included), and the CPU
    its start took (the workers it forked, if it forked any)."""
    starts = tempfile.mkdtemp(prefix="brand-video-starts-")
    init = functools.partial(worker_started, starts, prepare)
    loader = make_loader(init)
    for p in range(passes):
        if before_pass is not None:
            before_pass()
        for f in glob.glob(os.path.join(starts, "*.cpu")):
            os.unlink(f)  # the starts of this pass's workers alone
        clips = 0
        cpu0 = tree_cpu() + live_workers_cpu(loader)
        start = time.perf_counter()
        it = iter(loader)
        started = tree_cpu() + live_workers_cpu(loader) - cpu0
        for step in it:
            clips += len(step[key])
        del it  # without persistent workers: its workers joined and reaped
        out = {"clips": clips, "seconds": time.perf_counter() - start,
               "cpu_seconds": tree_cpu() + live_workers_cpu(loader) - cpu0,
               "startup_cpu_seconds": started + workers_startup(starts), "passes": passes}
    return out


class S3Clips:
    """A map-style Dataset of clips read with boto3 and decoded with PyAV
    in the DataLoader's workers; each worker counts what it asked the
    store for into a file of its own under ``counts``."""

    def __init__(self, clips: List[Dict[str, Any]], bucket: str, endpoint: str, ranges: bool, counts: str):
        self.clips, self.bucket, self.endpoint, self.ranges, self.counts = clips, bucket, endpoint, ranges, counts
        self._s3 = None
        self._bytes = self._requests = 0

    def __len__(self) -> int:
        return len(self.clips)

    def _client(self):
        if self._s3 is None:
            import boto3
            from botocore.config import Config

            self._s3 = boto3.session.Session().client(
                "s3", endpoint_url=self.endpoint, region_name="us-east-1",
                aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
            )
        return self._s3

    def _get(self, key: str, rng: str = "") -> bytes:
        kw = {"Bucket": self.bucket, "Key": key}
        if rng:
            kw["Range"] = rng
        body = self._client().get_object(**kw)["Body"].read()
        self._bytes += len(body)
        self._requests += 1
        with open(os.path.join(self.counts, f"{os.getpid()}.json"), "w") as f:
            json.dump({"bytes": self._bytes, "requests": self._requests}, f)
        return body

    def __getitem__(self, i: int):
        import numpy
        import torch

        c = self.clips[i]
        frames = self._ranges(c) if self.ranges else self._whole(c)
        return {"frames": torch.from_numpy(numpy.stack([frames[p] for p in c["pts"]])), "cls": c["label"]}

    def _whole(self, c: Dict[str, Any]) -> Dict[int, Any]:
        import av

        want = set(c["pts"])
        out: Dict[int, Any] = {}
        with av.open(io.BytesIO(self._get(c["object"]))) as f:
            s = f.streams.video[0]
            f.seek(min(want), backward=True, any_frame=False, stream=s)
            for fr in f.decode(s):
                if fr.pts in want:
                    out[fr.pts] = fr.to_ndarray(format="rgb24")
                if len(out) == len(want) or fr.pts > max(want) + 1000000:
                    break
        return out

    def _ranges(self, c: Dict[str, Any]) -> Dict[int, Any]:
        import av

        data = {}
        for off, n in c["ranges"]:
            data[off] = self._get(c["object"], f"bytes={off}-{off + n - 1}")
        want = set(c["pts"])
        out: Dict[int, Any] = {}
        for run in c["runs"]:
            ctx = av.CodecContext.create(c["codec"], "r")
            if c.get("extradata"):
                ctx.extradata = bytes.fromhex(c["extradata"])
            ctx.thread_type = "SLICE"
            packets = []
            for off, size, pts, dts, key in run:
                base = max(o for o in data if o <= off)
                p = av.Packet(data[base][off - base: off - base + size])
                # PyAV 10's Packet.is_keyframe is read-only; the decoder
                # finds keyframes in the bitstream.
                p.pts, p.dts = pts, dts
                packets.append(p)
            for p in packets + [None]:
                for fr in ctx.decode(p):
                    if fr.pts in want:
                        out[fr.pts] = fr.to_ndarray(format="rgb24")
        return out


def s3_clips(a: argparse.Namespace, ranges: bool) -> Dict[str, Any]:
    import torch
    from torch.utils.data import DataLoader, RandomSampler

    with open(a.clips_file) as f:
        clips = [json.loads(line) for line in f if line.strip()]
    counts = tempfile.mkdtemp(prefix="brand-video-counts-")
    ds = S3Clips(clips, a.bucket, a.endpoint, ranges, counts)
    sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(a.seed + a.epoch))
    out = measure(lambda init: DataLoader(ds, batch_size=a.batch_size, sampler=sampler, num_workers=a.workers,
                                          worker_init_fn=init), "frames", prepare=ds._client)
    out["store_bytes"] = out["requests"] = 0
    for p in glob.glob(os.path.join(counts, "*.json")):
        with open(p) as f:
            c = json.load(f)
        out["store_bytes"] += c["bytes"]
        out["requests"] += c["requests"]
    return out


def brand_clips(a: argparse.Namespace) -> Dict[str, Any]:
    import brand
    from brand.torch import BrandDataset

    job = brand.Job(dataset=a.dataset, seed=a.seed, batch_size=a.batch_size, clip=a.clip, stride=a.stride)
    ds = BrandDataset(a.url, brand.Options(job=job, tune_malloc=True))  # malloc tuned, as a trainer opts in
    ds.set_epoch(a.epoch)
    return measure(lambda init: ds.loader(num_workers=a.workers, worker_init_fn=init,
                                          persistent_workers=a.persistent_workers), "frames",
                   passes=a.passes, before_pass=lambda: ds.set_epoch(a.epoch))


def brand_resume(a: argparse.Namespace) -> Dict[str, Any]:
    import brand
    from brand.torch import BrandDataset

    job = brand.Job(dataset=a.dataset, seed=a.seed, batch_size=a.batch_size, clip=a.clip, stride=a.stride)
    before = BrandDataset(a.url, brand.Options(job=job, tune_malloc=True))
    before.set_epoch(a.epoch)
    state = before.state_dict(steps=a.position // a.batch_size)
    cpu0 = tree_cpu()
    start = time.perf_counter()
    ds = BrandDataset(a.url, brand.Options(job=job, tune_malloc=True))
    ds.load_state_dict(state)
    state_seconds = time.perf_counter() - start
    # The iterator is held until the step is timed: one dropped inside the
    # expression (next(iter(loader))) shuts its workers down before the
    # clock is read, and that shutdown (joining workers with batches in
    # flight) took 0.8-1.0 s of the 1.1-1.4 s this measured until 2026-11-27.
    it = iter(ds.loader(num_workers=a.workers))
    step = next(it)
    seconds = time.perf_counter() - start
    del it
    return {"clips": len(step["frames"]), "seconds": seconds, "cpu_seconds": tree_cpu() - cpu0,
            "state_seconds": state_seconds,
            "position": state["position"], "shape": list(step["frames"].shape)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("pyav-whole", "pyav-ranges", "brand-clips", "brand-resume"))
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epoch", type=int, default=0)
    p.add_argument("--clips-file", help="the clips, one JSON object a line (pyav-*)")
    p.add_argument("--endpoint", help="S3 endpoint (pyav-*); credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    p.add_argument("--bucket")
    p.add_argument("--url", help="the gateway (brand-*)")
    p.add_argument("--dataset")
    p.add_argument("--clip", type=int, default=16)
    p.add_argument("--stride", type=int, default=2)
    p.add_argument("--position", type=int, default=0, help="the clip position a resume starts at (brand-resume)")
    p.add_argument("--passes", type=int, default=1,
                   help="passes of one loader over the epoch, the last one measured (brand-clips)")
    p.add_argument("--persistent-workers", action="store_true",
                   help="the loader's workers live across its passes (brand-clips)")
    a = p.parse_args()
    if a.mode == "pyav-whole":
        out = s3_clips(a, False)
    elif a.mode == "pyav-ranges":
        out = s3_clips(a, True)
    elif a.mode == "brand-clips":
        out = brand_clips(a)
    else:
        out = brand_resume(a)
    out["mode"], out["workers"], out["epoch"] = a.mode, a.workers, a.epoch
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
