#!/usr/bin/env python3
"""One training run of a torchvision model fed one way, for Brand's
training benchmark (``brand-bench train``, cmd/brand-bench/internal/bench/train.go).

The harness runs this script as a process of its own under taskset, once
per model and feed, and reads the JSON object it prints on stdout. Every
feed drives the same loop: uint8 images and their labels to the device,
the labels checked against the images, normalization on the device, a
torchvision ResNet in channels-last memory, forward and backward under
bf16 autocast where the device has it cheaply, an SGD step.

``synthetic``  (S): one batch made on the device once and fed every step:
               the model's own ceiling.
``folder``     (P): the standard recipe, torchvision ``ImageFolder`` and a
               ``DataLoader`` with ``RandomResizedCrop(224)``,
               ``RandomHorizontalFlip()`` and ``PILToTensor()`` (a uint8
               tensor) in its workers.
``brand``      (B): ``brand.torch.BrandDataset`` with the gateway's
               ``transform=imagenet-train``: the gateway decodes and
               augments, the trainer's loader only collates.
``gpu``        (G): ``brand.GPUTensors`` with the gateway's
               ``transform=imagenet-train-gpu`` (a gateway built with
               libjpeg-turbo): the gateway cuts each JPEG to its crop, the
               loader's workers gather a step's cuts, the trainer's
               process decodes them on the device in one call and crops,
               resizes and flips there (on a CPU, torchvision's decoder,
               image by image: the trainer's CPU then includes decoding).

Checks, on every step: the batch's shape and dtype (``(batch, 3, 224,
224)``, uint8) and its labels' shape; every image's label against the
class its pixels carry (the photos of internal/gen/photos.ClassTree are
coloured by class: :func:`class_of` reads it back from any crop), counted
on the device and read once at the end; for (B) every label against its
sample's key too (and (G)), and for (P) ImageFolder's class indices against the
folders' names. A run with any label wrong reports it, and the harness
fails.

Figures, over the measured steps (after ``--warmup`` steps): ``images``,
``seconds`` (wall, the device synchronized at both ends), ``busy``, the
fraction of that time the device computed (CUDA: events around each
step's normalization, forward, backward and optimizer step; CPU: the same
span timed, the rest being the wait for data), the trainer's CPU seconds
(this process and every descendant, live or reaped: the DataLoader's
workers) and, given ``--gateway-pid``, the gateway's, both from /proc.

Runs on torch 1.13 (Debian's python3-torch) and 2.x alike: only public
APIs of both, ``torch.autocast(device_type=...)`` for mixed precision.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import re
import sys
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch

#: The (Cb, Cr) square the classes' colours tile, in levels either side of
#: grey (internal/gen/photos: chromaSpan).
CHROMA_SPAN = 30.0
CROP = 224
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def grid_side(classes: int) -> int:
    return int(math.ceil(math.sqrt(max(classes, 1))))


def class_chroma(c: int, classes: int) -> Tuple[float, float]:
    """Class c's (Cb, Cr) offset from grey: photos.ClassChroma."""
    g = grid_side(classes)
    step = 2 * CHROMA_SPAN / g
    return -CHROMA_SPAN + (c // g + 0.5) * step, -CHROMA_SPAN + (c % g + 0.5) * step


def class_of(images: "torch.Tensor", classes: int) -> "torch.Tensor":
    """The class each uint8 ``(N, 3, H, W)`` image carries in its mean
    colour: RGB to (Cb, Cr) offsets (JFIF's matrix), then the grid cell of
    class_chroma. Every fourth pixel of every fourth row is enough: the
    colour is the same all over the image, under a faint texture."""
    m = images[:, :, ::4, ::4].float().mean(dim=(2, 3))
    r, g, b = m[:, 0], m[:, 1], m[:, 2]
    cb = -0.168736 * r - 0.331264 * g + 0.5 * b
    cr = 0.5 * r - 0.418688 * g - 0.081312 * b
    side = grid_side(classes)
    step = 2 * CHROMA_SPAN / side

    def cell(v: "torch.Tensor") -> "torch.Tensor":
        return torch.clamp(torch.floor((v + CHROMA_SPAN) / step), 0, side - 1).long()

    return cell(cb) * side + cell(cr)


def stat_ticks(pid: str) -> Tuple[int, int, int]:
    """(ppid, own CPU ticks, reaped children's CPU ticks) of a process,
    from /proc/<pid>/stat; (-1, 0, 0) if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return -1, 0, 0
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def tree_cpu() -> float:
    """CPU seconds (user and system) of this process and of every
    descendant, live (their own and their reaped children's) or reaped."""
    me = os.getpid()
    parents: Dict[int, List[int]] = {}
    ticks: Dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        ppid, own, reaped = stat_ticks(name)
        if ppid >= 0:
            parents.setdefault(ppid, []).append(int(name))
            ticks[int(name)] = own + reaped
    total, todo = 0, [me]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(parents.get(pid, ()))
    return total / CLK_TCK


def process_cpu(pid: int) -> float:
    _, own, _ = stat_ticks(str(pid))
    return own / CLK_TCK


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AMX or AVX-512 BF16), where
    autocast to bf16 is cheap; elsewhere it is emulated and slower than
    float32."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return "amx_bf16" in flags or "avx512_bf16" in flags
    except OSError:
        pass
    return False


def choose_amp(device: "torch.device", amp: str) -> str:
    if amp != "auto":
        return amp
    if device.type == "cuda":
        supported = getattr(torch.cuda, "is_bf16_supported", lambda: False)
        return "bf16" if supported() else "off"
    return "bf16" if cpu_has_bf16() else "off"


def autocast(device: "torch.device", amp: str):
    if amp == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def sync(device: "torch.device") -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# Feeds: each an iterator of (uint8 images, int64 labels), on the host or
# already on the device.

KEY_CLASS = re.compile(r"n(\d+)/img_\d+$")


def synthetic(a: argparse.Namespace, device: "torch.device") -> Iterator[Tuple[Any, Any]]:
    """(S): one batch of class-coloured images with luminance noise, made
    once on the device."""
    g = torch.Generator().manual_seed(a.seed)
    labels = torch.arange(a.batch_size) % a.classes
    cb = torch.tensor([class_chroma(int(c), a.classes)[0] for c in labels])
    cr = torch.tensor([class_chroma(int(c), a.classes)[1] for c in labels])
    y = 128 + 40 * (torch.rand(a.batch_size, 1, CROP, CROP, generator=g) * 2 - 1)
    rgb = torch.cat([y + 1.402 * cr[:, None, None, None],
                     y - 0.344136 * cb[:, None, None, None] - 0.714136 * cr[:, None, None, None],
                     y + 1.772 * cb[:, None, None, None]], dim=1)
    x = rgb.round().clamp(0, 255).to(torch.uint8).to(device)
    labels = labels.to(device)
    while True:
        yield x, labels


def folder(a: argparse.Namespace, device: "torch.device") -> Iterator[Tuple[Any, Any]]:
    """(P): ImageFolder and a DataLoader, torchvision's transform in its
    workers."""
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    t = transforms.Compose([transforms.RandomResizedCrop(CROP), transforms.RandomHorizontalFlip(),
                            transforms.PILToTensor()])
    ds = datasets.ImageFolder(a.dir, transform=t)
    for name, idx in ds.class_to_idx.items():
        if int(name[1:]) != idx:
            raise SystemExit(f"train.py: ImageFolder gave folder {name} class {idx}")
    loader = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers, drop_last=True,
                        pin_memory=device.type == "cuda", persistent_workers=a.workers > 0,
                        generator=torch.Generator().manual_seed(a.seed))
    for _ in itertools.count():
        for x, y in loader:
            yield x, y


