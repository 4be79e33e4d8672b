"""A real `brand serve` of images and videos, for a bucketed mixture of
both (test_joint_buckets): generation models train on images and clips
in one run.

joint_gateway() writes PHOTOS images with Pillow (JPEG and PNG, of
twelve aspect ratios, 20 to 60 pixels a side), packs them with their
sizes (``brand pack --sizes``) as dataset "photos"; writes VIDEOS videos
with ffmpeg (four aspect ratios, three lengths, H.264 with and without
B-frames) and indexes them in place as dataset "clips"; and serves both
from a brand built with libavcodec and libjpeg-turbo (-tags
brand_libav,brand_turbojpeg; $BRAND_JOINT_BIN), whose JPEG decode is
Pillow's, libjpeg-turbo's, bit for bit. reference(key) is PyAV's decode
of a video's frames, by PTS. Without ffmpeg, the libraries, Pillow or
PyAV the tests skip, or fail with CI=true. Started on first use, stopped
when the process exits.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import subprocess
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Tuple

from servetest import Fixture, brand_binary, shared

PHOTOS = 1000
VIDEOS = 300
# Twelve aspect ratios (width:height) of the images.
RATIOS = [(1, 1), (4, 3), (3, 4), (16, 9), (9, 16), (3, 2), (2, 3), (2, 1), (1, 2), (5, 4), (4, 5), (21, 9)]
# The videos' sizes (four aspect ratios: 16:9, 9:16, 4:3, 1:1), lengths
# in frames at 10 fps, and B-frames or none.
SIZES = [(32, 18), (18, 32), (32, 24), (24, 24)]
LENGTHS = [9, 17, 33]
BFRAMES = [0, 2]


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"{why} (CI=true: failing)")
    raise unittest.SkipTest(why)


def photo(i: int) -> Tuple[str, int, int]:
    """Photo i's extension and displayed size."""
    a, b = RATIOS[i % len(RATIOS)]
    s = 20 + (i * 7) % 21  # the short side, 20 to 40
    w, h = (s * a // b, s) if a >= b else (s, s * b // a)
    return ("png" if i % 3 == 0 else "jpg"), max(w, 8), max(h, 8)


def video(i: int) -> Tuple[Tuple[int, int], int, int]:
    """Video i's size, frames and B-frames."""
    return SIZES[i % len(SIZES)], LENGTHS[(i // len(SIZES)) % len(LENGTHS)], BFRAMES[(i // 12) % 2]


class JointGateway(Fixture):
    def __init__(self) -> None:
        self._refs: Dict[str, Dict[int, bytes]] = {}
        self.images: Dict[str, bytes] = {}  # photos' key -> file bytes
        super().__init__("brand-pyjoint-")

    def start(self) -> None:
        if shutil.which("ffmpeg") is None:
            _missing("no ffmpeg (scripts/ensure-ffmpeg.sh)")
        if not os.environ.get("BRAND_JOINT_BIN") and subprocess.run(
                ["pkg-config", "--exists", "libavcodec", "libswscale", "libavutil"]).returncode != 0:
            _missing("no libavcodec to build brand with -tags brand_libav (scripts/install-libav.sh)")
        if not os.environ.get("BRAND_JOINT_BIN") and not os.path.exists("/usr/include/jpeglib.h"):
            _missing("no libjpeg to build brand with -tags brand_turbojpeg (scripts/install-turbojpeg.sh)")
        try:
            from PIL import Image  # noqa: PLC0415 - the images' writer
        except ImportError:
            _missing("no Pillow (scripts/ensure-pil.sh)")
        binary = self.binary = brand_binary(self.tmp, "BRAND_JOINT_BIN", ["brand_libav", "brand_turbojpeg"])
        rng = random.Random(11)
        src = os.path.join(self.tmp, "photos")
        for i in range(PHOTOS):
            ext, w, h = photo(i)
            key = f"c{i % 4}/p{i:04d}"
            # A gradient with noise: JPEG's blocks and PNG's filters see
            # an image, not a flat field.
            px = bytes((x * 255 // w + rng.randrange(32)) % 256 if c == 0 else (y * 255 // h + rng.randrange(32)) % 256
                       if c == 1 else rng.randrange(256) for y in range(h) for x in range(w) for c in range(3))
            b = io.BytesIO()
            Image.frombytes("RGB", (w, h), px).save(b, "PNG" if ext == "png" else "JPEG", quality=90)
            os.makedirs(os.path.join(src, os.path.dirname(key)), exist_ok=True)
            with open(os.path.join(src, f"{key}.{ext}"), "wb") as f:
                f.write(b.getvalue())
            with open(os.path.join(src, f"{key}.cls"), "wb") as f:
                f.write(str(i % 4).encode())
            self.images[key] = b.getvalue()
        photos = os.path.join(self.tmp, "photos-store")
        subprocess.run([binary, "pack", "--src", src, "--dst", "file://" + photos, "--chunk-size", "64KiB", "--sizes"],
                       check=True, timeout=300, stdout=subprocess.DEVNULL)
        self.src = os.path.join(self.tmp, "videos")

        def write(i: int) -> None:
            (w, h), n, bf = video(i)
            path = os.path.join(self.src, f"c{i % 3}", f"v{i:03d}.mp4")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi", "-i",
                            f"testsrc2=size={w}x{h}:rate=10", "-frames:v", str(n), "-c:v", "libx264", "-bf", str(bf),
                            "-g", "8", "-pix_fmt", "yuv420p", "-map_metadata", "-1", "-fflags", "+bitexact", path],
                           check=True, timeout=120)

        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(write, range(VIDEOS)))
        clips = os.path.join(self.tmp, "clips-store")
        subprocess.run([binary, "index", "--src", self.src, "--dst", clips, "--chunk-size", "64KiB"], check=True,
                       timeout=300, stdout=subprocess.DEVNULL)
        self.serve(binary, ["--dataset", f"photos={photos}", "--dataset", f"clips={clips}"])

    def reference(self, key: str) -> Dict[int, bytes]:
        """PyAV's decode of the video ``key``: each frame's rgb24 bytes by
        PTS (one thread, as videogateway's)."""
        if key not in self._refs:
            try:
                import av  # noqa: PLC0415 - only the reference needs it
            except ImportError:
                _missing("no PyAV (scripts/ensure-pyav.sh)")
            with av.open(os.path.join(self.src, key)) as c:
                s = c.streams.video[0]
                s.codec_context.thread_count = 1
                s.thread_type = "NONE"
                self._refs[key] = {f.pts: f.to_ndarray(format="rgb24").tobytes() for f in c.decode(s)}
        return self._refs[key]


@shared
def joint_gateway() -> JointGateway:
    """The shared gateway of images and videos, started on first use."""
    return JointGateway()
