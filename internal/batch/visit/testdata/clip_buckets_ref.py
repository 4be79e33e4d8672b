"""clip_buckets_ref.py IN OUT: an independent reference for clip buckets.

IN is JSON: "buckets" [[H, W, T], ...] in the job's order, "stride",
"max_upscale", "videos" {key: path}, and "clips" [{"video": key,
"frames": [presentation-order indexes], "bucket": [H, W], "flip": 0|1}].

OUT gets JSON: each video's bucket by the rule docs/http-api.md states
("Shape buckets", clips), computed from the file as PyAV reads it — its
width, height and frames — with floating logs: the index of the bucket
nearest its aspect ratio among those whose frames (T frames `stride`
apart) it holds, of equally near (within 1e-12) the one of most frames,
then the first listed; -1 when it holds none, -2 when covering its bucket
scales it up by more than max_upscale. And each clip's centre-crop
offsets, and its pixels in OUT.raw: every frame as PyAV 10 decodes it
(to_ndarray rgb24), resized with Pillow's Image.BILINEAR to the smallest
size covering the bucket with the aspect kept (the side that binds to
the bucket's, the other floor(side * scale)), cropped at the centre
(offsets rounded half to even, as torchvision's center_crop), mirrored
when flip, (T, H, W, 3) uint8, the clips one after the other.
"""
import json
import math
import sys

import av
from PIL import Image


def frames_of(path):
    with av.open(path) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def rule(w, h, n, buckets, stride, up):
    best = -1
    for i, (bh, bw, t) in enumerate(buckets):
        if (t - 1) * stride + 1 > n:
            continue
        d = abs(math.log(w / h) - math.log(bw / bh))
        if best < 0 or d < bd - 1e-12 or abs(d - bd) <= 1e-12 and t > buckets[best][2]:
            best, bd = i, d
    if best < 0:
        return -1
    bh, bw, _ = buckets[best]
    if max(bh / h, bw / w) > up:
        return -2
    return best


def cover(w, h, bh, bw):
    if bw * h >= bh * w:
        return bw, h * bw // w
    return w * bh // h, bh


def main(inp, out):
    with open(inp) as f:
        job = json.load(f)
    decoded = {k: frames_of(p) for k, p in job["videos"].items()}
    res = {"buckets": {}, "offsets": []}
    for k, fr in decoded.items():
        h, w, _ = fr[0].shape
        res["buckets"][k] = rule(w, h, len(fr), job["buckets"], job["stride"], job["max_upscale"])
    with open(out + ".raw", "wb") as raw:
        for c in job["clips"]:
            fr = decoded[c["video"]]
            h, w, _ = fr[0].shape
            bh, bw = c["bucket"]
            nw, nh = cover(w, h, bh, bw)
            left, top = int(round((nw - bw) / 2.0)), int(round((nh - bh) / 2.0))
            res["offsets"].append([left, top])
            for i in c["frames"]:
                im = Image.fromarray(fr[i]).resize((nw, nh), Image.BILINEAR)
                im = im.crop((left, top, left + bw, top + bh))
                if c["flip"]:
                    im = im.transpose(Image.FLIP_LEFT_RIGHT)
                raw.write(im.tobytes())
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
