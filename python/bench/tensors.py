#!/usr/bin/env python3
"""One measured pass of a training node's data loading with images, for
Brand's tensors benchmark (``brand-bench tensors``, cmd/brand-bench/internal/bench).

The harness runs this script as a process of its own, pinned to the
training node's core, once per measurement, and reads the JSON object it
prints on stdout. Each mode is what a PyTorch user writes:

``s3-pil``         (1): a ``DataLoader`` over a map-style Dataset doing one
                   boto3 ``get_object`` per image, a ``RandomSampler``, and
                   torchvision's standard training transform in the
                   workers: decode with PIL, ``RandomResizedCrop(224)``,
                   ``RandomHorizontalFlip()``, ``ToTensor()``.
``brand-pil``      (2): the same ``DataLoader`` and transform over
                   ``brand.torch.BrandDataset``'s bytes.
``brand-tensors``  (3): ``BrandDataset`` with the gateway's
                   ``transform=imagenet-train``; the trainer only collates
                   (``brand.torch.collate_tensors``: one uint8
                   ``(64, 3, 224, 224)`` tensor a step).
``pil``            PIL alone, in this process, over the same JPEGs read
                   from disk first: the CPU per image of the work the
                   gateway does in (3) (decode, ``RandomResizedCrop(224)``,
                   flip, ``PILToTensor``: a uint8 CHW tensor), and of (1)'s
                   and (2)'s transform (``ToTensor``: float).

Figures: ``images``, ``seconds`` from the loader's start (its workers'
start included) to the last step, and ``cpu_seconds``, the CPU the
process tree spent in that time: this process's user and system time and
its reaped children's (the DataLoader's workers, which a pass ends by
joining), from /proc/self/stat. Setup (imports, the key list) is not
measured.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from typing import Any, Dict, Iterable, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def tree_cpu() -> float:
    """User and system CPU seconds of this process and its reaped
    children (utime, stime, cutime, cstime of /proc/self/stat)."""
    with open("/proc/self/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def measure(make_steps) -> Dict[str, Any]:
    """Consume the steps make_steps() returns (tensors of images first),
    timing from before the loader starts."""
    images = 0
    cpu0 = tree_cpu()
    start = time.perf_counter()
    for step in make_steps():
        images += len(step[0]) if isinstance(step, (tuple, list)) else len(step["npy"])
    seconds = time.perf_counter() - start
    return {"images": images, "seconds": seconds, "cpu_seconds": tree_cpu() - cpu0}


def train_transform():
    """torchvision's standard training transform."""
    from torchvision import transforms

    return transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                               transforms.ToTensor()])


def label_of(key: str) -> int:
    """A sample's class from its key, c<k>/name."""
    return int(key.split("/", 1)[0][1:])


class S3Images:
    """A map-style Dataset: image i is one GET of its own object, decoded
    and transformed here (in the DataLoader's worker). The boto3 client is
    made in each worker on first use (clients do not survive a fork)."""

    def __init__(self, keys: List[str], bucket: str, endpoint: str):
        self.keys, self.bucket, self.endpoint = keys, bucket, endpoint
        self.transform = train_transform()
        self._s3 = None

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int):
        from PIL import Image

        if self._s3 is None:
            import boto3
            from botocore.config import Config

            self._s3 = boto3.session.Session().client(
                "s3", endpoint_url=self.endpoint, region_name="us-east-1",
                aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
            )
        key = self.keys[i]
        body = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        img = Image.open(io.BytesIO(body)).convert("RGB")
        return self.transform(img), label_of(key.split("/", 1)[1])


def s3_pil(a: argparse.Namespace) -> Dict[str, Any]:
    import torch
    from torch.utils.data import DataLoader, RandomSampler

    with open(a.keys_file) as f:
        keys = [line.strip() for line in f if line.strip()]
    ds = S3Images(keys, a.bucket, a.endpoint)
    sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(a.seed + a.epoch))
    return measure(lambda: DataLoader(ds, batch_size=a.batch_size, sampler=sampler, num_workers=a.workers))


class Decode:
    """BrandDataset's decode for (2): the image bytes through the same
    transform, and the label."""

    def __init__(self):
        self.transform = train_transform()

    def __call__(self, s):
        from PIL import Image

        return self.transform(Image.open(io.BytesIO(s["jpg"])).convert("RGB")), int(s["cls"])


def brand_pil(a: argparse.Namespace) -> Dict[str, Any]:
    from brand.torch import BrandDataset

    # Malloc tuned, as a trainer opts in (brand.Options.tune_malloc).
    ds = BrandDataset(a.url, dataset=a.dataset, batch_size=a.batch_size, seed=a.seed, decode=Decode(),
                      tune_malloc=True)
    ds.set_epoch(a.epoch)
    return measure(lambda: ds.loader(num_workers=a.workers))


def brand_tensors(a: argparse.Namespace) -> Dict[str, Any]:
    from brand.torch import BrandDataset

    ds = BrandDataset(a.url, dataset=a.dataset, batch_size=a.batch_size, seed=a.seed, transform=a.transform,
                      tune_malloc=True)  # opted in, as brand_pil
    ds.set_epoch(a.epoch)
    out = measure(lambda: ds.loader(num_workers=a.workers))  # collate_tensors
    return out


def pil(a: argparse.Namespace) -> Dict[str, Any]:
    """PIL's CPU per image, process time, over the JPEGs under --dir (read
    into memory first): the gateway's work (uint8 CHW out), and the
    trainer's transform (float out)."""
    import torch
    from PIL import Image
    from torchvision import transforms

    files: List[bytes] = []
    for root, _, names in sorted(os.walk(a.dir)):
        for n in sorted(names):
            if n.endswith(".jpg"):
                with open(os.path.join(root, n), "rb") as f:
                    files.append(f.read())
    files = files[: a.limit] if a.limit else files
    torch.manual_seed(a.seed)
    uint8 = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                transforms.PILToTensor()])
    full = train_transform()
    out: Dict[str, Any] = {"images": len(files)}
    for name, t in (("uint8", uint8), ("float", full)):
        c0 = time.process_time()
        for b in files:
            t(Image.open(io.BytesIO(b)).convert("RGB"))
        out[f"{name}_cpu_ms_per_image"] = (time.process_time() - c0) / len(files) * 1e3
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("s3-pil", "brand-pil", "brand-tensors", "pil"))
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epoch", type=int, default=0)
    p.add_argument("--endpoint", help="S3 endpoint (s3-pil); credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    p.add_argument("--bucket")
    p.add_argument("--keys-file", help="the images' object keys, one a line (s3-pil)")
    p.add_argument("--url", help="the gateway (brand-*)")
    p.add_argument("--dataset")
    p.add_argument("--transform", default="imagenet-train", help="the gateway's pipeline (brand-tensors)")
    p.add_argument("--dir", help="the JPEGs (pil)")
    p.add_argument("--limit", type=int, default=0, help="images of --dir (pil; 0: all)")
    a = p.parse_args()
    run = {"s3-pil": s3_pil, "brand-pil": brand_pil, "brand-tensors": brand_tensors, "pil": pil}[a.mode]
    out = run(a)
    out["mode"], out["workers"], out["epoch"] = a.mode, a.workers, a.epoch
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
