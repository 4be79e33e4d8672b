"""BrandDataset.state_dict() across edits that change an epoch's size while
a pass reads it (docs/http-api.md, "Exclusions" and "Appends"): a state
taken after the epoch grew or shrank records where the pass is in the
epoch as it is now, and a dataset resumed from it reads exactly the
rest, none of it twice, none lost.

The reproductions: the state kept the epoch's size as the pass began.
After an append grew the epoch, a state taken past the old end recorded
the old size as its position, and the resume served samples again;
after an exclusion shrank it, the state taken after the pass recorded
the old size, and the resume was refused (404: past the epoch's end).

Real gateways: appendgateway.py's Parquet dataset, which `brand index
--append` extends (a gateway a test), and gateway.py's dataset "t" for
exclusions (a job name a test)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from appendgateway import AppendGateway  # noqa: E402
from gateway import gateway  # noqa: E402

import brand  # noqa: E402
from brand.torch import BrandDataset  # noqa: E402

B = 8  # a step of a world of 1: one batch of 8 samples


class Reader:
    """A pass over a dataset's epoch, one step at a time: through a loader
    of ``workers`` workers, or iterating the dataset itself (its samples,
    ``workers`` None), as a trainer would."""

    def __init__(self, ds, workers):
        self.ds = ds
        if workers is None:
            self.it = iter(ds)
            self.loader = None
        else:
            self.loader = ds.loader(num_workers=workers, **({"prefetch_factor": 1} if workers else {}))
            self.it = iter(self.loader)

    def read_ahead(self):
        """Steps past the trainer's that the pass may have asked for."""
        if self.loader is not None:
            return self.loader.read_ahead_steps()
        return self.ds.options.ahead + 2

    def step(self):
        """The keys of the next step; [] at the epoch's end."""
        if self.loader is not None:
            b = next(self.it, None)
            return [] if b is None else list(b["__key__"])
        keys = []
        for s in self.it:
            keys.append(s["__key__"])
            if len(keys) == B:
                break
        return keys

    def rest(self):
        keys = []
        while True:
            got = self.step()
            if not got:
                return keys
            keys += got

    def close(self):
        if self.loader is None:
            self.it.close()
        del self.it


def epoch_keys(ds, epoch, workers=None):
    """Every key a dataset's pass over ``epoch`` reads."""
    ds.set_epoch(epoch)
    r = Reader(ds, workers)
    try:
        return r.rest()
    finally:
        r.close()


class TestAppendMidPass(unittest.TestCase):
    """An append record grows the epoch from a step past the pass's reads;
    the state is taken past the old epoch's end (136 of the 150 samples it
    has now, 120 when the pass began)."""

    def dataset(self, gw):
        return BrandDataset(gw.url, dataset="d", seed=5, batch_size=B, world=1, rank=0, name="grow", ahead=0)

    def run_case(self, workers):
        gw = AppendGateway()
        self.addCleanup(gw.stop)
        old = len(gw.files)
        with brand.Client(gw.url, dataset="d", seed=5, batch_size=B) as c:
            pinned = c.epoch_info(0)["index"]  # the version the job reads, which the record extends
        ds = self.dataset(gw)
        r = Reader(ds, workers)
        read = []
        for _ in range(3):
            read += r.step()
        new = gw.append("extra-0", 30)
        with brand.Client(gw.url, dataset="d", seed=5, batch_size=B, name="grow", index=pinned) as c:
            rec = c.append(3 + r.read_ahead() + 1, new)
        self.assertEqual((rec["samples"], rec["new_samples"]), (old + 30, 30))
        while len(read) < 136:
            got = r.step()
            self.assertTrue(got, "the pass ended before the grown epoch's end")
            read += got
        state = ds.state_dict()
        r.close()

        resumed = self.dataset(gw)
        resumed.load_state_dict(state)
        rest = epoch_keys(resumed, 0, workers)
        self.assertEqual(len(read) + len(rest), len(gw.files), "samples read twice, or lost")
        self.assertEqual(sorted(read + rest), sorted(gw.files))
        self.assertEqual((state["position"], state["samples"]), (136, old + 30))
        # The pass resumed reads to the end: its state is the whole epoch.
        self.assertEqual(resumed.state_dict()["position"], old + 30)

    def test_iterated(self):
        self.run_case(None)

    def test_loader(self):
        self.run_case(0)

    def test_loader_with_workers(self):
        self.run_case(2)


class TestExclusionMidPass(unittest.TestCase):
    """An exclusion list shrinks the epoch from a step past the pass's
    reads; the state is taken after the pass. What remains of the epoch
    is nothing; the next epoch is the dataset without the list."""

    def dataset(self, name):
        return BrandDataset(gateway().url, dataset="t", seed=4, batch_size=B, world=1, rank=0, name=name, ahead=0)

    def run_case(self, name, workers):
        gw = gateway()
        ds = self.dataset(name)
        r = Reader(ds, workers)
        read = r.step() + r.step()
        from_step = 2 + r.read_ahead() + 1
        with brand.Client(gw.url, dataset="t", seed=4, batch_size=B) as plain:  # the same order, unnamed
            listed = [s["__key__"] for m in (from_step, from_step + 3, from_step + 6) for s in plain.batch(0, m)][:20]
        with brand.Client(gw.url, dataset="t", seed=4, batch_size=B, name=name) as c:
            x = c.exclude(listed, from_step=from_step)
        self.assertEqual(x["samples"], 20)
        read += r.rest()
        r.close()
        n = len(gw.files) - 20
        self.assertEqual(sorted(read), sorted(set(gw.files) - set(listed)))
        state = ds.state_dict()

        resumed = self.dataset(name)
        resumed.load_state_dict(state)
        self.assertEqual(epoch_keys(resumed, 0, workers), [], "the epoch was read whole")
        self.assertEqual((state["position"], state["samples"]), (n, n))
        self.assertEqual(resumed.state_dict()["position"], n)
        nxt = epoch_keys(resumed, 1, workers)
        self.assertEqual(sorted(nxt), sorted(set(gw.files) - set(listed)))

    def test_iterated(self):
        self.run_case("py-state-exclude-iterated", None)

    def test_loader(self):
        self.run_case("py-state-exclude-loader", 0)

    def test_loader_with_workers(self):
        self.run_case("py-state-exclude-workers", 2)


if __name__ == "__main__":
    unittest.main()
