"""A real `brand serve` of a tree of videos, for the clip tests.

video_gateway() writes VIDEOS small H.264 and VP9 videos with ffmpeg (the
test videos' independent writer, scripts/ensure-ffmpeg.sh) into class
folders, indexes them in place with `brand index`, and serves them as
dataset "vid" from a brand built with libavcodec (-tags brand_libav;
$BRAND_VIDEO_BIN, or built here when scripts/install-libav.sh's
libraries are there). reference(key) is PyAV's decode of a video's
frames, by PTS (scripts/ensure-pyav.sh). Without ffmpeg, the libraries or
PyAV the tests skip, or fail with CI=true. Started on first use, stopped
when the process exits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import unittest
from typing import Dict

from servetest import Fixture, brand_binary, shared

# key -> ffmpeg's encoding options: 3 s of testsrc2 at 25 fps, 64x48.
VIDEOS = {
    "cat/a.mp4": ["-c:v", "libx264", "-bf", "2", "-g", "25", "-pix_fmt", "yuv420p"],
    "cat/b.mp4": ["-c:v", "libx264", "-bf", "0", "-g", "10", "-pix_fmt", "yuv420p", "-movflags", "+faststart"],
    "dog/c.mp4": ["-c:v", "libvpx-vp9", "-g", "25", "-deadline", "realtime", "-cpu-used", "8"],
}
FRAMES = 75


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"{why} (CI=true: failing)")
    raise unittest.SkipTest(why)


class VideoGateway(Fixture):
    def __init__(self) -> None:
        self._refs: Dict[str, Dict[int, bytes]] = {}
        super().__init__("brand-pyvideo-")

    def start(self) -> None:
        if shutil.which("ffmpeg") is None:
            _missing("no ffmpeg (scripts/ensure-ffmpeg.sh)")
        if not os.environ.get("BRAND_VIDEO_BIN") and subprocess.run(
                ["pkg-config", "--exists", "libavcodec", "libswscale", "libavutil"]).returncode != 0:
            _missing("no libavcodec to build brand with -tags brand_libav (scripts/install-libav.sh)")
        binary = self.binary = brand_binary(self.tmp, "BRAND_VIDEO_BIN", ["brand_libav"])
        self.src = os.path.join(self.tmp, "videos")
        for key, opts in VIDEOS.items():
            path = os.path.join(self.src, key)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi", "-i",
                            "testsrc2=size=64x48:rate=25:duration=3", *opts, "-map_metadata", "-1",
                            "-fflags", "+bitexact", path], check=True, timeout=120)
        store = os.path.join(self.tmp, "index")
        subprocess.run([binary, "index", "--src", self.src, "--dst", store, "--chunk-size", "8KiB"], check=True,
                       timeout=120, stdout=subprocess.DEVNULL)
        self.serve(binary, ["--dataset", f"vid={store}"])

    def reference(self, key: str) -> Dict[int, bytes]:
        """PyAV's decode of the video ``key``: each frame's
        ``to_ndarray(format="rgb24")`` bytes by PTS."""
        if key not in self._refs:
            try:
                import av  # noqa: PLC0415 - only the reference needs it
            except ImportError:
                _missing("no PyAV (scripts/ensure-pyav.sh)")
            with av.open(os.path.join(self.src, key)) as c:
                # One thread: a decoder's threads are not there in a
                # DataLoader worker forked later, and where the garbage
                # collector frees this decoder's objects in a worker, it
                # joins them there and the worker dies (SIGSEGV in
                # avpriv_slicethread_free, seen with test_agree,
                # test_client and test_clips run in one process).
                s = c.streams.video[0]
                s.codec_context.thread_count = 1
                s.thread_type = "NONE"
                self._refs[key] = {f.pts: f.to_ndarray(format="rgb24").tobytes() for f in c.decode(s)}
        return self._refs[key]


@shared
def video_gateway() -> VideoGateway:
    """The shared video gateway, started on first use."""
    return VideoGateway()
