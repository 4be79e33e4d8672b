"""A generation model's data, as teams train on it (issue 96): 1,000
images (JPEG and PNG, twelve aspect ratios) and 300 clips ffmpeg writes
(four aspect ratios, three lengths, with and without B-frames) in one
bucketed mixture, in two stages — small buckets and weights 0.3/0.7 up
to step STAGE, larger buckets and 0.5/0.5 from it (mix_schedule= and a
staged buckets= and budget=) — read by brand.Buckets at world 2:

- no step of two shapes or two sources (every rank's batch of a step one
  bucket of one source);
- each source's steps within one of its weight's share over each stage;
- every image is Pillow's decode of its file resized to cover its bucket
  (BILINEAR) and cropped where its geometry says, flipped as drawn, byte
  for byte; every clip's frames PyAV's decode of its video, so resized
  and cropped, byte for byte;
- every image and video at most once a pass of its source (a source's
  passes run on across the mixture's epoch: the photos' second pass
  starts within it).

jointgateway.py writes the data and serves it."""

from __future__ import annotations

import io
import json
import os
import sys
import unittest
from fractions import Fraction

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from jointgateway import joint_gateway  # noqa: E402

import brand  # noqa: E402

STAGE = 30
SMALL = {"photos": "16x16,12x20,20x12,12x24,24x12,14x18,18x14", "clips": "16x16x5,12x20x5,20x12x5,16x16x9"}
LARGE = {"photos": "32x32,24x40,40x24,24x48,48x24,28x36,36x28", "clips": "24x24x9,18x32x9,32x18x9,24x24x17"}
BUCKETS = (f"0@photos:{SMALL['photos']};clips:{SMALL['clips']}"
           f"|{STAGE}@photos:{LARGE['photos']};clips:{LARGE['clips']}")
BUDGET = f"0@2560|{STAGE}@10368"
SCHEDULE = f"0:photos:0.3,clips:0.7;{STAGE}:photos:0.5,clips:0.5"
WEIGHTS = [{"photos": Fraction(3, 10), "clips": Fraction(7, 10)}, {"photos": Fraction(1, 2), "clips": Fraction(1, 2)}]


def shapes(lst):
    return [tuple(int(x) for x in s.split("x")) for s in lst.split(",")]


def cover(w, h, H, W):
    """bucket.Crop's size: the smallest covering H x W, aspect kept."""
    if W * h >= H * w:
        return W, h * W // w
    return w * H // h, H


class TestJointBuckets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = joint_gateway()

    def dataset(self, rank):
        return brand.Buckets(self.gw.url, mix_schedule=SCHEDULE, buckets=BUCKETS, budget=BUDGET, seed=8, flip=0.5,
                             world=2, rank=rank, stride=1)

    def test_two_stages(self):
        import numpy
        from PIL import Image

        ranks = [list(self.dataset(r)) for r in range(2)]
        self.assertEqual(len(ranks[0]), len(ranks[1]), "ranks of unequal steps")
        self.assertGreater(len(ranks[0]), STAGE, "the second stage never came")
        counts = [{"photos": 0, "clips": 0}, {"photos": 0, "clips": 0}]
        order = {"photos": [], "clips": []}  # each source's keys as served
        images = clips = 0
        for n, steps in enumerate(zip(*ranks)):
            stage = 1 if n >= STAGE else 0
            src = steps[0].source
            lists = (LARGE if stage else SMALL)[src]
            for s in steps:
                self.assertEqual((s.source, tuple(s.bucket)), (src, tuple(steps[0].bucket)), f"step {n}: two shapes or sources")
                self.assertIn(tuple(s.bucket), shapes(lists), f"step {n} (stage {stage}): bucket {s.bucket} of no {src} list")
                for i, key in enumerate(s.keys):
                    top, left = s.crops[i].tolist()
                    flip = bool(s.flips[i])
                    if src == "photos":
                        H, W = s.bucket
                        im = Image.open(io.BytesIO(self.gw.images[key])).convert("RGB")
                        nw, nh = cover(im.width, im.height, H, W)
                        im = im.resize((nw, nh), Image.BILINEAR).crop((left, top, left + W, top + H))
                        if flip:
                            im = im.transpose(Image.FLIP_LEFT_RIGHT)
                        want = numpy.asarray(im).transpose(2, 0, 1)
                        self.assertTrue((s.images[i].numpy() == want).all(), f"step {n}: image {key} is not Pillow's")
                        images += 1
                        seen_key = (src, key)
                    else:
                        H, W, T = s.bucket
                        js = json.loads(s.members["json"][i])
                        ref = self.gw.reference(js["video"])
                        frames = []
                        for pts in js["pts"]:
                            vw, vh = (int(x) for x in s.original_sizes[i].tolist()[::-1])
                            im = Image.frombytes("RGB", (vw, vh), ref[pts])
                            nw, nh = cover(vw, vh, H, W)
                            im = im.resize((nw, nh), Image.BILINEAR).crop((left, top, left + W, top + H))
                            if flip:
                                im = im.transpose(Image.FLIP_LEFT_RIGHT)
                            frames.append(numpy.asarray(im))
                        self.assertEqual(len(frames), T)
                        self.assertTrue((s.frames[i].numpy() == numpy.stack(frames)).all(),
                                        f"step {n}: clip of {js['video']} is not PyAV's frames resized by Pillow")
                        clips += 1
                        seen_key = (src, js["video"])
                    order[src].append(seen_key[1])
            counts[stage][src] += 1
            done = sum(counts[stage].values())
            for name, c in counts[stage].items():
                self.assertLess(abs(c - WEIGHTS[stage][name] * done), 1, f"step {n}: {name} has {c} of stage {stage}'s {done}")
        # Each source's passes: its keys served, cut where a key comes
        # again. Every pass but the last serves nearly all its images
        # (what no bucket takes and the last stage's partial batches
        # aside), each once: a repeat within a pass would end it early.
        for src, total in (("photos", len(self.gw.images)), ("clips", 300)):
            passes, cur = [], set()
            for k in order[src]:
                if k in cur:
                    passes.append(cur)
                    cur = set()
                cur.add(k)
            for p in passes:
                self.assertGreater(len(p), total * 0.85, f"{src}: a pass of {len(p)} of {total} before a key came again")
        self.assertGreater(images, 100)
        self.assertGreater(clips, 50)
        self.assertTrue(all(v > 0 for c in counts for v in c.values()), counts)


