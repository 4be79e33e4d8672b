"""The GPU path's pixels against imagenet-train's (docs/transform.md §13):
N photo-like JPEGs of ImageNet's sizes (tests/cutgateway.py's, the
layouts 4:2:0, 4:2:2, 4:4:4, grayscale and progressive 4:2:0 in turn),
served by a gateway built with libjpeg-turbo, read as brand.GPUTensors
finished on the CPU (torchvision's decoder and antialiased resize) and as
brand.Tensors with imagenet-train; prints, per layout, the largest
difference of a level, the 99.9th percentile and the mean.

    cd python && /usr/bin/python3 bench/gpu_pixels.py --photos 2000
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, ".."))

import torch  # noqa: E402

import brand  # noqa: E402
from cutgateway import LAYOUTS, CutGateway  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", type=int, default=2000)
    ap.add_argument("--min-side", type=int, default=300)
    ap.add_argument("--max-side", type=int, default=500)
    ap.add_argument("--seed", type=int, default=3)
    a = ap.parse_args()
    gw = CutGateway(a.photos, (a.min_side, a.max_side))
    try:
        gpu = brand.GPUTensors(gw.url, "photos", batch_size=64, seed=a.seed, device="cpu")
        ref = brand.Tensors(gw.url, "photos", transform="imagenet-train", batch_size=64, seed=a.seed)
        diffs = {k: [] for k in LAYOUTS}
        worst = {k: (0, "") for k in LAYOUTS}
        exact = 0
        for g, w in zip(gpu, ref):
            assert g.keys == w.keys and torch.equal(g.labels, w.labels) and g.images.shape == w.images.shape
            for i, key in enumerate(g.keys):
                n = int(key.rsplit("p", 1)[1])
                d = (g.images[i].int() - w.images[i].int()).abs().flatten()
                if n >= a.photos:
                    assert int(d.max()) == 0, key
                    exact += 1
                    continue
                layout = LAYOUTS[n % len(LAYOUTS)]
                diffs[layout].append(d)
                if int(d.max()) > worst[layout][0]:
                    worst[layout] = (int(d.max()), key)
        print(f"{a.photos} photos of {a.min_side}-{a.max_side} px; {exact} refused by the cut and equal")
        print("| layout | photos | max abs diff | 99.9th percentile | mean abs diff | worst image's mean |")
        print("| --- | --- | --- | --- | --- | --- |")
        for k, ds in diffs.items():
            allv = torch.cat(ds).float()
            q = torch.quantile(allv[torch.randperm(allv.numel(), generator=torch.Generator().manual_seed(0))[:1_000_000]], 0.999)
            per = max(float(d.float().mean()) for d in ds)
            print(f"| {k} | {len(ds)} | {worst[k][0]} ({worst[k][1]}) | {float(q):.0f} | {float(allv.mean()):.3f} | {per:.2f} |")
    finally:
        gw.stop()


if __name__ == "__main__":
    main()
