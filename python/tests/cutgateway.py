"""A real `brand serve`, built with libjpeg-turbo (-tags brand_turbojpeg;
$BRAND_TURBO_BIN, or built here when libjpeg's headers are there), of
photo-like JPEGs of every chroma layout, for the GPU path
(transform=imagenet-train-gpu, docs/transform.md §13).

cut_gateway() serves dataset "photos": PHOTOS JPEGs a layout each in turn
(4:2:0, 4:2:2, 4:4:4, grayscale, progressive 4:2:0), written by Pillow
from smooth random fields (value noise and grain, 64 to 320 pixels a
side), plus a PNG and a CMYK JPEG, which the cut refuses; every sample's
class ("cls") is its index modulo 4. Without libjpeg the tests skip, or
fail with CI=true. Started on first use, stopped when the process exits.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import unittest

from servetest import Fixture, brand_binary, shared

PHOTOS = 60
LAYOUTS = ("420", "422", "444", "gray", "progressive")


def photo(rng: random.Random, w: int, h: int, layout: str) -> bytes:
    """A photo-like JPEG of w×h pixels in layout, by Pillow."""
    from PIL import Image, ImageFilter

    cw, ch = max(2, w // 24), max(2, h // 24)
    coarse = Image.frombytes("RGB", (cw, ch), rng.randbytes(cw * ch * 3)).resize((w, h), Image.BICUBIC)
    grain = Image.frombytes("RGB", (w, h), rng.randbytes(w * h * 3)).filter(ImageFilter.GaussianBlur(1))
    img = Image.blend(coarse, grain, 0.25)
    out = io.BytesIO()
    if layout == "gray":
        img.convert("L").save(out, "JPEG", quality=90)
    elif layout == "progressive":
        img.save(out, "JPEG", quality=90, subsampling=2, progressive=True)
    elif layout == "cmyk":
        img.convert("CMYK").save(out, "JPEG", quality=90)
    else:
        img.save(out, "JPEG", quality=90, subsampling={"444": 0, "422": 1, "420": 2}[layout])
    return out.getvalue()


def write_photos(src: str, n: int, seed: int = 1, sides: "tuple[int, int]" = (64, 320)) -> None:
    """n photos under src (class folders c0..c3), the layouts in turn,
    then a PNG and a CMYK JPEG."""
    rng = random.Random(seed)
    for i in range(n + 2):
        d = os.path.join(src, f"c{i % 4}")
        os.makedirs(d, exist_ok=True)
        w, h = rng.randint(*sides), rng.randint(*sides)
        if i == n:
            from PIL import Image

            b = io.BytesIO()
            Image.open(io.BytesIO(photo(rng, w, h, "444"))).save(b, "PNG")
            name, data = f"p{i:05d}.png", b.getvalue()
        else:
            name, data = f"p{i:05d}.jpg", photo(rng, w, h, "cmyk" if i == n + 1 else LAYOUTS[i % len(LAYOUTS)])
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        with open(os.path.join(d, name.rsplit(".", 1)[0] + ".cls"), "wb") as f:
            f.write(str(i % 4).encode())


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"{why} (CI=true: failing)")
    raise unittest.SkipTest(why)


class CutGateway(Fixture):
    def __init__(self, photos: int = PHOTOS, sides: "tuple[int, int]" = (64, 320)) -> None:
        self.photos, self.sides = photos, sides
        super().__init__("brand-pycut-")

    def start(self) -> None:
        if not os.environ.get("BRAND_TURBO_BIN") and not os.path.exists("/usr/include/jpeglib.h") and \
                subprocess.run(["pkg-config", "--exists", "libjpeg"]).returncode != 0:
            _missing("no libjpeg to build brand with -tags brand_turbojpeg (scripts/install-turbojpeg.sh)")
        binary = self.binary = brand_binary(self.tmp, "BRAND_TURBO_BIN", ["brand_turbojpeg"])
        src = os.path.join(self.tmp, "src")
        write_photos(src, self.photos, sides=self.sides)
        store = os.path.join(self.tmp, "store")
        subprocess.run([binary, "pack", "--src", src, "--dst", "file://" + store, "--chunk-size", "256KiB"],
                       check=True, timeout=120, stdout=subprocess.DEVNULL)
        self.serve(binary, ["--dataset", f"photos={store}"])


@shared
def cut_gateway() -> CutGateway:
    """The shared gateway of the photos, started on first use."""
    return CutGateway()
