"""Mixtures of datasets (mix=): the mixture's text, the client's options and
tags, and brand.torch over a real gateway serving three datasets of
different sizes (gateway.mix_gateway: web 120 samples, code 60, books 12).

DDP ranks are simulated in one process (constructor arguments); DataLoader
workers are real. The classes before MixGatewayTest need no gateway."""

import collections
import itertools
import json
import os
import sys
import unittest
import urllib.error
import urllib.parse
import urllib.request
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import mix_gateway  # noqa: E402

import brand  # noqa: E402
from brand.client import _components, _planned  # noqa: E402
from brand._options import job_query  # noqa: E402
from brand.torch import BrandDataset  # noqa: E402

MIX = "web:0.5,code:0.3,books:0.2"
WEIGHTS = {"web": 0.5, "code": 0.3, "books": 0.2}
B = 4
SEED = 11


class TestFormatMix(unittest.TestCase):
    def test_canonical_forms(self):
        tests = [
            (MIX, MIX),
            ({"web": 0.5, "code": 0.3, "books": 0.2}, MIX),
            ([("web", "0.50"), ("code", Decimal("0.3")), ("books", 0.2)], MIX),
            (" web : 0.5 , code:0.3,books:0.2 ", MIX),
            ({"a": 7, "b": 2.0, "c": "1.000"}, "a:7,b:2,c:1"),
            ({"a": 1e-06, "b": 100}, "a:0.000001,b:100"),
            ((("a", 1),), "a:1"),
            ("a:0.1234560", "a:0.123456"),  # the trailing zero is no decimal
            ("a:7.,b:007", "a:7,b:7"),
            ("a:0.000001,b:2147.483647", "a:0.000001,b:2147.483647"),  # integers summing to 2^31
        ]
        for mix, want in tests:
            with self.subTest(mix=mix):
                self.assertEqual(brand.format_mix(mix), want)
                self.assertEqual(brand.format_mix(want), want)

    def test_errors(self):
        tests = [
            "", " ", "web", "web:", ":0.5", "web:0.5,", "web:0.5,,code:1", "web:0", "web:-1", "web:+1",
            "web:1e-3", "web:0.1234567", "web:1/2", "web:abc", "web:nan", "web:inf", "web:1_0", "web:.5",
            "web:0x10", "web:1.2.3", "web:1 0",
            "web:1,web:2", "a:0.000001,b:2147.483648",
            {}, [], {"a,b": 1}, {"a:b": 1}, {" a": 1}, {"a": True}, {"a": float("nan")}, {"a": float("inf")},
            {"a": 1e-07}, {"a": None}, [("web",)], [("web", 1, 2)], ["web:1"],
        ]
        for mix in tests:
            with self.subTest(mix=mix):
                with self.assertRaises(ValueError):
                    brand.format_mix(mix)
        for mix in (3, b"web:1", None, {1: 1}):
            with self.subTest(mix=mix):
                with self.assertRaises(TypeError):
                    brand.format_mix(mix)


class TestClientOptions(unittest.TestCase):
    def test_params(self):
        c = brand.Client("http://127.0.0.1:1", mix=WEIGHTS, batch_size=B, world=2, rank=1, mix_block=8,
                         mix_samples=100, index="a,b,c")
        q = c.params()
        self.assertEqual((q["mix"], q["mix_block"], q["mix_samples"]), (MIX, "8", "100"))
        self.assertNotIn("dataset", q)
        self.assertNotIn("index", q)  # a gateway refuses index= with mix=; the client checks the pin
        self.assertEqual(c.options.job.mix, MIX)
        self.assertNotIn("mix", brand.Client("http://127.0.0.1:1", dataset="t").params())

    def test_checks(self):
        url = "http://127.0.0.1:1"
        for kw in (dict(mix=MIX, dataset="web"), dict(mix=MIX, importance_job="j"), dict(mix_block=8),
                   dict(mix_samples=8), dict(dataset="t", mix_block=8), dict(mix=MIX, mix_block=0),
                   dict(mix=MIX, mix_samples=-1), dict(mix=MIX, mix_block=2.5), dict(mix=MIX, mix_block=True),
                   dict(mix="web"), dict(mix=MIX, index="a,b")):
            with self.subTest(**kw):
                with self.assertRaises(ValueError):
                    brand.Client(url, **kw)

    def test_pinned_plan(self):
        info = {"dataset": MIX, "index": "", "seed": 3, "batch_size": B, "window": 2, "world": 4, "rank": 1,
                "drop_last": False, "samples": 192, "mix": {"block": 8, "components": []}}
        q = job_query(_planned(brand.Job(mix=MIX, offset=40), info))
        self.assertEqual((q["mix"], q["mix_block"], q["mix_samples"], q["offset"]), (MIX, "8", "192", "40"))
        self.assertNotIn("dataset", q)

    def test_components_header(self):
        self.assertEqual(_components("2,0,2", 3, "here"), [2, 0, 2])
        self.assertEqual(_components(None, 3, "here"), [])  # an empty final slice
        self.assertEqual(_components("", 3, "here"), [])
        for header in ("0,3,1", "0,-1,1", "0,x,1", "0,,1"):
            with self.subTest(header=header):
                with self.assertRaises(brand.BrandError):
                    _components(header, 3, "here")


