"""pil_clips.py CASES OUTDIR: clips made from PyAV's frames with Pillow, as
torchvision's RandomResizedCrop and RandomHorizontalFlip make them from a
PIL image: the reference package video's clips are held to.

CASES is a JSON list; each case names a pyav_dump.py directory, the frames'
indexes in its frames.raw (in clip order), and the geometry package video
drew once for the clip: a crop box [x, y, w, h], an output size [w, h] and
whether it flips. Each case's clip is written to OUTDIR/N.raw as
(T, H, W, 3) uint8 bytes: every frame cropped, resized with
Image.BILINEAR (Pillow's antialiased bilinear, what torchvision calls on
PIL images) and mirrored alike.
"""
import json
import os
import sys

from PIL import Image


def main(cases_path, out):
    with open(cases_path) as f:
        cases = json.load(f)
    raws = {}
    for n, c in enumerate(cases):
        d = c["dump"]
        if d not in raws:
            with open(os.path.join(d, "frames.raw"), "rb") as f:
                raws[d] = f.read()
        w, h = c["width"], c["height"]
        x, y, bw, bh = c["box"]
        ow, oh = c["size"]
        parts = []
        for i in c["frames"]:
            frame = raws[d][i * w * h * 3:(i + 1) * w * h * 3]
            im = Image.frombytes("RGB", (w, h), frame)
            im = im.crop((x, y, x + bw, y + bh)).resize((ow, oh), Image.BILINEAR)
            if c["flip"]:
                im = im.transpose(Image.FLIP_LEFT_RIGHT)
            parts.append(im.tobytes())
        with open(os.path.join(out, "%d.raw" % n), "wb") as f:
            f.write(b"".join(parts))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
