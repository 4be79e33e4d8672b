"""brand.Buckets over a bucketed mixture (``mix=`` with ``buckets=``):
every step one bucket of one source, the sources' steps held to their
weights, each source's images once a pass, each source its own bucket
list; a run's state saved mid-way and resumed at another world size
serves the rest of every source's pass once (its legs count the job's
steps across epochs); and stages, whose buckets change at a stated
step."""

import os
import sys
import unittest
from fractions import Fraction

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import brand  # noqa: E402
from gateway import PIXELS, bucket_mix_gateway  # noqa: E402

LISTS = {"img": [(32, 32), (24, 40), (40, 24)], "art": [(32, 32), (24, 48)]}
BUCKETS = "img:32x32,24x40,40x24;art:32x32,24x48"
BUDGET = 32 * 32 * 3
WEIGHTS = {"img": Fraction(3, 10), "art": Fraction(7, 10)}


def nearest(w, h, shapes):
    best, bd = None, None
    for H, W in shapes:
        a, b = w * H, h * W
        d = Fraction(max(a, b), min(a, b))
        if bd is None or d < bd:
            best, bd = (H, W), d
    return best


class TestBucketMix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = bucket_mix_gateway()
        cls.sizes = {(name, k): (w, h) for (name, k), (w, h, _) in PIXELS.items() if name in LISTS}

    def dataset(self, world=1, rank=0, buckets=BUCKETS, **kw):
        return brand.Buckets(self.gw.url, mix="img:0.3,art:0.7", buckets=buckets, budget=BUDGET, seed=6,
                             world=world, rank=rank, **kw)

    def source(self, s):
        """A step's source (Brand-Mix-Components), its images each in its
        nearest bucket of that source's list."""
        self.assertIn(s.source, LISTS)
        for k in s.keys:
            self.assertEqual(nearest(*self.sizes[(s.source, k)], LISTS[s.source]), s.bucket, f"{s.source}'s {k} in {s.bucket}")
        return s.source

    def test_steps(self):
        ranks = [list(self.dataset(2, r)) for r in range(2)]
        self.assertEqual(len(ranks[0]), len(ranks[1]))
        count = {name: 0 for name in LISTS}
        for n, (a, b) in enumerate(zip(*ranks), 1):
            self.assertEqual(a.bucket, b.bucket, "two ranks of a step in two buckets")
            src = self.source(a)
            self.assertEqual(self.source(b), src, "two ranks of a step of two sources")
            count[src] += 1
            for name, c in count.items():
                self.assertLess(abs(c - WEIGHTS[name] * n), 1, f"after {n} steps {name} has {c}")
        self.assertGreater(min(count.values()), 0)

    def test_resume_at_another_world(self):
        ds = self.dataset(2, 0)
        full = [list(self.dataset(2, r)) for r in range(2)]
        k = len(full[0]) // 3
        state = ds.state_dict(steps=k)
        self.assertEqual(state["legs"], [[2, k]])
        # The lighter source's images are of its pass 0 all the epoch
        # (the weightier one's epoch may start its pass 1).
        seen = {key for r in range(2) for s in full[r][:k] if self.source(s) == "img" for key in s.keys}
        steps = 0
        for r in range(3):
            d = self.dataset(3, r)
            d.load_state_dict(state)
            got = list(d)
            steps = steps or len(got)
            self.assertEqual(len(got), steps, "ranks of unequal steps")
            for s in got:
                if self.source(s) == "img":
                    for key in s.keys:
                        self.assertNotIn(key, seen, "an image served twice: before the resume, or by two ranks")
                        seen.add(key)
        self.assertGreater(steps, 0)

    def test_stages(self):
        """Buckets changed at step 4: the steps from it are of the new
        lists, each image still once a pass."""
        staged = "0@" + BUCKETS + "|4@img:32x32,40x24;art:24x48,32x32"
        got = list(self.dataset(1, 0, buckets=staged))
        self.assertGreater(len(got), 4)
        for n, s in enumerate(got):
            if n >= 4:
                self.assertNotEqual(s.bucket, (24, 40), f"step {n}: a bucket of the first stage's alone")


if __name__ == "__main__":
    unittest.main()
