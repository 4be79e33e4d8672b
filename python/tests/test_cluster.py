"""brand.Client on a cluster: routing to the rank's home and failing over,
against fake nodes (fakecluster.py) that forward to one real gateway."""

import os
import pickle
import sys
import unittest
import urllib.parse
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakecluster import Cluster  # noqa: E402
from gateway import gateway  # noqa: E402

import brand  # noqa: E402
from brand._route import Router, parse_peers  # noqa: E402


class ClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = gateway()

    def cluster(self, n):
        c = Cluster(self.gw.url, n)
        self.addCleanup(c.close)
        return c

    def client(self, url, **kw):
        kw.setdefault("dataset", "t")
        kw.setdefault("seed", 3)
        kw.setdefault("batch_size", 4)
        c = brand.Client(url, **kw)
        self.addCleanup(c.close)
        return c

    def reference(self, epoch, world, rank):
        """The rank's samples of epoch, read from the gateway itself."""
        with brand.Client(self.gw.url, dataset="t", seed=3, batch_size=4, world=world, rank=rank) as c:
            return list(c.samples(epoch))


class TestRouting(ClusterTest):
    def test_every_rank_goes_to_its_home(self):
        for n in (2, 3, 4):
            with self.subTest(nodes=n):
                fc = self.cluster(n)
                world = 8
                for rank in range(world):
                    home = rank * n // world
                    fc.clear()
                    c = self.client("", peers=fc.urls, world=world, rank=rank)
                    self.assertEqual(c.home, fc.urls[home])
                    got = list(c.samples(0))
                    self.assertEqual(set(fc.hits()), {home}, f"rank {rank}")
                    self.assertEqual(list(c.served), [fc.urls[home]])
                    self.assertEqual(got, self.reference(0, world, rank))

    def test_peers_as_one_string(self):
        fc = self.cluster(2)
        c = self.client("", peers=",".join(fc.urls), world=2, rank=1)
        self.assertEqual(c.home, fc.urls[1])
        c.epoch_info(0)
        self.assertEqual(fc.hits(), [1])

    def test_locality_off_is_sent_with_every_request(self):
        fc = self.cluster(2)
        for locality in (True, False):
            fc.clear()
            c = self.client("", peers=fc.urls, world=2, rank=0, locality=locality, ahead=2)
            list(c.samples(1))
            reqs = fc.requests()
            self.assertGreater(len(reqs), 2)
            for _, path in reqs:
                self.assertEqual("locality=false" in path, not locality, path)

    def test_job_and_weight_are_sent_with_every_request(self):
        fc = self.cluster(2)
        for kw in (dict(), dict(name="pytest-sent", weight=0.5)):
            fc.clear()
            c = self.client("", peers=fc.urls, world=2, rank=1, ahead=2, **kw)
            self.assertEqual(list(c.samples(1)), self.reference(1, 2, 1))
            reqs = fc.requests()
            self.assertGreater(len(reqs), 2)
            for _, path in reqs:
                q = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
                self.assertEqual(q.get("job"), [kw["name"]] if kw else None, path)
                self.assertEqual(q.get("weight"), ["0.5"] if kw else None, path)

    def test_pickled_client_keeps_the_layout(self):
        fc = self.cluster(3)
        c = self.client("", peers=fc.urls, world=3, rank=2)
        fc.fail(2, 503)
        c.epoch_info(0)  # fails over, marks node 2
        d = pickle.loads(pickle.dumps(c))
        self.addCleanup(d.close)
        self.assertEqual(d.home, fc.urls[2])
        self.assertEqual(d.served, {})
        fc.fail(2, None)
        fc.clear()
        d.epoch_info(0)  # marks are liveness: they stay behind
        self.assertEqual(fc.hits(), [2])

    def test_bad_options(self):
        for kw in (
            {"peers": ["http://a:1"], "discover": True},
            {"peers": ["a://b"]},
            {"peers": ["http://a:1", "http://a:1/"]},
            {"peers": ["http://b-{0..1}:1", "http://b-1:1"]},
            {"peers": [","]},
            {"home_retry": -1},
        ):
            with self.subTest(**kw), self.assertRaises(ValueError):
                brand.Client("http://a:1", **kw)


