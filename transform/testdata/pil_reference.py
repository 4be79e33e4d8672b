"""Pillow's side of the transform's comparisons and benchmarks.

    pil_reference.py apply CASES.json OUTDIR
        For each case {"image", "pipeline", "seed", "epoch", "sample"}
        writes OUTDIR/<i>.raw: the uint8 HWC pixels torchvision's
        pipeline gives with Pillow — imagenet-train's box and flip from
        brand.transform (the Python reference of the draws), imagenet-eval's
        geometry computed here as torchvision does — so that the Go
        pipelines are checked against an independent implementation.

    pil_reference.py bench DIR OP N REPS
        Times OP over the first N JPEGs of DIR, REPS times, in CPU seconds
        of this process (time.process_time), and prints one JSON line per
        repetition: {"op", "images", "cpu_s"}. OP is decode (open, convert
        to RGB), train (decode, crop, resize to 224 bilinear, flip), eval, or
        train-draft (the same with Image.draft at the largest reduction
        that keeps the crop at least 224 pixels, as PIL's draft allows).
        The crop boxes are drawn before the clock starts. eval is Resize(256)
        and CenterCrop(224).

PYTHONPATH must reach python/ (for brand.transform).
"""

import io
import json
import os
import sys
import time

from PIL import Image

from brand import transform as tf


def train(im, box, flip):
    x, y, w, h = box
    im = im.crop((x, y, x + w, y + h)).resize((224, 224), Image.BILINEAR)
    return im.transpose(Image.FLIP_LEFT_RIGHT) if flip else im


def train_draft(data, box, flip):
    im = Image.open(io.BytesIO(data))
    x, y, w, h = box
    W, H = im.size
    # Ask for the smallest size at which the crop still has 224 pixels a side.
    im.draft("RGB", ((W * 224 + w - 1) // w, (H * 224 + h - 1) // h))
    s = W / im.size[0]
    im = im.convert("RGB").resize((224, 224), Image.BILINEAR, box=(x / s, y / s, (x + w) / s, (y + h) / s))
    return im.transpose(Image.FLIP_LEFT_RIGHT) if flip else im


def evaluate(im):
    W, H = im.size
    short, long = (W, H) if W <= H else (H, W)
    ns, nl = 256, int(256 * long / short)
    nw, nh = (ns, nl) if W <= H else (nl, ns)
    im = im.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - 224) / 2.0)), int(round((nw - 224) / 2.0))
    return im.crop((left, top, left + 224, top + 224))


def bucket(im, H, W):
    """A shape bucket's pipeline (transform.BucketSpec) without a flip:
    resized, aspect kept, to the smallest size covering H×W (in integers),
    cropped at the centre, offsets rounded half to even."""
    w, h = im.size
    if W * h >= H * w:
        nw, nh = W, h * W // w
    else:
        nw, nh = w * H // h, H
    im = im.resize((nw, nh), Image.BILINEAR)
    left, top = round((nw - W) / 2), round((nh - H) / 2)
    return im.crop((left, top, left + W, top + H))


def apply(cases_path, outdir):
    with open(cases_path) as f:
        cases = json.load(f)
    for i, c in enumerate(cases):
        with open(c["image"], "rb") as f:
            im = Image.open(io.BytesIO(f.read())).convert("RGB")
        if c["pipeline"] == "imagenet-train":
            box, flip = tf.imagenet_train_draws(c["seed"], c["epoch"], c["sample"], *im.size)
            out = train(im, box, flip)
        elif c["pipeline"] == "imagenet-eval":
            out = evaluate(im)
        elif c["pipeline"].startswith("bucket:"):
            H, W = (int(x) for x in c["pipeline"][len("bucket:"):].split("x"))
            out = bucket(im, H, W)
        else:
            raise SystemExit("unknown pipeline " + c["pipeline"])
        with open(os.path.join(outdir, "%d.raw" % i), "wb") as f:
            f.write(out.tobytes())


def bench(d, op, n, reps):
    names = sorted(x for x in os.listdir(d) if x.endswith(".jpg"))[:n]
    blobs = []
    for name in names:
        with open(os.path.join(d, name), "rb") as f:
            blobs.append(f.read())
    draws = []
    for i, b in enumerate(blobs):
        W, H = Image.open(io.BytesIO(b)).size
        draws.append(tf.imagenet_train_draws(7, 0, i, W, H))
    for _ in range(reps):
        t0 = time.process_time()
        for b, (box, flip) in zip(blobs, draws):
            if op == "decode":
                Image.open(io.BytesIO(b)).convert("RGB")
            elif op == "train":
                train(Image.open(io.BytesIO(b)).convert("RGB"), box, flip)
            elif op == "train-draft":
                train_draft(b, box, flip)
            elif op == "eval":
                evaluate(Image.open(io.BytesIO(b)).convert("RGB"))
            else:
                raise SystemExit("unknown op " + op)
        print(json.dumps({"op": op, "images": len(blobs), "cpu_s": time.process_time() - t0}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "apply":
        apply(sys.argv[2], sys.argv[3])
    else:
        bench(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
