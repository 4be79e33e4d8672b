"""readme_torch.py runs the README's PyTorch loop over a Hugging Face
dataset served in place as it is written, but for the gateway's address,
and reports what its loader handed out. Run by integration/readme_test.go:

    PYTHONPATH=python python3 readme_torch.py SNIPPET.py URL

SNIPPET.py is the README's Python block. Every step the loop's BrandLoader
yields (a brand.Tensors step: a TensorBatch) is seen on its way (its keys,
labels and images' shape, by epoch); one JSON line of them is printed
after the loop ends.
"""

import collections
import json
import sys

import brand.torch as bt


def main():
    snippet, url = sys.argv[1:3]
    with open(snippet) as f:
        src = f.read()
    if "http://localhost:8080" not in src:
        sys.exit("the snippet names no http://localhost:8080")
    src = src.replace("http://localhost:8080", url)

    seen = collections.defaultdict(lambda: collections.defaultdict(list))
    shapes = set()
    iterate = bt.BrandLoader.__iter__

    def watched(loader):
        for batch in iterate(loader):
            if not isinstance(batch, bt.TensorBatch):
                sys.exit(f"the loop's loader yields {type(batch).__name__}, not brand.Tensors' TensorBatch")
            x = batch.images
            shapes.add(f"{x.dtype} {tuple(x.shape[1:])}")
            for k, c in zip(batch.keys, batch.labels.tolist()):
                seen[loader.dataset.epoch][k].append(str(c))
            yield batch

    bt.BrandLoader.__iter__ = watched
    exec(compile(src, "README.md", "exec"), {"__name__": "__main__"})
    print(json.dumps({"epochs": {str(e): dict(keys) for e, keys in seen.items()}, "shapes": sorted(shapes)}))


if __name__ == "__main__":
    main()
