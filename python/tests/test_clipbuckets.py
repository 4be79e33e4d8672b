"""brand.Buckets over a tree of videos (clip buckets, HxWxT) against a
real gateway decoding them: each step a ClipBucketBatch of one bucket,
(B, T, H, W, 3) frames that are PyAV's resized to cover the bucket and
cropped at the centre by Pillow, every video once an epoch, len() the
steps, and a state that resumes the rest at another world size."""

from __future__ import annotations

import unittest

from gateway import HERE  # noqa: F401 - puts the package on the path
from videogateway import video_gateway

import brand

# The three 64x48 videos of 75 frames: 4:3, nearer the square buckets
# than the 1:2 one; of those, the longest (16 frames at stride 2 span 31
# of their 75). Resized to cover 24x24 they are 32x24, cropped 4 from
# the left.
BUCKETS = "24x24x16,32x16x16,24x24x8"
BUDGET = 24 * 24 * 16  # one clip of 16 frames a rank's step


def reference(gw, js, h, w, top, left, flip):
    """The clip's frames as PyAV decodes them (by PTS), resized with
    Pillow's BILINEAR to cover h x w and cropped at (left, top)."""
    import numpy
    from PIL import Image

    ref = gw.reference(js["video"])
    out = []
    for pts in js["pts"]:
        im = Image.frombytes("RGB", (64, 48), ref[pts])
        nw, nh = (w, 48 * w // 64) if w * 48 >= h * 64 else (64 * h // 48, h)
        im = im.resize((nw, nh), Image.BILINEAR).crop((left, top, left + w, top + h))
        if flip:
            im = im.transpose(Image.FLIP_LEFT_RIGHT)
        out.append(numpy.asarray(im))
    return numpy.stack(out)


class TestClipBuckets(unittest.TestCase):
    def dataset(self, world=1, rank=0):
        return brand.Buckets(video_gateway().url, "vid", buckets=BUCKETS, budget=BUDGET, seed=3, stride=2,
                             flip=0.5, world=world, rank=rank)

    def test_steps_are_clip_buckets(self):
        import json

        import torch
        from brand.torch import ClipBucketBatch

        gw = video_gateway()
        ds = self.dataset()
        steps = list(iter(ds))
        self.assertEqual(len(steps), len(ds))
        self.assertEqual(len(steps), 3)  # one clip a video
        videos = set()
        for s in steps:
            self.assertIsInstance(s, ClipBucketBatch)
            self.assertEqual(tuple(s.bucket), (24, 24, 16))
            self.assertEqual(s.frames.dtype, torch.uint8)
            self.assertEqual(tuple(s.frames.shape), (1, 16, 24, 24, 3))
            self.assertEqual(s.original_sizes.tolist(), [[48, 64]])
            js = json.loads(s.members["json"][0])
            videos.add(js["video"])
            top, left = s.crops[0].tolist()
            self.assertEqual((top, left), (0, 4))
            want = reference(gw, js, 24, 24, top, left, bool(s.flips[0]))
            self.assertTrue((s.frames[0].numpy() == want).all(), f"{js['video']}: not PyAV's frames resized by Pillow")
        self.assertEqual(len(videos), 3)

    def test_resume_at_another_world(self):
        ds = self.dataset()
        it = iter(ds)
        first = next(it)
        state = ds.state_dict()
        rest = []
        for r in range(2):
            d = self.dataset(world=2, rank=r)
            d.load_state_dict(state)
            rest.append([s.keys[0] for s in d])
        # Two videos left: one step at world 2, a clip each rank.
        self.assertEqual([len(r) for r in rest], [1, 1])
        keys = {first.keys[0], rest[0][0], rest[1][0]}
        self.assertEqual(len(keys), 3)


if __name__ == "__main__":
    unittest.main()