def brand(a: argparse.Namespace, device: "torch.device") -> Iterator[Tuple[Any, Any]]:
    """(B): BrandDataset with the gateway's transform; its loader only
    collates (brand.torch.collate_tensors)."""
    from brand.torch import BrandDataset

    # Malloc tuned, as a trainer opts in (brand.Options.tune_malloc).
    ds = BrandDataset(a.url, dataset=a.dataset, batch_size=a.batch_size, seed=a.seed, transform=a.transform,
                      tune_malloc=True)
    loader = ds.loader(num_workers=a.workers, drop_last=True, pin_memory=device.type == "cuda",
                       persistent_workers=a.workers > 0)
    for epoch in itertools.count():
        ds.set_epoch(epoch)
        for step in loader:
            labels = [int(c) for c in step["cls"]]
            for key, c in zip(step["__key__"], labels):
                m = KEY_CLASS.search(key)
                if m is None or int(m.group(1)) != c:
                    raise SystemExit(f"train.py: sample {key!r} came with label {c}")
            yield step["npy"], torch.tensor(labels)


def gpu(a: argparse.Namespace, device: "torch.device") -> Iterator[Tuple[Any, Any]]:
    """(G): brand.GPUTensors, each step's cut JPEGs decoded and finished on
    the device in the trainer's process (brand.torch.finish)."""
    from brand.torch import GPUTensors

    ds = GPUTensors(a.url, a.dataset, batch_size=a.batch_size, seed=a.seed, drop_last=True, device=device,
                    tune_malloc=True)
    loader = ds.loader(num_workers=a.workers, persistent_workers=a.workers > 0)
    for epoch in itertools.count():
        ds.set_epoch(epoch)
        for step in loader:
            for key, c in zip(step.keys, step.labels.tolist()):
                m = KEY_CLASS.search(key)
                if m is None or int(m.group(1)) != c:
                    raise SystemExit(f"train.py: sample {key!r} came with label {c}")
            yield step.images, step.labels


