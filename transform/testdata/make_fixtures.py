"""Writes the decoding fixtures of transform/testdata once, with Pillow.

Run from this directory with Debian's python3-pil (the committed files are
what the Go tests read; rerunning rewrites them identically for a given
Pillow):

    /usr/bin/python3 make_fixtures.py

Each image NAME comes with NAME.pil.npy: what Pillow gives for it the
way torchvision's loader reads it, Image.open(f).convert("RGB") (and, for
the exif-* images, ImageOps.exif_transpose first, in NAME.exif.pil.npy),
as a uint8 HWC array. resize-*.pil.npy hold Pillow's BILINEAR resizes of
photo.png, which the Go resampler must equal exactly.
"""

import io
import math
import struct
import zlib

from PIL import Image, ImageOps


def photo(w, h, seed=1):
    """A photo-like RGB image: smooth gradients, a disc, stripes and noise."""
    im = Image.new("RGB", (w, h))
    px = im.load()
    state = seed
    for y in range(h):
        for x in range(w):
            state = (state * 1103515245 + 12345) & 0x7FFFFFFF
            n = (state >> 16) % 17 - 8
            r = 128 + 100 * math.sin(x / 7.0) * math.cos(y / 11.0)
            g = 255 * x / max(1, w - 1)
            b = 255 * y / max(1, h - 1)
            if (x - w / 3) ** 2 + (y - h / 2) ** 2 < (min(w, h) / 4) ** 2:
                r, g, b = 230, 40, 30
            if (x // 3) % 5 == 0 and y > 2 * h // 3:
                r, g, b = 20, 20, 20
            px[x, y] = tuple(max(0, min(255, int(v + n))) for v in (r, g, b))
    return im


def save_npy(path, im):
    # numpy is not needed: a uint8 HWC array in .npy 1.0 form.
    w, h = im.size
    data = im.tobytes()
    header = "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d, 3), }" % (h, w)
    total = (10 + len(header) + 1 + 63) // 64 * 64
    header = header + " " * (total - 10 - len(header) - 1) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)


def reference(name):
    with Image.open(name) as im:
        save_npy(name + ".pil.npy", im.convert("RGB"))


def exif_bytes(orientation):
    ex = Image.Exif()
    ex[0x0112] = orientation
    return ex.tobytes()


def main():
    base = photo(48, 32)
    base.save("photo.png")
    base.save("photo.jpg", quality=90)  # 4:2:0
    base.save("photo444.jpg", quality=90, subsampling=0)
    base.save("photo422.jpg", quality=90, subsampling=1)
    base.save("progressive.jpg", quality=85, progressive=True)
    reference("photo.png")
    reference("progressive.jpg")
    reference("photo422.jpg")
    reference("photo.jpg")
    reference("photo444.jpg")

    # Pillow's bilinear resizes of photo.png: down, up, mixed, and a crop
    # then resize as torchvision's resized_crop does.
    for name, op in [
        ("resize-down", lambda im: im.resize((20, 13), Image.BILINEAR)),
        ("resize-up", lambda im: im.resize((77, 50), Image.BILINEAR)),
        ("resize-mixed", lambda im: im.resize((30, 45), Image.BILINEAR)),
        ("resize-crop", lambda im: im.crop((5, 3, 5 + 31, 3 + 22)).resize((16, 16), Image.BILINEAR)),
        ("resize-width", lambda im: im.resize((17, 32), Image.BILINEAR)),
    ]:
        save_npy(name + ".pil.npy", op(base))

    base.convert("L").save("gray.jpg", quality=90)
    reference("gray.jpg")
    base.convert("CMYK").save("cmyk.jpg", quality=95)
    reference("cmyk.jpg")

    # EXIF orientations on an asymmetric image: each must equal Pillow's
    # exif_transpose when applied, and the stored pixels when ignored.
    for o in (3, 6, 8):
        name = "exif-%d.jpg" % o
        base.save(name, quality=90, exif=exif_bytes(o))
        reference(name)
        with Image.open(name) as im:
            save_npy(name + ".exif.pil.npy", ImageOps.exif_transpose(im).convert("RGB"))

    # Alpha: a gradient of opacity over the photo; Pillow's convert("RGB")
    # drops alpha.
    rgba = base.convert("RGBA")
    a = Image.linear_gradient("L").resize(base.size)
    rgba.putalpha(a)
    rgba.save("alpha.png")
    reference("alpha.png")
    la = base.convert("L").convert("LA")
    la.putalpha(a)
    la.save("gray-alpha.png")
    reference("gray-alpha.png")
    pal = base.convert("P", palette=Image.ADAPTIVE, colors=16)
    pal.info["transparency"] = 0
    pal.save("palette.png", transparency=0)
    reference("palette.png")

    # Bad input: truncated, corrupt, and headers that claim huge images.
    data = open("photo.jpg", "rb").read()
    open("truncated.jpg", "wb").write(data[: len(data) // 2])
    open("garbage.jpg", "wb").write(b"\xff\xd8\xff\xe0" + bytes(range(256)) * 2)
    # A baseline JPEG header claiming 60000x60000 (SOF0), with no data.
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, 60000, 60000, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    sos = b"\xff\xda" + struct.pack(">HB", 12, 3) + b"\x01\x00\x02\x11\x03\x11" + b"\x00\x3f\x00"
    open("bomb.jpg", "wb").write(b"\xff\xd8" + sof + sos + b"\x00" * 16 + b"\xff\xd9")
    ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    open("bomb.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


if __name__ == "__main__":
    main()
