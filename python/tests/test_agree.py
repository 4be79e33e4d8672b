"""The membership (and index) version an epoch is read under, agreed by
every client of a job: a BrandLoader's workers take the trainer process's,
and DDP ranks take rank 0's (BrandDataset.agree). Against fake nodes
(fakecluster.py) whose Brand-Members changes after the first epoch plan,
as a cluster's does when a node joins between two ranks' pins."""

import os
import socket
import sys
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakecluster import Cluster  # noqa: E402
from gateway import gateway  # noqa: E402

import torch  # noqa: E402  (a missing torch is an error, not a skip)
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import brand  # noqa: E402
from brand.torch import BrandDataset  # noqa: E402

OLD, NEW = "00000000000000aa", "00000000000000bb"


def flip_after_first_plan(fc):
    """fc's nodes answer OLD until an epoch plan has been answered, then
    NEW: the cluster's membership changes right after the first pin."""
    seen = threading.Event()

    def members(_node, path):
        if seen.is_set():
            return NEW
        if urllib.parse.urlsplit(path).path == "/epoch/0":
            seen.set()
        return OLD
    fc.members = members


def batch_pins(fc):
    """The members= of every batch request the nodes received."""
    out = []
    for _, p in fc.requests():
        u = urllib.parse.urlsplit(p)
        if "/batch/" in u.path:
            out.append(urllib.parse.parse_qs(u.query).get("members", [None])[0])
    return out


class TestWorkersTakeTheTrainersPin(unittest.TestCase):
    def test_workers(self):
        gw = gateway()
        fc = Cluster(gw.url, 2)
        self.addCleanup(fc.close)
        flip_after_first_plan(fc)
        ds = BrandDataset("", peers=fc.urls, dataset="t", seed=3, batch_size=4, world=1, rank=0)
        n = sum(len(b["__key__"]) for b in ds.loader(num_workers=2, batch_size=4))
        self.assertGreater(n, 0)
        pins = batch_pins(fc)
        self.assertTrue(pins)
        self.assertEqual(set(pins), {OLD}, "a worker read under another membership than the trainer's pin")


class TestDiscoveryFollowsTheMembership(unittest.TestCase):
    def test_joined_node_reached(self):
        """A client that discovered two nodes asks for the layout again
        once an epoch pins another membership version, and reaches its
        rank's home among three."""
        gw = gateway()
        fc = Cluster(gw.url, 3)
        self.addCleanup(fc.close)
        state = {"n": 2, "v": OLD}

        def layout(_k, doc):
            n = state["n"]
            doc["nodes"] = doc["nodes"][:n]
            doc["members"] = state["v"]
            if "homes" in doc:
                w = len(doc["homes"])
                doc["homes"] = [r * n // w for r in range(w)]
            return doc
        fc.layout_edit = layout
        fc.members = lambda _k, _p: state["v"]
        with brand.Client(fc.urls[0], discover=True, dataset="t", seed=3, batch_size=2, world=3, rank=2) as c:
            list(c.epoch(0))
            self.assertEqual(set(c.served), {fc.urls[1]})
            state["n"], state["v"] = 3, NEW
            c.served.clear()
            list(c.epoch(1))
            self.assertIn(fc.urls[2], c.served, "the joined node, rank 2's home of three, served nothing")
            self.assertEqual(c.members, NEW)


def _rank(rank, port, url_list, out):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=2, rank=rank)
    try:
        if rank == 1:
            time.sleep(1)  # rank 0 pins first; the cluster then changes
        ds = BrandDataset("", peers=url_list, dataset="t", seed=3, batch_size=4)
        keys = [k for b in ds.loader(num_workers=0, batch_size=4) for k in b["__key__"]]
        out.put((rank, keys))
    finally:
        dist.destroy_process_group()


class TestRanksTakeRankZerosPin(unittest.TestCase):
    def test_ddp(self):
        gw = gateway()
        fc = Cluster(gw.url, 2)
        self.addCleanup(fc.close)
        flip_after_first_plan(fc)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        procs = [ctx.Process(target=_rank, args=(r, port, fc.urls, out)) for r in range(2)]
        for p in procs:
            p.start()
        got = dict(out.get(timeout=120) for _ in procs)
        for p in procs:
            p.join(30)
            self.assertEqual(p.exitcode, 0)
        pins = batch_pins(fc)
        self.assertTrue(pins)
        self.assertEqual(set(pins), {OLD}, "a rank read under another membership than rank 0's")
        # Every sample of the epoch once over the two ranks.
        with brand.Client(gw.url, dataset="t", seed=3, batch_size=8) as c:
            want = sorted(s["__key__"] for s in c.samples(0))
        self.assertEqual(sorted(got[0] + got[1]), want)


if __name__ == "__main__":
    unittest.main()
