"""A named bucket job's exclusion through brand.Buckets' editor
(``ds.edits().exclude``): refused from a step read, naming the first
editable one; from a later step it cuts the epoch there — the steps
before are the unedited job's, no excluded image is served from the
step on (nor in the next epoch), none twice in the epoch — and a run
resumed at another world size from a saved state after the step serves
the rest once, none excluded (docs/http-api.md, "Edits of a bucket
job")."""

import os
import sys
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import brand  # noqa: E402
from brand import edits  # noqa: E402
from gateway import bucket_gateway  # noqa: E402

BUCKETS = "32x32,24x40,40x24"
BUDGET = 32 * 32 * 3


class TestBucketEdits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = bucket_gateway()

    def dataset(self, world=2, rank=0, **kw):
        return brand.Buckets(self.gw.url, "img", buckets=BUCKETS, budget=BUDGET, seed=11, world=world, rank=rank, **kw)

    def epoch(self, name, world=2, epoch=0):
        """Every rank's steps of an epoch: each step's bucket and keys."""
        out = None
        for r in range(world):
            ds = self.dataset(world, r, name=name)
            ds.set_epoch(epoch)
            steps = [(s.bucket, list(s.keys)) for s in ds]
            out = out or [(b, []) for b, _ in steps]
            self.assertEqual(len(steps), len(out))
            for m, (b, keys) in enumerate(steps):
                self.assertEqual(b, out[m][0], f"step {m}: two ranks in two buckets")
                out[m][1].extend(keys)
        return out

    def test_exclusion_cuts_the_epoch(self):
        before = self.epoch(None)  # the job unedited (no name: nothing recorded as served)
        self.assertGreater(len(before), 12)
        name = "bk-" + uuid.uuid4().hex[:8]
        ds = self.dataset(2, 0, name=name)
        it = iter(ds)
        for _ in range(4):  # rank 0 reads steps 0 to 3
            next(it)
        it.close()
        ed = edits.of(ds)
        cut = 6
        gone = {before[0][1][0], before[3][1][0]} | {keys[0] for _, keys in before[cut + 1:]}
        with self.assertRaises(edits.EditRefused) as refused:
            ed.exclude(sorted(gone), from_step=2)
        self.assertEqual(refused.exception.first_editable_step, 4)
        made = ed.exclude(sorted(gone), from_step=cut)
        self.assertEqual((made.epoch, made.pass_step, made.from_position, made.samples), (0, cut, 2 * cut, len(gone)))
        after = self.epoch(name)
        self.assertEqual(after[:cut], before[:cut], "the steps before the exclusion's changed")
        self.assertLess(len(after), len(before))
        seen = set()
        for m, (_, keys) in enumerate(after):
            for k in keys:
                self.assertNotIn(k, seen, f"{k} served twice in the epoch")
                seen.add(k)
                if m >= cut:
                    self.assertNotIn(k, gone, f"{k}, excluded from step {cut}, served at step {m}")
        for m, (_, keys) in enumerate(self.epoch(name, epoch=1)):
            self.assertFalse(gone & set(keys), f"an excluded image served at step {m} of epoch 1")

        # Resumed at world 3 from a state saved after step 9 at world 2.
        state = self.dataset(2, 0, name=name).state_dict(steps=9)
        self.assertEqual(state["legs"], [[2, 9]])
        rest = None
        for r in range(3):
            d = self.dataset(3, r, name=name)
            d.load_state_dict(state)
            got = [list(s.keys) for s in d]
            rest = rest or [[] for _ in got]
            for m, keys in enumerate(got):
                rest[m].extend(keys)
        served = {k for _, keys in after[:9] for k in keys}
        for m, keys in enumerate(rest):
            for k in keys:
                self.assertNotIn(k, served, f"{k} served again after the resume (step {m})")
                self.assertNotIn(k, gone, f"{k}, excluded, served after the resume")
                served.add(k)


if __name__ == "__main__":
    unittest.main()


class TestStagedResume(unittest.TestCase):
    """A staged job's state names its global steps from its first (legs
    across epochs): resumed at another world inside the epoch its stage
    starts in, every step from the stage's global step on is of the
    stage's buckets, and the epoch's images are served once."""

    @classmethod
    def setUpClass(cls):
        cls.gw = bucket_gateway()

    def test_resume_at_another_world(self):
        a, b = "32x32,24x40,40x24", "24x48,48x24"
        e0 = len(brand.Buckets(self.gw.url, "img", buckets=a, budget=BUDGET, seed=5, world=2, rank=0))
        stage = e0 + 4
        staged = f"0@{a}|{stage}@{b}"

        def dataset(world, rank):
            return brand.Buckets(self.gw.url, "img", buckets=staged, budget=BUDGET, seed=5, world=world, rank=rank)

        ds = dataset(2, 0)
        self.assertEqual(len(list(ds)), e0, "the staged job's epoch 0 is its first stage's")
        ds.set_epoch(1)
        k = 2
        it = iter(ds)
        before = [next(it) for _ in range(k)]
        it.close()
        state = ds.state_dict()
        self.assertEqual((state["epoch"], state["legs"]), (1, [[2, e0 + k]]))
        seen = {key for s in before for key in s.keys}
        steps = None
        for r in range(3):
            d = dataset(3, r)
            d.load_state_dict(state)
            got = list(d)
            steps = steps if steps is not None else len(got)
            self.assertEqual(len(got), steps)
            for m, s in enumerate(got):
                g = e0 + k + m
                self.assertEqual(f"{s.bucket[0]}x{s.bucket[1]}" in b.split(","), g >= stage,
                                 f"global step {g} is of bucket {s.bucket}; the second stage starts at {stage}")
                for key in s.keys:
                    self.assertNotIn(key, seen, f"{key} served twice in epoch 1")
                    seen.add(key)
        self.assertGreater(steps, 4)