if __name__ == "__main__":
    unittest.main()


class TestJointStageEdit(unittest.TestCase):
    """The same mixture's stages stored with its schedule under a job's
    name (read with buckets="stored", budget="stored"), and a stage
    moved mid-run, as when a run plateaus: the second stage brought
    forward to the first step not read yet ("next", behind the loader's
    read-ahead). The steps before the edit are those of the job
    unedited; the steps from it are of the second stage; an edit from a
    step read is refused, naming the first editable step."""

    @classmethod
    def setUpClass(cls):
        cls.gw = joint_gateway()

    def dataset(self, name):
        return brand.Buckets(self.gw.url, schedule_version="latest", name=name, buckets="stored", budget="stored",
                             seed=8, flip=0.5, world=1, rank=0, ahead=2)

    def test_stage_moved_mid_run(self):
        from brand import edits

        late = STAGE * 3  # the second stage as stored: late in the epoch
        schedule = f"0:photos:0.3,clips:0.7;{late}:photos:0.5,clips:0.5"
        buckets = f"0@photos:{SMALL['photos']};clips:{SMALL['clips']}|{late}@photos:{LARGE['photos']};clips:{LARGE['clips']}"
        budget = f"0@2560|{late}@10368"
        for name in ("joint-plain", "joint-moved"):
            with edits.Editor(self.gw.url, name=name) as ed:
                ed.store_schedule(schedule, buckets=buckets, budget=budget)
        plain = [(s.source, tuple(s.bucket), tuple(s.keys)) for s in self.dataset("joint-plain")]
        ds = self.dataset("joint-moved")
        it = iter(ds)
        got = [next(it) for _ in range(8)]
        with edits.Editor(self.gw.url, name="joint-moved") as ed:
            with self.assertRaises(edits.EditRefused) as cm:
                ed.edit_schedule("5:photos:0.5,clips:0.5", from_step=5, buckets=f"5@photos:{LARGE['photos']};clips:{LARGE['clips']}")
            self.assertGreaterEqual(cm.exception.first_editable_step, 8)  # 8 steps read, and what the loader read ahead
            v = ed.edit_schedule("next:photos:0.5,clips:0.5", buckets=f"next@photos:{LARGE['photos']};clips:{LARGE['clips']}",
                                 budget="next@10368")
        moved = v.from_step
        self.assertLess(moved, late)
        self.assertEqual(v.buckets, f"0@photos:{SMALL['photos']};clips:{SMALL['clips']}|{moved}@photos:{LARGE['photos']};clips:{LARGE['clips']}")
        got += list(it)
        steps = [(s.source, tuple(s.bucket), tuple(s.keys)) for s in got]
        self.assertEqual(steps[:moved], plain[:moved], "a step before the edit changed")
        for n, (src, bucket, _) in enumerate(steps):
            lists = LARGE if n >= moved else SMALL
            self.assertIn(bucket, shapes(lists[src]), f"step {n} (the stage moved to {moved}): {src} in {bucket}")
        self.assertNotEqual(steps[moved:], plain[moved:len(steps)])
