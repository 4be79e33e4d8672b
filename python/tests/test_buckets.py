"""brand.Buckets over a real gateway: a bucket job's steps, each one
bucket for every rank, every image that fits once an epoch, its size and
crop as the gateway reports them, and a resume at another world size
and worker count that serves the rest once."""

import os
import sys
import unittest
from fractions import Fraction

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import brand  # noqa: E402
from gateway import PIXELS, bucket_gateway  # noqa: E402

BUCKETS = "32x32,24x40,40x24"
SHAPES = [(32, 32), (24, 40), (40, 24)]
BUDGET = 32 * 32 * 3  # 3 images of 32², 3 of 24×40 (960 each)


def nearest(w, h):
    """The bucket rule, written from docs/http-api.md with exact
    fractions: the bucket (H, W) minimising max(w·H, h·W) / min(w·H,
    h·W), the first of equals."""
    best, bd = None, None
    for i, (H, W) in enumerate(SHAPES):
        a, b = w * H, h * W
        d = Fraction(max(a, b), min(a, b))
        if bd is None or d < bd:
            best, bd = i, d
    return best


def fits(w, h):
    H, W = SHAPES[nearest(w, h)]
    return max(H / h, W / w) <= 2


def steps(ds):
    return list(iter(ds))


class TestBuckets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = bucket_gateway()
        cls.sizes = {k: (w, h) for (name, k), (w, h, _) in PIXELS.items() if name == "img"}

    def dataset(self, world=1, rank=0, **kw):
        return brand.Buckets(self.gw.url, "img", buckets=BUCKETS, budget=BUDGET, seed=4, world=world, rank=rank, **kw)

    def test_steps_are_buckets(self):
        got = {}
        ranks = [steps(self.dataset(2, r)) for r in range(2)]
        self.assertEqual(len(ranks[0]), len(ranks[1]))
        self.assertEqual(len(ranks[0]), len(self.dataset(2, 0)))
        for a, b in zip(*ranks):
            self.assertEqual(a.bucket, b.bucket, "two ranks of a step in two buckets")
            for s in (a, b):
                H, W = s.bucket
                self.assertEqual(tuple(s.images.shape[1:]), (3, H, W))
                self.assertEqual(s.images.dtype, torch.uint8)
                for i, key in enumerate(s.keys):
                    self.assertNotIn(key, got, "an image twice in an epoch")
                    w, h = self.sizes[key]
                    got[key] = s.bucket
                    self.assertEqual(SHAPES[nearest(w, h)], s.bucket, f"{key} ({w}x{h}) in {s.bucket}")
                    self.assertEqual(s.original_sizes[i].tolist(), [h, w])
                    self.assertEqual(s.members["cls"][i], key[1].encode())
        fit = {k for k, (w, h) in self.sizes.items() if fits(w, h)}
        self.assertLessEqual(set(got), fit)
        info = self.dataset(2, 0).epoch_info()["buckets"]
        dropped = sum(b["dropped"] for b in info["buckets"])
        self.assertEqual(len(got) + dropped, len(fit))
        self.assertEqual(info["too_small"], len(self.sizes) - len(fit))

    def test_workers_and_resume_at_another_world(self):
        first = self.dataset(2, 0)
        full = [steps(self.dataset(2, r)) for r in range(2)]
        k = len(full[0]) // 3
        state = first.state_dict(steps=k)
        self.assertEqual(state["legs"], [[2, k]])
        seen = {key for r in range(2) for s in full[r][:k] for key in s.keys}
        rest = []
        for r in range(3):
            ds = self.dataset(3, r)
            ds.load_state_dict(state)
            loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
            rest.append(list(loader))
            self.assertEqual(len(rest[r]), len(ds))
        for a, b, c in zip(*rest):
            self.assertEqual(a.bucket, b.bucket)
            self.assertEqual(b.bucket, c.bucket)
            for s in (a, b, c):
                for key in s.keys:
                    self.assertNotIn(key, seen, "an image served before the resume served again")
                    seen.add(key)
        fit = {k for k, (w, h) in self.sizes.items() if fits(w, h)}
        self.assertLessEqual(seen, fit)
        self.assertGreater(len(seen), len(fit) // 2)

    def test_loader_persistent_workers_follow_the_epoch(self):
        """ds.loader()'s persistent workers read each iteration's epoch and
        position, the steps it hands out are counted, and its steps are
        those of the dataset read in this process."""
        ds = self.dataset()
        loader = ds.loader(num_workers=2, persistent_workers=True)
        for epoch in (0, 1):
            ds.set_epoch(epoch)
            got = [(s.bucket, s.keys) for s in loader]
            here = self.dataset()
            here.set_epoch(epoch)
            want = [(s.bucket, s.keys) for s in steps(here)]
            self.assertEqual(got, want, f"epoch {epoch} through the loader's workers")
            self.assertEqual(ds.state_dict()["legs"], [[1, len(want)]])
        # A position restored mid-epoch: the rest of its images once (its
        # steps planned anew from the images each bucket has left: at the
        # same world size, the same batches, perhaps in another order).
        ds.set_epoch(0)
        full = [tuple(s.keys) for s in steps(self.dataset())]
        state = {**ds.state_dict(), "epoch": 0, "legs": [[1, 3]]}
        ds.load_state_dict(state)
        rest = [tuple(s.keys) for s in loader]
        self.assertEqual(sorted(rest), sorted(full[3:]))

    def test_loader_steps_are_bodies_read_into_blocks(self):
        """ds.loader()'s workers read each batch's body into a shared
        block and hand its images on where they lie: the step is the
        in-process read's, and before the first of them in its
        storage are the block's head and the tar's .npy header (the body
        itself), not a copy's block head alone."""
        here = {tuple(s.keys): s for s in steps(self.dataset())}
        ds = self.dataset()
        got = 0
        for s in ds.loader(num_workers=2):
            h = here[tuple(s.keys)]
            self.assertTrue(torch.equal(s.images, h.images), f"{s.keys}: other pixels")
            # The sizes, crops and flips, made tensors in this process.
            for name in ("original_sizes", "crops", "flips"):
                a, b = getattr(s, name), getattr(h, name)
                self.assertIsInstance(a, torch.Tensor, name)
                self.assertEqual((a.dtype, a.tolist()), (b.dtype, b.tolist()), name)
            off = s.images.storage_offset()
            st = s.images.untyped_storage() if hasattr(s.images, "untyped_storage") else s.images.storage()
            before = torch.empty(0, dtype=torch.uint8).set_(st, 0, (off,), (1,)).numpy().tobytes()
            self.assertEqual(before[:8], b"BRANDBLK", "not on a worker's block")
            self.assertIn(b"\x93NUMPY", before[-200:], "the images copied out of the body")
            got += 1
        self.assertEqual(got, len(here))

    def test_refusals(self):
        with self.assertRaises(TypeError):
            brand.Buckets(self.gw.url, "img", buckets=BUCKETS, budget=BUDGET, batch_size=4)
        # another kind's keyword: the table's refusal, in its words, before any request
        with self.assertRaisesRegex(brand.Refused, "resizes and crops each image to its bucket"):
            brand.Buckets(self.gw.url, "img", buckets=BUCKETS, budget=BUDGET, transform="imagenet-train")
        with self.assertRaisesRegex(ValueError, "balance= has nothing to weigh"):  # the table, before any request
            brand.Buckets(self.gw.url, "img", buckets=BUCKETS, budget=BUDGET, balance="bytes")
        with self.assertRaises(ValueError):
            self.dataset().load_state_dict({**self.dataset().state_dict(), "budget": 1})


if __name__ == "__main__":
    unittest.main()
