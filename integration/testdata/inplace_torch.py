"""inplace_torch.py: PyTorch's DataLoader over BrandDataset on a Parquet
dataset in the Hugging Face Hub's layout, served in place, against the same
images packed as tar, both through transform=imagenet-eval: every tensor
must be the same. Run by integration/inplaceimages_test.go:

    PYTHONPATH=python python3 inplace_torch.py URL PAIRS.json

PAIRS.json is {"tar": TAR, "datasets": {NAME: {parquet key: tar key}}}:
which sample of each Parquet dataset holds which tar sample's image. The
Parquet datasets are read with columns=("image", "label"), and with
columns=("image",), whose samples must hold no label; the tar one whole.
Prints one JSON line of figures; exits non-zero on a difference.
"""

import json
import sys

import torch

import brand
from brand.torch import BrandDataset


def tensors(url, dataset, columns):
    """Every sample's tensor and label, by key, over two DataLoader workers."""
    job = brand.Job(dataset=dataset, batch_size=8, seed=7, transform="imagenet-eval", columns=columns)
    ds = BrandDataset(url, brand.Options(job=job))
    out = {}
    for batch in ds.loader(num_workers=2):
        x = batch["npy"]
        if x.dtype != torch.uint8 or tuple(x.shape[1:]) != (3, 224, 224):
            sys.exit(f"{dataset}: a batch of {x.dtype} {tuple(x.shape)}, want uint8 (N, 3, 224, 224)")
        labels = batch.get("cls", [None] * len(x))
        if set(batch) - {"__key__", "npy", "cls"}:
            sys.exit(f"{dataset}: members {sorted(batch)}")
        for k, t, c in zip(batch["__key__"], x, labels):
            if k in out:
                sys.exit(f"{dataset}: {k} twice in an epoch")
            out[k] = (t.clone(), None if c is None else bytes(c))
    return out


def main():
    url, pairs_path = sys.argv[1:3]
    with open(pairs_path) as f:
        pairs = json.load(f)
    tar = tensors(url, pairs["tar"], None)
    figures = {"tar": len(tar)}
    for name, keys in sorted(pairs["datasets"].items()):
        for columns in (("image", "label"), ("image",)):
            got = tensors(url, name, columns)
            if set(got) != set(keys):
                sys.exit(f"{name}: {len(got)} samples, want {len(keys)}; e.g. extra {sorted(set(got) - set(keys))[:3]}, "
                         f"missing {sorted(set(keys) - set(got))[:3]}")
            for pk, tk in keys.items():
                (pt, pc), (tt, tc) = got[pk], tar[tk]
                if not torch.equal(pt, tt):
                    diff = (pt.int() - tt.int()).abs()
                    sys.exit(f"{name}: {pk}'s tensor differs from {tk}'s in {int((diff > 0).sum())} values "
                             f"(max {int(diff.max())})")
                if pc != (tc if "label" in columns else None):
                    sys.exit(f"{name} columns={columns}: {pk}'s label {pc!r}, {tk}'s {tc!r}")
            figures[name] = len(got)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
