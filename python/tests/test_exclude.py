"""Exclusions from the Python client (Client.exclude, its previous=, Client.exclusion)
against a real gateway serving dataset "t": the steps before the list's
step keep their samples, the listed samples are gone from it on and in
the next epoch, and what the gateway refuses is a BrandError naming why.
Each test names a job of its own: a job has one list."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import gateway  # noqa: E402

import brand  # noqa: E402

K = 8  # batch_size 8 at world 1: a step is a batch


class TestExclude(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = gateway()

    def client(self, name):
        return brand.Client(self.gw.url, dataset="t", seed=4, batch_size=K, name=name)

    def test_from_a_step_on(self):
        with self.client(None) as plain:
            before = [[s["__key__"] for s in plain.batch(0, m)] for m in range(6)]
            epoch1 = {s["__key__"] for s in plain.samples(1)}
        # Keys of steps 3 and 5 of epoch 0 and of step 1 (before the list).
        listed = before[3][:3] + before[5][:2] + before[1][:1]
        with self.client("py-exclude") as c:
            x = c.exclude(listed, from_step=3)
            self.assertEqual(x["epoch"], 0)
            self.assertEqual(x["from_position"], 3 * K)
            self.assertEqual(x["samples"], len(listed))
            got = c.exclusion()
            self.assertEqual(sorted(got["keys"]), sorted(listed))
            self.assertEqual(got["version"], x["version"])
            # Steps before 3 are what they were; from 3 on the listed keys
            # are gone and nothing else is.
            for m in range(3):
                self.assertEqual([s["__key__"] for s in c.batch(0, m)], before[m], m)
            rest = []
            m = 3
            while True:
                try:
                    rest += [s["__key__"] for s in c.batch(0, m)]
                except brand.BrandError as e:
                    self.assertEqual(e.status, 404)
                    break
                m += 1
            head = {k for b in before[:3] for k in b}
            self.assertFalse(set(rest) & set(listed))
            self.assertEqual(len(head) + len(rest), len(set(head) | set(rest)))
            # Every sample once but the listed ones the steps before 3 had
            # not served (the one of step 1 was served before the list).
            self.assertEqual(head | set(rest), set(self.gw.files) - (set(listed) - head))
            # The next epoch leaves every listed sample out.
            self.assertEqual({s["__key__"] for s in c.samples(1)}, epoch1 - set(listed))

    def test_refused(self):
        with self.client("py-exclude-refused") as c:
            c.batch(0, 0)
            c.batch(0, 1)
            with self.assertRaises(brand.BrandError) as cm:
                c.exclude([next(iter(self.gw.files))], from_step=1)  # read already
            self.assertEqual(cm.exception.status, 409)
            self.assertEqual(cm.exception.first_editable_step, 2)
            with self.assertRaises(brand.BrandError) as cm:
                c.exclude([], from_step=5)
            self.assertEqual(cm.exception.status, 400)
            with self.assertRaises(brand.BrandError) as cm:
                c.exclusion()
            self.assertEqual(cm.exception.status, 404)
        for bad in (-1, 1.5, True, "next"):
            with self.subTest(from_step=bad), self.assertRaises(ValueError):
                self.client("py-exclude-refused").exclude(["a"], from_step=bad)
        with self.assertRaises(ValueError):
            self.client("py-exclude-refused").exclude("one-key", from_step=5)
        with self.assertRaises(ValueError):
            self.client(None).exclusion()

    def test_extend(self):
        """A second list is refused naming the current version
        (exclusion_version); previous= extends it from a later step, and
        the extension of a version no longer current is refused naming
        the new one."""
        with self.client(None) as plain:
            keys = [s["__key__"] for s in plain.batch(0, 6)]
        with self.client("py-exclude-extend") as c:
            first = c.exclude(keys[:2], from_step=3)
            with self.assertRaises(brand.BrandError) as cm:
                c.exclude(keys[2:4], from_step=4)
            self.assertEqual(cm.exception.status, 409)
            self.assertEqual(cm.exception.exclusion_version, first["version"])
            second = c.exclude(keys[2:4], from_step=4, previous=cm.exception.exclusion_version)
            self.assertEqual(second["previous"], first["version"])
            self.assertEqual(second["samples"], 4)
            self.assertEqual(c.exclusion()["keys"], keys[:4])
            with self.assertRaises(brand.BrandError) as cm:
                c.exclude(keys[4:5], from_step=5, previous=first["version"])
            self.assertEqual(cm.exception.status, 409)
            self.assertEqual(cm.exception.exclusion_version, second["version"])
            # From step 4 on, neither list's samples.
            rest = [s["__key__"] for m in range(4, 6) for s in c.batch(0, m)]
            self.assertFalse(set(rest) & set(keys[:4]))


if __name__ == "__main__":
    unittest.main()
