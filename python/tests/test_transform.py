"""brand.transform, the Python reference of the transform pipelines' seeded
draws, against the golden vectors the Go implementation is pinned by
(transform/testdata/draws.json), and its .npy reader. Standard library
only; the zero-copy check runs when numpy is installed."""

import json
import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from brand import transform as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "..", "transform", "testdata", "draws.json")
FIXTURE = os.path.join(HERE, "..", "..", "transform", "testdata", "photo.png.pil.npy")


def bits(f):
    return "0x%016x" % struct.unpack("<Q", struct.pack("<d", f))[0]


class TestGolden(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(GOLDEN) as f:
            cls.g = json.load(f)

    def test_det_math(self):
        for c in self.g["log"]:
            with self.subTest(log=c["x"]):
                self.assertEqual(bits(tf.det_log(c["x"])), c["bits"])
        for c in self.g["exp"]:
            with self.subTest(exp=c["x"]):
                self.assertEqual(bits(tf.det_exp(c["x"])), c["bits"])

    def test_crops(self):
        attempts = set()
        for c in self.g["crops"]:
            with self.subTest(case=c):
                box, n = tf.random_resized_crop_box(
                    c["seed"], c["epoch"], c["sample"], c["op"], c["width"], c["height"], c["scale"], c["ratio"]
                )
                self.assertEqual(list(box), c["box"])
                self.assertEqual(n, c["attempts"])
                attempts.add(min(n, 3))
        # the first attempt, later ones and the fallback are all pinned
        self.assertEqual(attempts, {1, 2, 3})
        self.assertIn(tf.CROP_ATTEMPTS + 1, {c["attempts"] for c in self.g["crops"]})

    def test_flips(self):
        seen = set()
        for c in self.g["flips"]:
            with self.subTest(case=c):
                self.assertEqual(tf.flip(c["seed"], c["epoch"], c["sample"], c["op"], c["p"]), c["flip"])
                seen.add(c["flip"])
        self.assertEqual(seen, {True, False})

    def test_imagenet_train(self):
        for c in self.g["imagenet_train"]:
            with self.subTest(case=c):
                box, flipped = tf.imagenet_train_draws(c["seed"], c["epoch"], c["sample"], c["width"], c["height"])
                self.assertEqual((list(box), flipped), (c["box"], c["flip"]))


    def test_sample_keys(self):
        seeds = set()
        for c in self.g["sample_keys"]:
            with self.subTest(case=c):
                key = tf.sample_key(c["job_seed"], c["dataset"], c["epoch"], c["sample"])
                self.assertEqual(key, (c["key_seed"], c["epoch"], c["sample"]))
                box, flipped = tf.imagenet_train_draws(*key, 500, 375)
                self.assertEqual((list(box), flipped), (c["box"], c["flip"]))
                seeds.add((c["job_seed"], c["dataset"], c["key_seed"]))
        # two datasets of one job draw from different keys
        by_job = {}
        for job, ds, seed in seeds:
            by_job.setdefault(job, set()).add(seed)
        self.assertGreater(len(by_job[7]), 2)


class TestDraws(unittest.TestCase):
    def test_independent_of_everything_but_the_key(self):
        a = tf.imagenet_train_draws(7, 2, 12345, 500, 375)
        self.assertEqual(a, tf.imagenet_train_draws(7, 2, 12345, 500, 375))
        others = {tf.imagenet_train_draws(7, 2, s, 500, 375) for s in range(12346, 12366)}
        self.assertGreater(len(others), 15)  # a different sample draws differently
        self.assertNotEqual(a, tf.imagenet_train_draws(7, 3, 12345, 500, 375))
        self.assertNotEqual(a, tf.imagenet_train_draws(8, 2, 12345, 500, 375))

    def test_boxes_fit(self):
        for s in range(300):
            box, _ = tf.random_resized_crop_box(1, 0, s, 0, 333, 500)
            self.assertTrue(0 <= box.x and box.x + box.w <= 333 and 0 <= box.y and box.y + box.h <= 500, box)


class TestNPY(unittest.TestCase):
    def test_header(self):
        with open(FIXTURE, "rb") as f:
            b = f.read()
        off, shape = tf.npy_header(b)
        self.assertEqual(shape, [32, 48, 3])
        self.assertEqual(off % 64, 0)
        self.assertEqual(len(b) - off, 32 * 48 * 3)
        with self.assertRaises(ValueError):
            tf.npy_header(b"\x93NUMPY\x02\x00" + b[8:])

    def test_no_copy(self):
        try:
            import numpy
        except ImportError:
            self.skipTest("numpy not installed")
        with open(FIXTURE, "rb") as f:
            buf = bytearray(f.read())
        a = tf.npy_array(buf)
        self.assertEqual(a.shape, (32, 48, 3))
        self.assertEqual(a.dtype, numpy.uint8)
        off, _ = tf.npy_header(buf)
        buf[off] ^= 0xFF  # the array sees the buffer's change: a view, not a copy
        self.assertEqual(int(a[0, 0, 0]), buf[off])
        with open(FIXTURE, "rb") as f:
            self.assertTrue((numpy.load(f) == a).sum() == a.size - 1)


if __name__ == "__main__":
    unittest.main()