class TestDatasetOptions(unittest.TestCase):
    """What needs no gateway: the block's default, the checks of the
    options and of a state."""

    url = "http://127.0.0.1:1"

    def state(self, **kw):
        s = {"version": 1, "epoch": 1, "position": 40, "samples": 192, "seed": SEED, "window": None,
             "dataset": None, "mix": MIX, "mix_block": 8, "mix_samples": 192, "index": None, "job": None}
        s.update(kw)
        return s

    def test_block_is_batch_times_ddp_world(self):
        self.assertEqual(BrandDataset(self.url, mix=MIX, batch_size=B, world=3, rank=0).mix_block, 3 * B)
        self.assertEqual(BrandDataset(self.url, mix=MIX, batch_size=B, world=3, rank=0, mix_block=5).mix_block, 5)
        self.assertIsNone(BrandDataset(self.url, dataset="t", batch_size=B, world=3, rank=0).mix_block)
        ds = BrandDataset(self.url, mix=[("web", 1), ("code", "1.0")], batch_size=B, world=2, rank=0)
        self.assertEqual(ds.mix, "web:1,code:1")
        c = ds._client(world=2 * 3, rank=5, offset=0)  # 3 DataLoader workers: the block is still B * 2
        self.assertEqual(c.params()["mix_block"], str(2 * B))

    def test_option_checks(self):
        for kw in (dict(mix=MIX, dataset="web"), dict(mix="web:0.5,"), dict(mix=MIX, importance_job="j"),
                   dict(mix_block=8), dict(mix=MIX, mix_samples=0)):
            with self.subTest(**kw):
                with self.assertRaises(ValueError):
                    BrandDataset(self.url, batch_size=B, **kw)

    def test_state_of_another_order(self):
        other = [
            dict(mix="web:0.5,code:0.5"),
            dict(mix="code:0.3,web:0.5,books:0.2"),  # the components' order is part of the order
            dict(mix=None, dataset="web", mix_block=None, mix_samples=None),
            dict(seed=SEED + 1),
        ]
        for kw in other:
            with self.subTest(**kw):
                with self.assertRaisesRegex(ValueError, "order would differ"):
                    BrandDataset(self.url, mix=MIX, batch_size=B, seed=SEED, world=2, rank=0).load_state_dict(
                        self.state(**kw))
        with self.assertRaisesRegex(ValueError, "order would differ"):
            BrandDataset(self.url, dataset="web", batch_size=B, seed=SEED).load_state_dict(self.state())
        # A block or a length given, and not the state's.
        for kw in (dict(mix_block=12), dict(mix_samples=200)):
            with self.subTest(**kw):
                ds = BrandDataset(self.url, mix=MIX, batch_size=B, seed=SEED, world=2, rank=0, **kw)
                with self.assertRaisesRegex(ValueError, "order would differ"):
                    ds.load_state_dict(self.state())
                self.assertIsNone(ds._resume)  # nothing changed

    def test_state_block_and_length_taken(self):
        # Defaults: the state's block and length, whatever this world.
        ds = BrandDataset(self.url, mix=WEIGHTS, batch_size=B, seed=SEED, world=3, rank=0)
        self.assertEqual(ds.mix_block, 3 * B)
        ds.load_state_dict(self.state())
        self.assertEqual((ds.mix_block, ds.mix_samples), (8, 192))
        # Given: the same, or a length that rounds up to the state's.
        ds = BrandDataset(self.url, mix=MIX, batch_size=B, seed=SEED, world=3, rank=0, mix_block=8, mix_samples=185)
        ds.load_state_dict(self.state())
        self.assertEqual((ds.mix_block, ds.mix_samples), (8, 192))