FEEDS = {"synthetic": synthetic, "folder": folder, "brand": brand, "gpu": gpu}


def run(a: argparse.Namespace) -> Dict[str, Any]:
    import torchvision

    device = torch.device(a.device)
    threads = len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    amp = choose_amp(device, a.amp)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(a.seed)
    model = getattr(torchvision.models, a.model)(num_classes=a.classes)
    model = model.to(device, memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
    want = (a.batch_size, 3, CROP, CROP)

    feed = FEEDS[a.mode](a, device)
    wrong = torch.zeros((), dtype=torch.int64, device=device)
    checked = 0
    compute = wait = 0.0
    events: List[Tuple[Any, Any]] = []
    start = cpu0 = gw0 = 0.0
    loss = None
    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            sync(device)
            events.clear()
            compute = wait = 0.0
            cpu0, gw0 = tree_cpu(), process_cpu(a.gateway_pid) if a.gateway_pid else 0.0
            start = time.perf_counter()
        t0 = time.perf_counter()
        x, y = next(feed)
        wait += time.perf_counter() - t0
        if tuple(x.shape) != want or x.dtype != torch.uint8 or tuple(y.shape) != (a.batch_size,):
            raise SystemExit(f"train.py: step {i}: images {tuple(x.shape)} {x.dtype}, labels {tuple(y.shape)}; "
                             f"want {want} uint8 and ({a.batch_size},)")
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        wrong += (class_of(x, a.classes) != y).sum()
        checked += 1
        t1 = time.perf_counter()
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
        xf = ((x.float() - mean) / std).contiguous(memory_format=torch.channels_last)
        with autocast(device, amp):
            loss = loss_fn(model(xf), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if device.type == "cuda":
            end.record()
            events.append((begin, end))
        else:
            compute += time.perf_counter() - t1
    sync(device)
    seconds = time.perf_counter() - start
    cpu = tree_cpu() - cpu0
    gw = process_cpu(a.gateway_pid) - gw0 if a.gateway_pid else 0.0
    if device.type == "cuda":
        compute = sum(b.elapsed_time(e) for b, e in events) / 1e3
    images = a.steps * a.batch_size
    final = float(loss.item()) if loss is not None else float("nan")
    return {
        "mode": a.mode, "model": a.model, "device": str(device), "amp": amp, "threads": threads,
        "cores": sorted(os.sched_getaffinity(0)), "workers": a.workers if a.mode != "synthetic" else 0,
        "batch_size": a.batch_size, "steps": a.steps, "warmup": a.warmup,
        "images": images, "seconds": seconds, "images_per_s": images / seconds if seconds > 0 else 0.0,
        "busy": compute / seconds if seconds > 0 else 0.0, "compute_s": compute, "wait_s": wait,
        "trainer_cpu_s": cpu, "gateway_cpu_s": gw,
        "steps_checked": checked, "images_checked": checked * a.batch_size, "label_errors": int(wrong.item()),
        "loss": final, "torch": torch.__version__, "torchvision": torchvision.__version__,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "",
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=sorted(FEEDS))
    p.add_argument("--model", default="resnet18", help="a torchvision.models constructor: resnet18, resnet50, ...")
    p.add_argument("--device", default="auto", help="cuda, cpu, or auto: cuda where there is one")
    p.add_argument("--amp", default="auto", choices=("auto", "bf16", "off"),
                   help="bf16 autocast; auto: on CUDA with bf16, on a CPU with AMX or AVX-512 BF16")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=50, help="measured steps")
    p.add_argument("--warmup", type=int, default=10, help="steps before the measured ones")
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (folder, brand, gpu)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dir", help="the class-folder tree (folder)")
    p.add_argument("--url", help="the gateway (brand, gpu)")
    p.add_argument("--dataset", help="the gateway's dataset (brand, gpu)")
    p.add_argument("--transform", default="imagenet-train", help="the gateway's pipeline (brand)")
    p.add_argument("--gateway-pid", type=int, default=0, help="the gateway's process, whose CPU is read (brand, gpu)")
    a = p.parse_args()
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    out = run(a)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
