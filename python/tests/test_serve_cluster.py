"""brand.Client against a real cluster: three `brand serve` processes with
--peers on loopback over one store (gateway.ServeCluster)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import ServeCluster, gateway  # noqa: E402

import brand  # noqa: E402

NODES, WORLD = 3, 6


class TestServeCluster(unittest.TestCase):
    def setUp(self):
        self.gw = gateway()
        self.cluster = ServeCluster(self.gw, NODES)
        self.addCleanup(self.cluster.stop)

    def client(self, url="", **kw):
        kw.setdefault("peers", self.cluster.urls if not url else None)
        c = brand.Client(url, dataset="t", seed=5, batch_size=6, world=WORLD, **kw)
        self.addCleanup(c.close)
        return c

    def test_same_bytes_from_every_node_and_home_killed_mid_epoch(self):
        urls = self.cluster.urls
        # The same request, byte for byte, from every node.
        for rank in (0, 3, 5):
            bodies = [self.client(u, rank=rank).batch_bytes(1, 2) for u in urls]
            self.assertGreater(len(bodies[0]), 1024)
            for k, b in enumerate(bodies):
                self.assertEqual(b, bodies[0], f"rank {rank}: node {k} differs from node 0")

        # Every rank through its home; every sample once, with its bytes.
        reference = {}
        seen = []
        for rank in range(WORLD):
            c = self.client(rank=rank)
            reference[rank] = list(c.samples(0))
            self.assertEqual(list(c.served), [urls[rank * NODES // WORLD]], f"rank {rank}")
            seen += [s["__key__"] for s in reference[rank]]
        self.assertEqual(sorted(seen), sorted(self.gw.files))
        for rank in range(WORLD):
            for s in reference[rank]:
                self.assertEqual({k: v for k, v in s.items() if k != "__key__"}, self.gw.files[s["__key__"]])

        # Rank 5's home, node 2, dies after its batch 1: the epoch ends
        # with the same samples, the rest from node 0 (2+1 mod 3).
        c = self.client(rank=5, ahead=2, timeout=10)
        got = []
        for m, batch in enumerate(c.epoch(0)):
            got += batch
            if m == 1:
                self.cluster.kill(2)
        self.assertEqual(got, reference[5])
        self.assertEqual(set(c.served), {urls[2], urls[0]})


if __name__ == "__main__":
    unittest.main()
