"""reference_clips.py: recomputes testdata/clip_draws.json's random draws
with python/brand/transform.py (the standard-library reference written
from docs/transform.md) and prints the entries that disagree: a clip's
draws are its sample key's, as an image's are.

Run from transform/video with PYTHONPATH=../../python.
"""
import json
import sys

from brand import transform as t

SCALES = {"video-train": (0.08, 1.0), "imagenet-train": (0.08, 1.0), "lerobot-crop": (0.9, 1.0)}
RATIOS = {"video-train": (3 / 4, 4 / 3), "imagenet-train": (3 / 4, 4 / 3), "lerobot-crop": (1.0, 1.0)}
FLIPS = {"video-train", "imagenet-train"}


def main():
    with open("testdata/clip_draws.json") as f:
        entries = json.load(f)
    bad = 0
    checked = 0
    for e in entries:
        name = e["pipeline"]
        if name not in SCALES:
            continue
        seed, epoch, sample = t.sample_key(e["job_seed"], e["dataset"], e["epoch"], e["sample"])
        box, _ = t.random_resized_crop_box(seed, epoch, sample, 0, e["width"], e["height"],
                                           SCALES[name], RATIOS[name])
        want = {"X": box.x, "Y": box.y, "W": box.w, "H": box.h}
        flips = [t.flip(seed, epoch, sample, 1)] if name in FLIPS else None
        checked += 1
        if e["draws"]["crops"] != [want] or e["draws"]["flips"] != flips:
            bad += 1
            print("differs:", json.dumps(e), want, flips)
    print("checked", checked)
    sys.exit(1 if bad else 0)


main()