def uniform(s):
    """A decode function: the books' "txt" and the others' "jpg" under one
    name, so that the DataLoader can collate samples of every dataset."""
    return {"__key__": s["__key__"], "__dataset__": s["__dataset__"], "ds": s["ds"], "data": s.get("jpg", s.get("txt"))}


def tagged(item):
    """The (dataset, key) of every sample in a DataLoader item: a list of
    samples, or a collated dict."""
    if isinstance(item, dict):
        return list(zip(item["__dataset__"], item["__key__"]))
    return [(s["__dataset__"], s["__key__"]) for s in item]


def lockstep(dss, workers, steps=None):
    """Iterates the ranks' loaders as DDP does, a step of each rank in
    turn, for steps steps or to the end; returns every step as the list
    of its ranks' items, and the loaders' iterators (to stop them)."""
    its = [iter(ds.loader(num_workers=workers)) for ds in dss]
    out = []
    for _ in itertools.count() if steps is None else range(steps):
        step = [item for item in (next(it, None) for it in its) if item is not None]
        if not step:
            break
        out.append(step)
    return out, its


class MixGatewayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = mix_gateway()

    def dataset(self, **kw):
        kw.setdefault("batch_size", B)
        kw.setdefault("mix", MIX)
        if not kw.get("batches"):
            kw.setdefault("decode", uniform)
        return BrandDataset(self.gw.url, seed=SEED, **kw)

    def assertSource(self, s):
        """s is the sample of its dataset and key, byte for byte."""
        d, k = s["__dataset__"], s["__key__"]
        self.assertEqual(s, {"__key__": k, "__dataset__": d, **self.gw.datasets[d][k]})

    def info(self, epoch):
        with brand.Client(self.gw.url, mix=MIX, seed=SEED, batch_size=B, mix_block=2 * B) as c:
            return c.epoch_info(epoch)

    def order(self, epoch, mix_block=2 * B, **kw):
        """The epoch's (dataset, key) sequence read by one client at world 1,
        with the block of two ranks unless told."""
        with brand.Client(self.gw.url, mix=MIX, seed=SEED, batch_size=B, mix_block=mix_block, **kw) as c:
            return [(s["__dataset__"], s["__key__"]) for s in c.samples(epoch)]

    def run_epoch(self, world, workers, epoch, batches=True, **kw):
        """The epoch at world ranks with workers each: its steps, each the
        (dataset, key) sequence of its ranks' items in rank order."""
        dss = [self.dataset(world=world, rank=r, batches=batches, **kw) for r in range(world)]
        for ds in dss:
            ds.set_epoch(epoch)
        steps, _ = lockstep(dss, workers)
        return [[t for item in step for t in tagged(item)] for step in steps]


