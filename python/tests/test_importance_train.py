"""The importance training benchmark (python/bench/importance_train.py):
its dataset generator, its verdicts on the targets, and a small run of it
against a real `brand serve`."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(os.path.dirname(HERE), "bench")
sys.path.insert(0, HERE)
sys.path.insert(0, BENCH)

import numpy as np  # noqa: E402

from gateway import gateway  # noqa: E402

import importance_train  # noqa: E402
import synthetic  # noqa: E402


def run(name, accesses, loads, chunks_read, store, acc):
    """A run's record with one entry per epoch of the given figures."""
    eps = [{"chunk_accesses": a, "chunk_loads": l, "chunks_read": c, "store_bytes": b}
           for a, l, c, b in zip(accesses, loads, chunks_read, store)]
    return {"name": name, "epochs": eps, "final_acc": acc}


class TestSynthetic(unittest.TestCase):
    def test_deterministic_imbalanced_and_hard(self):
        a = synthetic.generate(4096, 1024, 64, 7)
        b = synthetic.generate(4096, 1024, 64, 7)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
        c = synthetic.generate(4096, 1024, 64, 8)
        self.assertFalse(np.array_equal(a[0], c[0]))
        xtr, ytr, xte, yte = a
        self.assertEqual((xtr.shape, xtr.dtype, xte.shape), ((4096, 64), np.float32, (1024, 64)))
        counts = np.bincount(ytr, minlength=synthetic.CLASSES)
        self.assertGreater(counts.min(), 0)
        self.assertGreater(counts.max(), 5 * counts.min())
        # The hard classes' means are nearer each other than the easy ones'.
        means = np.stack([xtr[ytr == k].mean(axis=0) for k in range(synthetic.CLASSES)])
        d = np.linalg.norm(means[:, None] - means[None], axis=2)
        hard = list(synthetic.HARD)
        self.assertLess(d[np.ix_(hard, hard)][np.triu_indices(len(hard), 1)].mean(),
                        d[np.ix_(range(6), range(6))][np.triu_indices(6, 1)].mean())

    def test_tree(self):
        x, y, _, _ = synthetic.generate(40, 1, 8, 3)
        with tempfile.TemporaryDirectory() as d:
            synthetic.write_tree(d, x, y, 3)
            found = {}
            for c in os.listdir(os.path.join(d, "cls")):
                for f in os.listdir(os.path.join(d, "cls", c)):
                    stem, ext = f.rsplit(".", 1)
                    with open(os.path.join(d, "cls", c, f), "rb") as fh:
                        found.setdefault((c, stem), {})[ext] = fh.read()
        self.assertEqual(len(found), 40)
        rows = {bytes(v["x"]): int(v["cls"]) for v in found.values()}
        for i in range(40):
            self.assertEqual(rows[x[i].astype("<f4").tobytes()], int(y[i]))
        for (c, _), v in found.items():
            self.assertEqual(v["cls"], c.encode())


class TestTargets(unittest.TestCase):
    def verdicts(self, runs):
        return {t["target"]: t["met"] for t in importance_train.targets(runs, 0)}

    def test_all_met(self):
        runs = {
            "uniform-lru-10": run("uniform-lru-10", [100, 100], [100, 99], [100, 100], [1000, 1000], 90.0),
            "uniform-10": run("uniform-10", [100, 100], [100, 90], [100, 100], [1000, 900], 90.0),
            "importance-10": run("importance-10", [100, 40], [100, 20], [100, 40], [1000, 100], 89.6),
        }
        v = self.verdicts(runs)
        self.assertEqual(len(v), 6)
        self.assertTrue(all(v.values()), v)

    def test_misses(self):
        cases = [
            # (importance-10's loads in epoch 1, its bytes, its accuracy, the targets that miss)
            ("cache no better than LRU", 39, 100, 90.0, {"x LRU", "next-use"}),
            ("bytes cut 35 %", 20, 235, 90.0, {"40%"}),
            ("accuracy 0.6 points lower", 20, 100, 89.4, {"accuracy"}),
        ]
        for name, loads, nbytes, acc, miss in cases:
            with self.subTest(name):
                runs = {
                    "uniform-lru-10": run("u", [100, 100], [100, 99], [100, 100], [1000, 1000], 90.0),
                    "uniform-10": run("u", [100, 100], [100, 90], [100, 100], [1000, 900], 90.0),
                    "importance-10": run("i", [100, 40], [100, loads], [100, 40], [1000, nbytes], acc),
                }
                missed = {k for k, ok in self.verdicts(runs).items() if not ok}
                for m in miss:
                    self.assertTrue(any(m in k for k in missed), (m, missed))
                self.assertTrue(all(any(m in k for m in miss) for k in missed), (miss, missed))


class TestSmallRun(unittest.TestCase):
    def test_uniform_against_importance(self):
        binary = gateway().binary
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            p = subprocess.run(
                [sys.executable, os.path.join(BENCH, "importance_train.py"), "--brand", binary, "--work", d,
                 "--json", out, "--runs", "uniform-lru-10,uniform-10,importance-10", "--seeds", "1",
                 "--epochs", "3", "--train", "2048", "--test", "256", "--chunk-size", "16KiB", "--eval-every", "16"],
                capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(out) as f:
                r = json.load(f)
        self.assertEqual(r["dataset"]["chunks"], 256)
        self.assertFalse(r["dataset"]["packed_shuffled"])
        u, i = r["runs"]["uniform-10"], r["runs"]["importance-10"]
        self.assertEqual([e["steps"] for e in u["epochs"]], [32, 64, 96])
        self.assertEqual([e["steps"] for e in i["epochs"]], [32, 64, 96])
        for e in u["epochs"]:
            self.assertEqual((e["chunks_read"], e["distinct_samples"], e["version"]), (256, 2048, None))
        self.assertEqual(i["epochs"][0]["chunks_read"], 256)  # epoch 0 is the uniform order
        for e in i["epochs"]:
            self.assertRegex(e["version"], "^[0-9a-f]{16}$")
        for e in i["epochs"][1:]:
            self.assertLess(e["chunks_read"], 200)
            self.assertLess(e["store_bytes"], u["epochs"][e["epoch"]]["store_bytes"])
        self.assertGreater(u["final_acc"], 50)
        self.assertGreater(i["final_acc"], 50)
        self.assertEqual(len(r["targets"]), 6)
        self.assertIn("importance-10", p.stdout)


if __name__ == "__main__":
    unittest.main()