class TestFailover(ClusterTest):
    # Rank 5 of 8 on 4 nodes: home 2.
    CASES = [
        ("home refuses connections", 5, {2: "kill"}, [3], None),
        ("home answers 503", 5, {2: 503}, [2, 3], None),
        ("home answers 502", 5, {2: 502}, [2, 3], None),
        ("home answers 504", 5, {2: 504}, [2, 3], None),
        ("home dies mid-body", 5, {2: "cut"}, [2, 3], None),
        ("home closes before answering", 5, {2: "abort"}, [2, 3], None),
        ("home times out", 5, {2: "hang"}, [2, 3], None),
        ("home and the next node down", 5, {2: "kill", 3: 503}, [3, 0], None),
        ("the order wraps around", 7, {3: 503}, [3, 0], None),
        ("three of four down", 2, {1: 503, 2: "cut", 3: "kill"}, [1, 2, 0], None),
        ("404 is not failed over", 5, {2: 404}, [2], 404),
        ("every node down", 5, {0: 503, 1: 503, 2: 503, 3: 503}, [2, 3, 0, 1, 2, 3], 503),
    ]

    def test_order(self):
        for name, rank, faults, want, status in self.CASES:
            with self.subTest(name):
                fc = self.cluster(4)
                for k, f in faults.items():
                    fc.fail(k, f)
                c = self.client("", peers=fc.urls, world=8, rank=rank, timeout=0.5, max_retries=5)
                with mock.patch.object(c._http, "wait", return_value=0.0) as sleep:
                    if status is None:
                        got = c.batch(1, 0)
                        self.assertEqual(got, self.reference_batch(1, 0, 8, rank))
                        self.assertEqual(list(c.served), [fc.urls[want[-1]]])
                    else:
                        with self.assertRaises(brand.BrandError) as cm:
                            c.batch(1, 0)
                        self.assertEqual(cm.exception.status, status)
                    self.assertEqual(fc.hits("/epoch/1/batch/0"), want)
                    # A call waits only once it has tried every node.
                    self.assertEqual(sleep.call_count, max(0, len(want) - 4))
                fc.release.set()

    def reference_batch(self, epoch, batch, world, rank):
        with brand.Client(self.gw.url, dataset="t", seed=3, batch_size=4, world=world, rank=rank) as c:
            return c.batch(epoch, batch)

    def test_budget_bounds_failover(self):
        fc = self.cluster(4)
        for k in range(4):
            fc.fail(k, 503)
        c = self.client("", peers=fc.urls, world=8, rank=5, max_retries=2, backoff=0.01)
        with self.assertRaises(brand.BrandError) as cm:
            c.epoch_info(0)
        self.assertIn("after 3 attempts", str(cm.exception))
        self.assertEqual(fc.hits(), [2, 3, 0])

    def test_returns_home_after_home_retry(self):
        fc = self.cluster(3)
        c = self.client("", peers=fc.urls, world=3, rank=1, home_retry=10)
        now = [1000.0]
        c._routes().clock = lambda: now[0]
        fc.fail(1, 503)
        steps = [(0, False, 2), (5, True, 2), (9.99, True, 2), (10, True, 1), (11, True, 1)]
        for after, up, want in steps:
            now[0] = 1000.0 + after
            if up:
                fc.fail(1, None)
            fc.clear()
            c.epoch_info(0)
            self.assertEqual(fc.hits()[-1], want, f"at +{after}s")

    def test_epoch_survives_losing_the_home(self):
        for how in ("kill", 503, "cut"):
            with self.subTest(how):
                fc = self.cluster(2)
                c = self.client("", peers=fc.urls, world=2, rank=1, batch_size=2, ahead=3)
                want = [s["__key__"] for s in self.reference_for(2, 1, 2)]
                got = []
                for m, batch in enumerate(c.epoch(0)):
                    got += batch
                    if m == 2:
                        fc.fail(1, how)
                self.assertEqual([s["__key__"] for s in got], want)
                for s in got:
                    key = s.pop("__key__")
                    self.assertEqual(s, self.gw.files[key])
                self.assertEqual(set(c.served), set(fc.urls))

    def reference_for(self, world, rank, batch_size):
        with brand.Client(self.gw.url, dataset="t", seed=3, batch_size=batch_size, world=world, rank=rank) as c:
            return list(c.samples(0))


