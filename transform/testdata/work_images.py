#!/usr/bin/env python3
"""Writes images of the kinds whose decoding memory Brand estimates
(transform.Footprint), for the tests that hold the estimate to what the
decoders really take: JPEGs of every layout Pillow writes — progressive
or not, 4:2:0 or 4:4:4, gray, CMYK — and PNGs, each a smooth picture of
WIDTH×HEIGHT that compresses to little (the issue's 8192×8192 progressive
JPEG was 770 KB).

    work_images.py DIR WIDTH HEIGHT KIND...

KINDs: prog420 prog444 base420 base444 gprog gbase cmyk cmykprog
rgb8png rgba8png palpng. Each is written to DIR/KIND.jpg or DIR/KIND.png.
"""
import sys

from PIL import Image


def picture(w, h, mode):
    base = Image.linear_gradient("L").resize((w, h))
    if mode == "L":
        return base
    return Image.merge("RGB", (base, base.transpose(Image.ROTATE_90).resize((w, h)),
                               base.transpose(Image.FLIP_LEFT_RIGHT)))


def main():
    out, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rgb = picture(w, h, "RGB")
    gray = picture(w, h, "L")
    jpeg = {
        "prog420": (rgb, dict(progressive=True, subsampling=2)),
        "prog444": (rgb, dict(progressive=True, subsampling=0)),
        "base420": (rgb, dict(subsampling=2)),
        "base444": (rgb, dict(subsampling=0)),
        "gprog": (gray, dict(progressive=True)),
        "gbase": (gray, {}),
        "cmyk": (rgb.convert("CMYK"), {}),
        "cmykprog": (rgb.convert("CMYK"), dict(progressive=True)),
    }
    png = {
        "rgb8png": rgb,
        "rgba8png": rgb.convert("RGBA"),
        "palpng": rgb.convert("P"),
    }
    for kind in sys.argv[4:]:
        if kind in jpeg:
            im, opt = jpeg[kind]
            im.save(f"{out}/{kind}.jpg", quality=90, **opt)
        elif kind in png:
            png[kind].save(f"{out}/{kind}.png", compress_level=1)
        else:
            sys.exit(f"work_images.py: unknown kind {kind}")


if __name__ == "__main__":
    main()
