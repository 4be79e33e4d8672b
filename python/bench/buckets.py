#!/usr/bin/env python3
"""One measured pass of a training node's data loading for a text-to-image
model's shape buckets, for Brand's buckets benchmark (``brand-bench
buckets``, cmd/brand-bench/internal/bench/buckets.go).

The harness runs this script as a process of its own, pinned to the
training node's core, once per measurement, and reads the JSON object it
prints on stdout. Each mode is what a PyTorch user writes:

``pil``    the usual way (kohya-ss's bucket manager, the diffusers
           examples): a map-style ``Dataset`` over the JPEG files, a batch
           sampler that puts each image in the bucket of nearest aspect
           ratio (its size read from its header with PIL, once, before
           the pass), shuffles each bucket and cuts it into batches of the
           budget's size, and the workers decode with PIL, apply the EXIF
           orientation, resize to cover the bucket (bilinear) and crop at
           the centre to a uint8 ``(3, H, W)`` tensor; the DataLoader
           collates each step into one ``(B, 3, H, W)`` tensor.
``brand``  ``brand.Buckets`` over the gateway, the same buckets and budget,
           read with its ``loader()`` (its workers' shared blocks reused):
           the trainer only receives each step's tensors.
``pyav``   clip buckets (``HxWxT``) the usual way: a map-style ``Dataset``
           over the MP4 files, the same bucket batch sampler (each
           video's bucket from its size and frames, read with PyAV before
           the pass), and the workers decode the clip's frames from the
           first with PyAV and resize each to cover the bucket and crop
           it at the centre with PIL, to uint8 ``(T, H, W, 3)``.
``brand-clips``  ``brand.Buckets`` over the gateway's tree of videos, the
           same clip buckets and budget, ``clip_start="first"``.
``brand-mix``  ``brand.Buckets`` over a bucketed mixture of two photo
           datasets in two stages (``--mix-schedule``, ``--stage-buckets``,
           ``--stage-budget``): the weights, buckets and budget change at
           a global step inside the measured epoch.

Figures: ``images``, ``steps``, ``pixels`` (of the tensors handed to the
trainer), ``fill`` (the mean share of the step's budget its pixels fill),
``seconds`` from the loader's start (its
workers' start included) to the last step, and ``cpu_seconds``, the CPU
the process tree spent in that time (this process's user and system
time and its reaped children's, the DataLoader's workers, from
/proc/self/stat). Setup (imports, the pil mode's header pass) is not
measured.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Any, Dict, List, Tuple

# The brand package of this tree, or of another (BRAND_BENCH_PYTHONPATH, a
# tree's python directory: brand-bench buckets --baseline-python).
sys.path.insert(0, os.environ.get("BRAND_BENCH_PYTHONPATH") or os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SDXL = [(512, 2048), (512, 1984), (512, 1920), (512, 1856), (576, 1792), (576, 1728), (576, 1664), (640, 1600),
        (640, 1536), (704, 1472), (704, 1408), (704, 1344), (768, 1344), (768, 1280), (832, 1216), (832, 1152),
        (896, 1152), (896, 1088), (960, 1088), (960, 1024), (1024, 1024), (1024, 960), (1088, 960), (1088, 896),
        (1152, 896), (1152, 832), (1216, 832), (1280, 768), (1344, 768), (1344, 704), (1408, 704), (1472, 704),
        (1536, 640), (1600, 640), (1664, 576), (1728, 576), (1792, 576), (1856, 512), (1920, 512), (1984, 512),
        (2048, 512)]


def _stat(path: str) -> List[str]:
    with open(path) as f:
        s = f.read()
    return s[s.rindex(")") + 2:].split()


def tree_cpu() -> float:
    """User and system CPU seconds of this process, its reaped children,
    and its live children (a loader's persistent workers): what the
    training node's process tree has spent so far."""
    me = os.getpid()
    f = _stat("/proc/self/stat")
    ticks = sum(int(x) for x in f[11:15])
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                c = _stat(f"/proc/{pid}/stat")
            except OSError:
                continue
            if int(c[1]) == me:
                ticks += int(c[11]) + int(c[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def nearest(w: int, h: int, shapes: List[Tuple[int, int]]) -> int:
    """The bucket of nearest aspect ratio, the first of equals."""
    best, bp, bq = 0, 0, 0
    for i, (H, W) in enumerate(shapes):
        a, b = w * H, h * W
        p, q = max(a, b), min(a, b)
        if i == 0 or p * bq < bp * q:
            best, bp, bq = i, p, q
    return best


def scale(shapes: List[Tuple[int, int]], side: int) -> List[Tuple[int, int]]:
    return [(h * side // 1024, w * side // 1024) for h, w in shapes]


def cover_crop(im, H: int, W: int):
    """im resized (bilinear) to cover H×W, keeping its aspect, and cut to
    H×W at the centre: the bucket's shape, as the gateway's rule makes it."""
    from PIL import Image

    w, h = im.size
    if W * h >= H * w:
        nw, nh = W, h * W // w
    else:
        nw, nh = w * H // h, H
    im = im.resize((nw, nh), Image.BILINEAR)
    left, top = round((nw - W) / 2), round((nh - H) / 2)
    return im.crop((left, top, left + W, top + H))


class Files:
    """The usual bucketed Dataset: item (path, bucket) decoded, oriented,
    resized to cover the bucket and cropped at the centre, to uint8 CHW."""

    def __init__(self, paths: List[str], shapes: List[Tuple[int, int]]):
        self.paths, self.shapes = paths, shapes

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, item):
        import torch
        from PIL import Image, ImageOps

        i, b = item
        H, W = self.shapes[b]
        with Image.open(self.paths[i]) as im:
            im = cover_crop(ImageOps.exif_transpose(im).convert("RGB"), H, W)
            t = torch.frombuffer(bytearray(im.tobytes()), dtype=torch.uint8).reshape(H, W, 3).permute(2, 0, 1)
        return t


class BucketSampler:
    """Each bucket's images shuffled and cut into batches of its size, the
    batches shuffled: the usual bucket batch sampler."""

    def __init__(self, buckets: Dict[int, List[int]], sizes: List[int], seed: int):
        self.buckets, self.sizes, self.seed = buckets, sizes, seed

    def batches(self) -> List[List[Tuple[int, int]]]:
        rng = random.Random(self.seed)
        out = []
        for b, ids in sorted(self.buckets.items()):
            ids = ids[:]
            rng.shuffle(ids)
            k = self.sizes[b]
            out += [[(i, b) for i in ids[j:j + k]] for j in range(0, len(ids) - k + 1, k)]
        rng.shuffle(out)
        return out

    def __iter__(self):
        return iter(self.batches())

    def __len__(self) -> int:
        return len(self.batches())


def pil(a: argparse.Namespace) -> Dict[str, Any]:
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader

    shapes = scale(SDXL, a.side)
    paths = []
    for root, _, files in os.walk(a.dir):
        paths += [os.path.join(root, f) for f in files if f.endswith(".jpg")]
    paths.sort()
    buckets: Dict[int, List[int]] = {}
    for i, p in enumerate(paths):  # the header pass, before the clock
        with Image.open(p) as im:
            w, h = im.size
            if im.getexif().get(0x0112, 1) in (5, 6, 7, 8):  # displayed size, as the index's
                w, h = h, w
        H, W = shapes[nearest(w, h, shapes)]
        if max(H / h, W / w) <= 2:
            buckets.setdefault(nearest(w, h, shapes), []).append(i)
    sizes = [max(1, a.budget // (h * w)) for h, w in shapes]
    loader = DataLoader(Files(paths, shapes), batch_sampler=BucketSampler(buckets, sizes, a.seed + a.epoch),
                        num_workers=a.workers, collate_fn=torch.stack, persistent_workers=a.workers > 0)
    return measure(lambda: loader, a.warmup, lambda m: a.budget)


def brand_mix(a: argparse.Namespace) -> Dict[str, Any]:
    """The bucketed mixture in two stages: its steps from --epoch-start
    (the measured epoch's first global step), the budget the stage's."""
    import brand

    stages = [(int(k), int(v)) for k, v in (x.split("@") for x in a.stage_budget.split("|"))]

    def budget(m: int) -> int:
        return [v for k, v in stages if k <= a.epoch_start + m][-1]

    ds = brand.Buckets(a.url, mix_schedule=a.mix_schedule, buckets=a.stage_buckets, budget=a.stage_budget, seed=a.seed)
    ds.set_epoch(a.epoch)
    loader = ds.loader(num_workers=a.workers, persistent_workers=a.workers > 0)
    return measure(lambda: (b.images for b in loader), a.warmup, budget)


def brand_mode(a: argparse.Namespace) -> Dict[str, Any]:
    import brand
    from torch.utils.data import DataLoader

    preset = {1024: "sdxl", 768: "sdxl-768", 512: "sdxl-512"}[a.side]
    ds = brand.Buckets(a.url, a.dataset, buckets=preset, budget=a.budget, seed=a.seed)
    ds.set_epoch(a.epoch)
    loader = ds.loader(num_workers=a.workers, persistent_workers=a.workers > 0)
    return measure(lambda: (b.images for b in loader), a.warmup, lambda m: a.budget)


def clip_shapes(spec: str) -> List[Tuple[int, int, int]]:
    return [tuple(int(x) for x in b.split("x")) for b in spec.split(",")]  # type: ignore[misc]


def clip_bucket(w: int, h: int, n: int, shapes: List[Tuple[int, int, int]], stride: int = 1) -> int:
    """The clip bucket rule (docs/http-api.md, "Clips"): among the
    buckets whose clip a video of ``n`` frames holds, the nearest in
    aspect ratio, of equally near the one of most frames, then the
    first; -1 for none."""
    best, bp, bq = -1, 0, 0
    for i, (H, W, T) in enumerate(shapes):
        if (T - 1) * stride + 1 > n:
            continue
        a, b = w * H, h * W
        p, q = max(a, b), min(a, b)
        if best < 0 or p * bq < bp * q or (p * bq == bp * q and T > shapes[best][2]):
            best, bp, bq = i, p, q
    return best


class Videos:
    """The usual clip-bucketed Dataset: item (path, bucket) decoded with
    PyAV from its first frame, each of the clip's frames resized to cover
    the bucket (PIL, bilinear) and cropped at the centre, to uint8
    ``(T, H, W, 3)``."""

    def __init__(self, paths: List[str], shapes: List[Tuple[int, int, int]]):
        self.paths, self.shapes = paths, shapes

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, item):
        import av
        import numpy
        import torch

        i, b = item
        H, W, T = self.shapes[b]
        out = []
        with av.open(self.paths[i]) as c:
            for f in c.decode(video=0):
                out.append(numpy.asarray(cover_crop(f.to_image(), H, W)))
                if len(out) == T:
                    break
        return torch.from_numpy(numpy.stack(out))


def pyav(a: argparse.Namespace) -> Dict[str, Any]:
    import av
    import torch
    from torch.utils.data import DataLoader

    shapes = clip_shapes(a.clip_buckets)
    paths = []
    for root, _, files in os.walk(a.dir):
        paths += [os.path.join(root, f) for f in files if f.endswith(".mp4")]
    paths.sort()
    buckets: Dict[int, List[int]] = {}
    for i, p in enumerate(paths):  # the size and length pass, before the clock
        with av.open(p) as c:
            st = c.streams.video[0]
            w, h, n = st.codec_context.width, st.codec_context.height, st.frames
        b = clip_bucket(w, h, n, shapes)
        if b >= 0 and max(shapes[b][0] / h, shapes[b][1] / w) <= 2:
            buckets.setdefault(b, []).append(i)
    sizes = [max(1, a.budget // (h * w * t)) for h, w, t in shapes]
    loader = DataLoader(Videos(paths, shapes), batch_sampler=BucketSampler(buckets, sizes, a.seed + a.epoch),
                        num_workers=a.workers, collate_fn=torch.stack, persistent_workers=a.workers > 0)
    return measure(lambda: loader, a.warmup, lambda m: a.budget)


def brand_clips(a: argparse.Namespace) -> Dict[str, Any]:
    import brand

    ds = brand.Buckets(a.url, a.dataset, buckets=a.clip_buckets, budget=a.budget, seed=a.seed, clip_start="first")
    ds.set_epoch(a.epoch)
    loader = ds.loader(num_workers=a.workers, persistent_workers=a.workers > 0)
    return measure(lambda: (b.frames for b in loader), a.warmup, lambda m: a.budget)


def check(a: argparse.Namespace) -> Dict[str, Any]:
    """Read a whole epoch of the bucket job at world ``a.world`` (every
    rank, in this process) and hold it to the files: every step one shape
    for every rank, every image at most once and in the bucket the rule
    gives from its file's header (computed here with fractions, from
    docs/http-api.md), each bucket's count of steps within one of its
    share at every step, and the budget's mean fill."""
    from fractions import Fraction

    import brand
    from PIL import Image

    shapes = scale(SDXL, a.side)
    preset = {1024: "sdxl", 768: "sdxl-768", 512: "sdxl-512"}[a.side]

    def rule(w: int, h: int) -> Tuple[int, int]:
        best, bd = None, None
        for H, W in shapes:
            x, y = w * H, h * W
            d = Fraction(max(x, y), min(x, y))
            if bd is None or d < bd:
                best, bd = (H, W), d
        return best

    want, fit = {}, set()
    for root, _, files in os.walk(a.dir):
        for f in files:
            if f.endswith(".jpg"):
                key = os.path.relpath(os.path.join(root, f[:-4]), a.dir)
                with Image.open(os.path.join(root, f)) as im:
                    w, h = im.size
                want[key] = rule(w, h)
                H, W = want[key]
                if max(H / h, W / w) <= 2:
                    fit.add(key)
    ranks = [iter(brand.Buckets(a.url, a.dataset, buckets=preset, budget=a.budget, seed=a.seed, world=a.world, rank=r))
             for r in range(a.world)]
    ds = brand.Buckets(a.url, a.dataset, buckets=preset, budget=a.budget, seed=a.seed, world=a.world, rank=0)
    info = ds.epoch_info()["buckets"]
    m = {tuple(int(x) for x in b["shape"].split("x")): b["batches"] for b in info["buckets"]}
    total = sum(m.values())
    seen, mixed, wrong, worst = set(), 0, 0, 0.0
    count: Dict[Tuple[int, int], int] = {}
    fill = 0.0
    for t in range(total):
        steps = [next(it) for it in ranks]
        shapes_of = {s.bucket for s in steps}
        if len(shapes_of) != 1:
            mixed += 1
        b = steps[0].bucket
        count[b] = count.get(b, 0) + 1
        for s in steps:
            for key in s.keys:
                if key in seen:
                    raise SystemExit(f"{key} served twice")
                seen.add(key)
                if want.get(key) != s.bucket:
                    wrong += 1
        fill += len(steps[0].keys) * b[0] * b[1] / a.budget
        for k, mk in m.items():
            worst = max(worst, abs(count.get(k, 0) - (t + 1) * mk / total))
    for it in ranks:
        if next(it, None) is not None:
            raise SystemExit("a rank has steps past /epoch/N's")
    return {"files": len(want), "fit": len(fit), "served": len(seen), "steps": total, "world": a.world,
            "buckets_used": len([k for k, v in m.items() if v]), "mixed_steps": mixed, "wrong_bucket": wrong,
            "served_unfit": len(seen - fit), "max_share_deviation_steps": worst, "mean_fill": fill / max(total, 1),
            "dropped": sum(b["dropped"] for b in info["buckets"]), "too_small": info["too_small"]}


def measure(make_steps, warmup: int, budget) -> Dict[str, Any]:
    """Consume make_steps()'s steps: ``warmup`` passes unmeasured (the
    persistent workers started, the pages mapped), then one measured, its
    CPU the process tree's over it, the live workers' included. A step's
    pixels are its tensor's elements over its 3 channels; budget(m) is
    step m's budget, in pixels (a clip's frames count theirs)."""
    cpu0 = tree_cpu()
    for _ in range(warmup):
        for _ in make_steps():
            pass
    warm = tree_cpu() - cpu0
    images = steps = pixels = 0
    fill = 0.0
    cpu0 = tree_cpu()
    start = time.perf_counter()
    for images_t in make_steps():
        n = images_t.numel() // 3
        images += len(images_t)
        pixels += n
        fill += n / budget(steps)
        steps += 1
    seconds = time.perf_counter() - start
    return {"images": images, "steps": steps, "pixels": pixels, "fill": fill / max(steps, 1), "seconds": seconds,
            "cpu_seconds": tree_cpu() - cpu0, "warmup_cpu_seconds": warm}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["pil", "brand", "brand-before", "check", "pyav", "brand-clips", "brand-mix"])
    p.add_argument("--mix-schedule", help="brand-mix: the mixture's weights by global step (mix_schedule=)")
    p.add_argument("--stage-buckets", help="brand-mix: the buckets' stages, STEP@LIST|...")
    p.add_argument("--stage-budget", help="brand-mix: the budget's stages, STEP@PIXELS|...")
    p.add_argument("--epoch-start", type=int, default=0, help="brand-mix: the measured epoch's first global step")
    p.add_argument("--clip-buckets", help="pyav, brand-clips: the clip buckets, HxWxT,...")
    p.add_argument("--world", type=int, default=2, help="check: the world size read")
    p.add_argument("--dir", help="pil: the JPEG tree")
    p.add_argument("--url", help="brand: the gateway")
    p.add_argument("--dataset", default="photos")
    p.add_argument("--side", type=int, default=1024, help="the SDXL buckets' scale: 1024, 768 or 512")
    p.add_argument("--budget", type=int, default=4 << 20, help="pixels a step")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epoch", type=int, default=0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--warmup", type=int, default=1, help="unmeasured passes first (the persistent workers started)")
    a = p.parse_args()
    out = {"pil": pil, "brand": brand_mode, "brand-before": brand_mode, "check": check, "pyav": pyav, "brand-clips": brand_clips,
           "brand-mix": brand_mix}[a.mode](a)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