class TestDiscover(ClusterTest):
    def edit(self, fn):
        def edit(k, doc):
            fn(doc)
            return doc

        return edit

    def test_cases(self):
        cases = [
            # name, rank of 4, node asked, layout edit, home and node served (None: the URL asked)
            ("home from the layout", 1, 3, None, 1, 1),
            ("rank 0 asks the last node", 0, 3, None, 0, 0),
            ("homes as the gateway lists them", 3, 2, lambda d: d.update(homes=[0, 0, 0, 0]), 0, 0),
            ("a node seen down starts passed over", 2, 0, lambda d: d["nodes"][2].update(up=False), 2, 3),
            ("a single gateway is reached at the URL asked", 2, 1,
             lambda d: d.update(nodes=[{"url": "http://brand-0.invalid:8080", "up": True}], self=0, homes=None), None, None),
        ]
        for name, rank, base, edit, home, want in cases:
            with self.subTest(name):
                fc = self.cluster(4)
                if edit is not None:
                    fc.layout_edit = self.edit(edit)
                c = self.client(fc.urls[base], discover=True, world=4, rank=rank)
                self.assertIsNone(c.home)
                c.batch(0, 0)
                c.batch(0, 1)
                self.assertEqual(fc.hits("/cluster"), [base], "the layout is asked for once")
                self.assertEqual(list(c.served), [fc.urls[base if want is None else want]])
                served = base if want is None else want
                self.assertEqual(fc.hits("/epoch/0/batch/0") + fc.hits("/epoch/0/batch/1"), [served, served],
                                 "the batches reached another node than the one served counts")
                self.assertEqual(c.home, fc.urls[base if home is None else home])

    def test_gateway_from_before_clusters(self):
        fc = self.cluster(2)
        fc.fail(1, lambda h: h.path.startswith("/cluster") and (h.send(404, b'{"error":"no route"}', "application/json") or True))
        c = self.client(fc.urls[1], discover=True, world=2, rank=0)
        c.epoch_info(0)
        self.assertEqual(fc.hits(), [1, 1])
        self.assertEqual(c.home, fc.urls[1])

    def test_the_real_gateway_alone(self):
        c = self.client(self.gw.url, discover=True, world=2, rank=1)
        self.assertEqual(list(c.samples(0)), self.reference(0, 2, 1))
        self.assertEqual(list(c.served), [c.url])

    def test_bad_layouts(self):
        cases = [
            ("homes for another world", lambda d: d.update(homes=[0, 1])),
            ("home outside the nodes", lambda d: d.update(homes=[0, 9, 0, 0])),
            ("self outside the nodes", lambda d: d.update(self=4)),
            ("a node that is no URL", lambda d: d["nodes"][1].update(url="ftp://x")),
            ("a node listed twice", lambda d: d["nodes"][1].update(url=d["nodes"][0]["url"])),
            ("no nodes key", lambda d: d.pop("nodes")),
        ]
        for name, edit in cases:
            with self.subTest(name):
                fc = self.cluster(4)
                fc.layout_edit = self.edit(edit)
                c = self.client(fc.urls[0], discover=True, world=4, rank=1)
                with self.assertRaises(brand.BrandError):
                    c.epoch_info(0)

    def test_retried_after_a_failure(self):
        fc = self.cluster(2)
        fc.fail(0, 503)
        c = self.client(fc.urls[0], discover=True, world=2, rank=1, max_retries=0)
        with self.assertRaises(brand.BrandError):
            c.epoch_info(0)
        fc.fail(0, None)
        c.epoch_info(0)
        self.assertEqual(c.home, fc.urls[1])
        layout = c.cluster()
        self.assertEqual(layout["self"], 1)
        self.assertEqual(layout["homes"], [0, 1])


class TestRouter(unittest.TestCase):
    def test_pick_cycles_in_order(self):
        nodes = parse_peers(["http://n{0..3}:1"])
        now = [0.0]
        r = Router(nodes, 2, 10, clock=lambda: now[0])
        seq = []
        for _ in range(6):
            k = r.pick()
            seq.append(k)
            r.fail(k)
        self.assertEqual(seq, [2, 3, 0, 1, 2, 3])  # ties broken by when marked
        now[0] = 100
        self.assertEqual(r.pick(), 2)

    def test_single_node_is_always_picked(self):
        r = Router(parse_peers(["http://a:1"]), 0, 10)
        r.fail(0)
        self.assertEqual(r.pick(), 0)

    def test_parse_peers(self):
        self.assertEqual(
            [n.url for n in parse_peers(["http://brand-{0..2}.ns.svc:8080/x/"])],
            ["http://brand-0.ns.svc:8080/x", "http://brand-1.ns.svc:8080/x", "http://brand-2.ns.svc:8080/x"],
        )
        for bad in (["http://a-{2..1}:1"], ["http://a-{0..1}-{0..1}:1"], ["http://:1"], ["http://a:1?q=1"]):
            with self.subTest(bad), self.assertRaises(ValueError):
                parse_peers(bad)


if __name__ == "__main__":
    unittest.main()


class TestIndexVersion(ClusterTest):
    """A client reads one version of the dataset's index, named on every
    request; a node without it answers 409, and is passed over, not taken
    for down."""

    def test_pinned_from_the_first_answer(self):
        c = self.client(self.gw.url)
        self.assertIsNone(c.index)
        list(c.samples(0))
        ids = [d["index"] for d in c.datasets() if d["name"] == "t"]
        self.assertEqual(c.index, ids[0])

    def test_another_version_fails_over_then_raises(self):
        fc = self.cluster(2)
        conflict = {"error": "index version not held", "status": 409}

        def refuse(h):
            if h.path.startswith("/epoch/"):
                import json

                h.send(409, json.dumps(conflict).encode(), "application/json")
                return True
            return False

        fc.fail(0, refuse)
        c = self.client("", peers=fc.urls, world=2, rank=0)  # home: node 0
        want = [s["__key__"] for s in self.reference(0, 2, 0)]
        self.assertEqual([s["__key__"] for s in c.samples(0)], want)
        self.assertEqual(list(c.served), [fc.urls[1]])
        # Node 0 was not taken for down: each request asked it first.
        self.assertGreater(len(fc.hits()), 1)
        self.assertEqual(fc.hits()[0], 0)
        fc.fail(1, refuse)
        with self.assertRaises(brand.IndexChangedError):
            c.epoch_info(1)

    def test_a_gone_version_raises(self):
        c = self.client(self.gw.url, index="0123456789abcdef")
        with self.assertRaises(brand.IndexChangedError):
            c.epoch_info(0)
