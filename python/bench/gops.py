#!/usr/bin/env python3
"""One measured pass of LeRobot's way of loading video samples, for Brand's
GOP benchmark (``brand-bench gops``, cmd/brand-bench/internal/bench).

The harness runs this script as a process of its own, on the cores the
gateway ran on, and reads the JSON object it prints on stdout. The
samples are the gateway's (``--samples-file``, one JSON object a line:
each camera's video file and the PTS of the frames the sample holds of
it, as the gateway's epoch served them). Each mode is a ``DataLoader``
over a map-style Dataset of those samples whose workers decode each
sample's frames on their own, as LeRobotDataset's ``__getitem__`` does
(``decode_video_frames``): per sample and camera the video is opened,
PyAV seeks to the keyframe before the sample's first frame and decodes
until its last, and the frames are stacked into a ``(T, H, W, 3)`` uint8
tensor per camera, collated into a batch:

``pyav``      converts the frames the sample holds alone
              (``to_ndarray(format="rgb24")``): the least a per-sample
              decoder does;
``pyav-all``  converts every frame it decodes, as torchvision's
              ``VideoReader`` (LeRobot's ``pyav`` backend) yields them.

Figures: ``samples``, ``seconds``, ``cpu_seconds`` (the process tree's
user and system CPU over the pass, its reaped DataLoader workers
included), ``startup_cpu_seconds`` (what starting the workers took, as
brand-bench video counts it), and ``frames_decoded`` (every frame the
workers' decoders gave, from each seek's keyframe to the last frame a
sample needs).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from video import measure  # noqa: E402  (the same measurement as brand-bench video's)


class Samples:
    """A map-style Dataset of video samples decoded with PyAV in the
    DataLoader's workers, LeRobot's way; each worker counts the frames it
    decoded into a file of its own under ``counts``."""

    def __init__(self, samples: List[Dict[str, Any]], convert_all: bool, counts: str):
        self.samples, self.convert_all, self.counts = samples, convert_all, counts
        self._decoded = 0

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        import numpy
        import torch

        out = {}
        for k, cam in enumerate(self.samples[i]["cameras"]):
            frames = self._decode(cam["file"], cam["pts"])
            out[f"camera{k}"] = torch.from_numpy(numpy.stack([frames[p] for p in cam["pts"]]))
        with open(os.path.join(self.counts, f"{os.getpid()}.json"), "w") as f:
            json.dump({"frames": self._decoded}, f)
        return out

    def _decode(self, path: str, pts: List[int]) -> Dict[int, Any]:
        import av

        want, last = set(pts), max(pts)
        out: Dict[int, Any] = {}
        with av.open(path) as c:
            s = c.streams.video[0]
            c.seek(min(pts), backward=True, any_frame=False, stream=s)
            for fr in c.decode(s):
                self._decoded += 1
                if self.convert_all or fr.pts in want:
                    a = fr.to_ndarray(format="rgb24")
                    if fr.pts in want:
                        out[fr.pts] = a
                if fr.pts >= last and len(out) == len(want):
                    break
        return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("pyav", "pyav-all"))
    p.add_argument("--samples-file", required=True)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    a = p.parse_args()
    from torch.utils.data import DataLoader

    with open(a.samples_file) as f:
        samples = [json.loads(line) for line in f if line.strip()]
    counts = tempfile.mkdtemp(prefix="brand-gops-counts-")
    ds = Samples(samples, a.mode == "pyav-all", counts)
    out = measure(lambda init: DataLoader(ds, batch_size=a.batch_size, num_workers=a.workers, worker_init_fn=init), "camera0")
    out["samples"] = out.pop("clips")
    out["frames_decoded"] = 0
    for path in glob.glob(os.path.join(counts, "*.json")):
        with open(path) as f:
            out["frames_decoded"] += json.load(f)["frames"]
    out["mode"], out["workers"] = a.mode, a.workers
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
