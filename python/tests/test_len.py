"""len() of a BrandDataset and a BrandLoader against real gateways: the
steps a rank's pass over the epoch holds, equal to those it iterates, at
world sizes 1, 2 and 3, with and without drop_last, with and without
DataLoader workers (a job's drop_last then drops the partial batch of
world × workers, so the count depends on them), for token and clip jobs,
after a resume (len stays the whole pass's; ``steps(remaining=True)`` is
what the resumed pass yields) and after an exclusion shrinks the epoch
mid-pass.

The reproduction: ``len(loader)`` raised TypeError (an IterableDataset
has no length), which broke learning-rate schedulers, progress bars and
Lightning's step counting."""

import dataclasses
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import gateway  # noqa: E402
from tokengateway import token_gateway  # noqa: E402

import brand  # noqa: E402
from brand.torch import BrandDataset  # noqa: E402

# 300 samples of dataset "t" in batches of 9: at world 2 a global batch of
# 18, 16 whole ones and 12 samples over (rank 0 takes 9, rank 1 3); at
# world 3, 27: 11 whole and 3 over (rank 0 takes 3, ranks 1 and 2 none);
# at world 8, 72: 4 whole and 12 over (rank 0 takes 9, rank 1 3, the
# others none).
B = 9


def items(it):
    return sum(1 for _ in it)