class TestMixture(MixGatewayTest):
    def test_plan_and_headers(self):
        info = self.info(1)
        self.assertEqual((info["dataset"], info["index"], info["samples"]), (MIX, "", 192))
        comps = info["mix"]["components"]
        self.assertEqual([c["dataset"] for c in comps], list(WEIGHTS))
        self.assertEqual(sum(c["epoch_samples"] for c in comps), 192)
        for c, c0 in zip(comps, self.info(0)["mix"]["components"]):
            # Epoch 1 continues each component's stream where epoch 0 left it.
            self.assertEqual((c["first_pass"], c["first_index"]), divmod(c0["epoch_samples"], c["samples"]))
        with brand.Client(self.gw.url, mix=MIX, seed=SEED, batch_size=B, world=2, rank=1) as c:
            h, body = c.get("/epoch/0/batch/3", c.params())
            self.assertEqual((h["Brand-Mix"], h["Brand-Mix-Block"]), (MIX, str(2 * B)))
            self.assertIsNone(h.get("Brand-Dataset"))
            batch = c.batch(0, 3)
            self.assertEqual(c.index, ",".join(x["index"] for x in comps))
        self.assertEqual([s["__dataset__"] for s in batch],
                         [list(WEIGHTS)[int(i)] for i in h["Brand-Mix-Components"].split(",")])

    def test_2_ranks_2_workers(self):
        """Every trainer step holds each component within one sample of its
        share of the step (the block is B * 2, not B * 4); each component's
        samples are its dataset's passes in turn, each key once a pass (the
        books, 12 samples, repeat: 39 of an epoch), across the epochs; the
        tags name the dataset each sample came from."""
        streams = collections.defaultdict(list)
        for epoch in (0, 1):
            steps = self.run_epoch(2, 2, epoch)
            self.assertEqual(len(steps), 192 // (2 * B))
            for j, step in enumerate(steps):
                counts = collections.Counter(d for d, _ in step)
                for d, w in WEIGHTS.items():
                    self.assertLess(abs(counts[d] - 2 * B * w), 1, (epoch, j, counts))
            seq = [t for step in steps for t in step]
            self.assertEqual(seq, self.order(epoch))  # the cut of one dataset
            for d, k in seq:
                streams[d].append(k)
        info = self.info(0)["mix"]["components"]
        for c, c1 in zip(info, self.info(1)["mix"]["components"]):
            d, n = c["dataset"], c["samples"]
            keys = streams[d]
            self.assertEqual(len(keys), c["epoch_samples"] + c1["epoch_samples"])
            whole = set(self.gw.datasets[d])
            for p in range(0, len(keys), n):
                part = keys[p:p + n]
                self.assertEqual(len(set(part)), len(part), f"{d}: a key twice in pass {p // n}")
                self.assertLessEqual(set(part), whole)
                if len(part) == n:
                    self.assertEqual(set(part), whole)
        self.assertGreater(len(streams["books"]), 6 * 12)

    def test_samples_carry_their_dataset(self):
        ds = self.dataset(world=1, rank=0, batches=True)
        n = 0
        for item in ds.loader(num_workers=2):
            for s in item:
                self.assertSource(s)
                n += 1
        self.assertEqual(n, 192)
        self.assertEqual(ds.state_dict()["position"], 192)
        # Collated (a decode function makes the datasets' samples alike).
        ds = self.dataset(world=1, rank=0)
        n = 0
        for item in ds.loader(num_workers=2):
            for d, k, tag, data in zip(item["__dataset__"], item["__key__"], item["ds"], item["data"]):
                self.assertEqual(tag, d.encode())
                self.assertEqual(data, self.gw.datasets[d][k]["jpg" if d != "books" else "txt"])
                n += 1
        self.assertEqual(n, 192)

    def test_adjacent_equal_keys(self):
        """Two adjacent samples of one key (from two components, or a small
        one's passes meeting) are one sample to a tar's grouping by key: the
        client cuts the batch by its manifest's lengths instead."""
        with brand.Client(self.gw.url, mix=MIX, seed=SEED, batch_size=2 * B) as c:
            for epoch, batch in itertools.product(range(8), range(24)):
                _, body = c.get(f"/epoch/{epoch}/batch/{batch}/manifest", c.params())
                keys = [m["key"] for m in json.loads(body)["samples"]]
                if any(a == b for a, b in zip(keys, keys[1:])):
                    break
            else:
                self.fail("no batch with adjacent equal keys")
            self.assertLess(len(brand.decode_tar(c.batch_bytes(epoch, batch))), len(keys))
            got = c.batch(epoch, batch)
            self.assertEqual([s["__key__"] for s in got], keys)
            for s in got:
                self.assertSource(s)

    def test_mix_samples_and_drop_last(self):
        """3 ranks: blocks of 12, an epoch of 50 samples rounded up to 60;
        2 workers a rank make global batches of 24, the last one partial
        and dropped."""
        ds = self.dataset(world=3, rank=0, mix_samples=50, drop_last=True)
        self.assertEqual((ds.mix_block, ds.samples_in_epoch()), (3 * B, 60))
        steps = self.run_epoch(3, 2, 0, batches=False, mix_samples=50, drop_last=True)
        self.assertEqual([t for step in steps for t in step],
                         self.order(0, mix_block=3 * B, mix_samples=50)[:48])


class TestResume(MixGatewayTest):
    """Stopped after some steps at 2 ranks × 2 workers, resumed at other
    world sizes and worker counts with offset=: the concatenation is the
    uninterrupted run's sequence."""

    epoch = 1

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.whole = None

    def uninterrupted(self):
        if TestResume.whole is None:
            TestResume.whole = [t for step in self.run_epoch(2, 2, self.epoch) for t in step]
        return TestResume.whole

    def stopped(self, steps):
        dss = [self.dataset(world=2, rank=r, batches=True) for r in range(2)]
        for ds in dss:
            ds.set_epoch(self.epoch)
        got, its = lockstep(dss, 2, steps)
        state = dss[0].state_dict()
        self.assertEqual(dss[1].state_dict(), state)
        del its
        return [t for step in got for item in step for t in tagged(item)], state

    def resume(self, state, world, workers, batches=True, **kw):
        dss = [self.dataset(world=world, rank=r, batches=batches, **kw) for r in range(world)]
        for ds in dss:
            ds.load_state_dict(state)
            ds.set_epoch(self.epoch)  # as a training loop does; keeps the resume point
        steps, its = lockstep(dss, workers)
        del its
        for ds in dss:
            self.assertEqual(ds.state_dict()["position"], 192)
            self.assertEqual(ds.state_dict()["mix_block"], 2 * B)  # the state's, at any world
        return [t for step in steps for item in step for t in tagged(item)]

    def test_resume_at_other_worlds(self):
        whole = self.uninterrupted()
        before, state = self.stopped(5)
        self.assertEqual((state["position"], state["mix"], state["mix_block"], state["mix_samples"]),
                         (5 * 2 * B, MIX, 2 * B, 192))
        self.assertEqual(before, whole[:5 * 2 * B])
        for world, workers, batches in ((1, 0, True), (1, 2, False), (3, 1, True), (3, 3, False), (2, 1, True)):
            with self.subTest(world=world, workers=workers):
                self.assertEqual(before + self.resume(state, world, workers, batches), whole)

    def test_resume_with_the_block_given(self):
        whole = self.uninterrupted()
        before, state = self.stopped(3)
        self.assertEqual(before + self.resume(state, 3, 2, mix_block=2 * B), whole)
        with self.assertRaisesRegex(ValueError, "mix_block"):
            self.dataset(world=3, rank=0, mix_block=3 * B).load_state_dict(state)

    def test_resume_on_other_versions(self):
        _, state = self.stopped(2)
        state["index"] = "0123456789abcdef,0123456789abcdef,0123456789abcdef"
        ds = self.dataset(world=1, rank=0)
        ds.load_state_dict(state)
        with self.assertRaises(brand.IndexChangedError):
            list(ds.loader(num_workers=0))


class TestGatewayAgrees(MixGatewayTest):
    """format_mix refuses what the gateway refuses, and what it accepts the
    gateway accepts."""

    def status(self, text):
        q = urllib.parse.urlencode({"mix": text, "batch_size": B})
        try:
            with urllib.request.urlopen(f"{self.gw.url}/epoch/0?{q}") as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def test_texts(self):
        for text in ("web:0.5,code:0.5", "web:7,code:2,books:1", "web:0.000001,code:2147.483647", "web:1"):
            with self.subTest(text=text):
                self.assertEqual(brand.format_mix(text), text)
                self.assertEqual(self.status(text), 200)
        for text in ("web", "web:0", "web:-1", "web:1e-3", "web:.5", "web:0x10", "web:0.1234567", "web:1,web:2",
                     "web:abc", "web:0.000001,code:2147.483648", "web:1,,code:1"):
            with self.subTest(text=text):
                with self.assertRaises(ValueError):
                    brand.format_mix(text)
                self.assertEqual(self.status(text), 400)

    def test_gateway_refusals_surface(self):
        with self.assertRaisesRegex(brand.BrandError, "nope"):
            list(self.dataset(mix="web:1,nope:1", world=1, rank=0))


if __name__ == "__main__":
    unittest.main()
