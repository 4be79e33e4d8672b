"""Pillow's resize, the reference of vision.Writer's images: for each
case of a JSON file, [path, width, height], the image opened and
converted to RGB as torchvision's loader does, resized to width×height
with Image.BILINEAR (what torchvision's Resize([h, w]) calls), written as
CHW uint8 bytes to OUT/K.raw."""
import json
import os
import sys

from PIL import Image

cases = json.load(open(sys.argv[1]))
for k, (path, w, h) in enumerate(cases):
    im = Image.open(path).convert("RGB").resize((w, h), Image.BILINEAR)
    raw = im.tobytes()  # HWC
    chw = bytearray(len(raw))
    n = w * h
    for c in range(3):
        chw[c * n:(c + 1) * n] = raw[c::3]
    with open(os.path.join(sys.argv[2], f"{k}.raw"), "wb") as f:
        f.write(chw)