class TestLen(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = gateway()

    def dataset(self, **kw):
        kw.setdefault("ahead", 1)
        return BrandDataset(self.gw.url, dataset="t", seed=3, batch_size=B, **kw)

    def test_worlds_and_drop_last(self):
        n = len(self.gw.files)
        # (world, drop_last) -> each rank's steps.
        table = {(1, False): [34], (1, True): [33], (2, False): [17, 17], (2, True): [16, 16],
                 (3, False): [12, 11, 11], (3, True): [11, 11, 11],
                 (8, False): [5, 5, 4, 4, 4, 4, 4, 4], (8, True): [4] * 8}
        for world in (1, 2, 3, 8):
            for drop in (False, True):
                total = 0
                for rank in range(world):
                    with self.subTest(world=world, drop_last=drop, rank=rank):
                        ds = self.dataset(world=world, rank=rank, drop_last=drop, batches=True)
                        loader = ds.loader()
                        want = len(loader)
                        self.assertEqual(len(ds), want)
                        self.assertEqual(want, table[world, drop][rank])
                        self.assertEqual(items(loader), want)
                        # Samples: len(dataset) counts what it yields, the
                        # loader's steps are batches of them.
                        sds = self.dataset(world=world, rank=rank, drop_last=drop)
                        got = items(iter(sds))
                        self.assertEqual(len(sds), got)
                        self.assertEqual(len(sds.loader()), want)
                        total += got
                self.assertEqual(total, n - n % (B * world) if drop else n)

    def test_workers(self):
        # World 3 in 2 workers: a job's drop_last drops the partial global
        # batch of 6 ranks of 9 (5 whole, 10 steps a rank) where world 3
        # alone drops that of 27 (11 whole).
        for drop, samples in ((True, False), (False, False), (False, True), (True, True)):
            for rank in range(3):
                with self.subTest(drop_last=drop, samples=samples, rank=rank):
                    ds = self.dataset(world=3, rank=rank, drop_last=drop, batches=not samples)
                    loader = ds.loader(num_workers=2, prefetch_factor=1)
                    want = len(loader)
                    self.assertEqual(items(loader), want)
                    if drop:
                        self.assertEqual((want, ds.steps()), (10, 11))
                    else:
                        self.assertEqual(want, ds.steps())

    def test_resume(self):
        """len is the whole pass's, resumed or not; ``steps(remaining=True)``
        the steps the resumed pass yields, at another world size too."""
        ds = self.dataset(world=1, rank=0, batches=True)
        loader = ds.loader()
        whole = len(loader)
        it = iter(loader)
        for _ in range(5):
            next(it)
        state = ds.state_dict()
        del it
        for world, workers in ((1, 0), (2, 2), (3, 0), (8, 0)):
            for rank in range(world):
                with self.subTest(world=world, workers=workers, rank=rank):
                    r = self.dataset(world=world, rank=rank, batches=True)
                    r.load_state_dict(state)
                    loader = r.loader(num_workers=workers, **({"prefetch_factor": 1} if workers else {}))
                    if world == 1:
                        self.assertEqual(len(loader), whole)
                        self.assertEqual(r.steps(remaining=True), whole - 5)
                    left = r.steps(workers, remaining=True)
                    self.assertEqual(items(loader), left)
                    # The pass read, the next is a whole one.
                    self.assertEqual(r.steps(workers, remaining=True), len(loader))

    def test_exclusion_mid_pass(self):
        """An exclusion shrinks the epoch from a step past the loader's
        reads: len after it is the steps the pass yields in all."""
        name = "py-len-exclude"
        ds = self.dataset(world=1, rank=0, batches=True, name=name, ahead=0)
        loader = ds.loader()
        before = len(loader)
        self.assertEqual(before, -(-len(self.gw.files) // B))
        it = iter(loader)
        read = 2
        next(it), next(it)
        from_step = read + loader.read_ahead_steps() + 1
        with brand.Client(self.gw.url, dataset="t", seed=3, batch_size=B) as plain:
            listed = [s["__key__"] for s in plain.batch(0, from_step)] + \
                     [s["__key__"] for s in plain.batch(0, from_step + 2)]
        with brand.Client(self.gw.url, dataset="t", seed=3, batch_size=B, name=name) as c:
            c.exclude(listed, from_step=from_step)
        after = len(loader)
        self.assertEqual(after, -(-(len(self.gw.files) - len(listed)) // B))
        self.assertLess(after, before)
        read += items(it)
        self.assertEqual(read, after)


class TestLenAppend(unittest.TestCase):
    def test_append_mid_pass(self):
        """An append record grows the epoch (120 samples, 30 more) from a
        step past the loader's reads: len after it is the steps the pass
        yields in all, with workers too."""
        from appendgateway import AppendGateway

        gw = AppendGateway()
        self.addCleanup(gw.stop)
        old = len(gw.files)
        with brand.Client(gw.url, dataset="d", seed=5, batch_size=8) as c:
            pinned = c.epoch_info(0)["index"]
        for workers, name in ((0, "py-len-grow"), (2, "py-len-grow-workers")):
            with self.subTest(workers=workers):
                ds = BrandDataset(gw.url, dataset="d", seed=5, batch_size=8, world=1, rank=0, name=name, ahead=0,
                                  batches=True, index=pinned)
                loader = ds.loader(num_workers=workers, **({"prefetch_factor": 1} if workers else {}))
                self.assertEqual(len(loader), -(-old // 8))
                it = iter(loader)
                read = 0
                for _ in range(3):
                    next(it)
                    read += 1
                if workers == 0:
                    new = gw.append("extra-0", 30)
                with brand.Client(gw.url, dataset="d", seed=5, batch_size=8, name=name, index=pinned) as c:
                    c.append(read + loader.read_ahead_steps() + 1, new)
                self.assertEqual(len(loader), -(-(old + 30) // 8))
                read += items(it)
                self.assertEqual(read, len(loader))


class TestLenTokens(unittest.TestCase):
    def test_worlds(self):
        gw = token_gateway()
        for world in (1, 2, 3):
            for drop in (False, True):
                for rank in range(world):
                    with self.subTest(world=world, drop_last=drop, rank=rank):
                        job = brand.Job(dataset="tok", seq=64, batch_size=3, seed=2, world=world, rank=rank,
                                        drop_last=drop)
                        ds = BrandDataset(gw.url, brand.Options(job=job))
                        loader = ds.loader()
                        self.assertEqual(len(ds), len(loader))
                        self.assertEqual(items(loader), len(loader))


class TestLenClips(unittest.TestCase):
    def test_worlds(self):
        from test_clips import JOB
        from videogateway import video_gateway

        gw = video_gateway()
        for world in (1, 2):
            for rank in range(world):
                with self.subTest(world=world, rank=rank):
                    ds = BrandDataset(gw.url, brand.Options(job=dataclasses.replace(JOB, world=world, rank=rank)))
                    loader = ds.loader()
                    self.assertEqual(len(ds), len(loader))
                    self.assertEqual(items(loader), len(loader))


if __name__ == "__main__":
    unittest.main()
