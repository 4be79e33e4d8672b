"""brand.edits against real gateways (an append against test_append's
stub): a job's edits and feedback apart from reading it, each answered as
a typed record (the first step it applies to, the job's version), each
refusal an EditRefused carrying the first editable step or the current
version; the same editor from a training script (edits.of(reader)) and a
notebook (by the job's name); the reader's methods of the first releases
still work, deprecated, through it.

The reproduction: edits were methods of the reader (Client.exclude,
BrandDataset.edit_schedule) answering plain dicts, and a refused one a
BrandError whose fields a caller had to know to look for."""

import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import gateway, mix_gateway  # noqa: E402
from test_append import EXTENDS, PINNED, Stub  # noqa: E402

import brand  # noqa: E402
from brand import edits  # noqa: E402

K = 8
MIX = "web:0.5,code:0.5"


class TestExclusions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = gateway()

    def editor(self, name):
        ed = edits.Editor(self.gw.url, dataset="t", seed=4, batch_size=K, name=name)
        self.addCleanup(ed.close)
        return ed

    def test_typed_records_and_refusals(self):
        ed = self.editor("py-edits-x")
        keys = sorted(self.gw.files)
        made = ed.exclude(keys[:2], from_step=3)
        self.assertIsInstance(made, edits.Exclusion)
        self.assertEqual((made.from_step, made.epoch, made.from_position, made.samples), (3, 0, 3 * K, 2))
        self.assertEqual(made.previous, "")
        got = ed.exclusion()
        self.assertEqual(got.version, made.version)
        self.assertEqual(sorted(got.keys), keys[:2])
        # A second list without naming the current one: refused, naming it.
        with self.assertRaises(edits.EditRefused) as cm:
            ed.exclude(keys[2:3], from_step=4)
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(cm.exception.current_version, made.version)
        self.assertIsInstance(cm.exception, brand.BrandError)
        more = ed.exclude(keys[2:3], from_step=4, previous=cm.exception.current_version)
        self.assertEqual((more.previous, more.samples), (made.version, 3))
        # A step read: refused, naming the first step an edit could start at.
        with brand.Client(self.gw.url, dataset="t", seed=4, batch_size=K, name="py-edits-x") as reader:
            for m in range(6):
                reader.batch(0, m)
        with self.assertRaises(edits.EditRefused) as cm:
            ed.exclude(keys[3:4], from_step=5, previous=more.version)
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(cm.exception.first_editable_step, 6)
        # An edit the gateway cannot take: 400, its message.
        with self.assertRaises(edits.EditRefused) as cm:
            ed.exclude([], from_step=9, previous=more.version)
        self.assertEqual(cm.exception.status, 400)
        self.assertIsNone(cm.exception.first_editable_step)
        # 404 is no refusal of an edit: a plain BrandError.
        with self.assertRaises(brand.BrandError) as cm:
            self.editor("py-edits-none").exclusion()
        self.assertNotIsInstance(cm.exception, edits.EditRefused)
        self.assertEqual(cm.exception.status, 404)

    def test_of_a_reader_counts_its_steps(self):
        """From a training script: the editor of a dataset counts steps in
        its world (here 2: a step is 2 × 8 samples)."""
        ds = brand.Samples(self.gw.url, "t", batch_size=K, seed=4, world=2, rank=1, name="py-edits-ds")
        with edits.of(ds) as ed:
            made = ed.exclude(sorted(self.gw.files)[:1], from_step=2)
        self.assertEqual(made.from_position, 2 * 2 * K)
        with edits.of(ds.loader()) as ed:
            self.assertEqual(ed.exclusion().version, made.version)
        c = brand.Client(self.gw.url, dataset="t", seed=4, batch_size=K, name="py-edits-ds", world=2)
        self.addCleanup(c.close)
        self.assertIs(edits.of(c).client, c)
        with self.assertRaises(TypeError):
            edits.of(object())

    def test_the_readers_methods_are_deprecated(self):
        with brand.Client(self.gw.url, dataset="t", seed=4, batch_size=K, name="py-edits-old") as c:
            with self.assertWarnsRegex(DeprecationWarning, r"Client.exclude is deprecated.*brand.edits") as w:
                x = c.exclude(sorted(self.gw.files)[:1], from_step=2)
            self.assertEqual(w.filename, os.path.abspath(__file__))
            self.assertIsInstance(x, dict)
            self.assertEqual(x["from_position"], 2 * K)
            with self.assertWarns(DeprecationWarning):
                self.assertEqual(c.exclusion()["version"], x["version"])


class TestSchedules(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = mix_gateway()

    def test_typed_versions_and_the_dataset_reads_on(self):
        name = "py-edits-sched"
        with edits.Editor(self.gw.url, name=name) as ed:
            first = ed.store_schedule(f"0:{MIX}")
            self.assertIsInstance(first, edits.Schedule)
            self.assertEqual((first.from_step, first.previous), (0, ""))
            with self.assertRaises(edits.EditRefused) as cm:
                ed.store_schedule(f"0:{MIX}")
            self.assertIsInstance(cm.exception, brand.ScheduleConflictError)
            self.assertEqual(cm.exception.current_version, first.version)
        ds = brand.Samples(self.gw.url, None, batch_size=K, seed=3, name=name, schedule_version="latest",
                           mix_block=K)
        loader = ds.loader()
        it = iter(loader)
        for _ in range(3):
            next(it)
        with loader.edits() as ed:
            made = ed.edit_schedule("next:web:0.2,code:0.8")
        self.assertEqual(made.previous, first.version)
        self.assertGreaterEqual(made.from_step, 3)
        self.assertLessEqual(made.from_step, 3 + loader.read_ahead_steps())
        self.assertEqual(ds.state_dict()["schedule_version"], made.version)
        with self.assertRaises(edits.EditRefused) as cm, loader.edits() as ed:
            ed.edit_schedule("1:web:0.9,code:0.1", from_step=1)
        self.assertEqual(cm.exception.status, 409)
        self.assertGreaterEqual(cm.exception.first_editable_step, 3)
        with self.assertWarns(DeprecationWarning):
            old = loader.edit_schedule("next:web:0.5,code:0.5")
        self.assertIsInstance(old, dict)
        self.assertEqual(ds.state_dict()["schedule_version"], old["version"])
        del it


class TestAppend(unittest.TestCase):
    def test_typed_record_and_refusals(self):
        stub = Stub()
        threading.Thread(target=stub.serve_forever, daemon=True).start()
        self.addCleanup(stub.server_close)
        self.addCleanup(stub.shutdown)
        url = f"http://127.0.0.1:{stub.server_address[1]}"
        with edits.Editor(url, dataset="t", batch_size=8, name="run", index=PINNED) as ed:
            with self.assertRaises(edits.EditRefused) as cm:
                ed.append(from_step=2, index=EXTENDS)
            self.assertEqual((cm.exception.status, cm.exception.first_editable_step), (409, 4))
            with self.assertRaises(edits.EditRefused) as cm:
                ed.append(from_step=5, index="0123456789abcdef")
            self.assertEqual(cm.exception.status, 422)
            rec = ed.append(from_step=5, index=EXTENDS)
            self.assertIsInstance(rec, edits.AppendRecord)
            self.assertEqual((rec.from_step, rec.from_position, rec.new_samples, rec.index, rec.index_id),
                             (5, 40, 20, EXTENDS, PINNED))
            self.assertEqual(ed.append_record(), rec)


if __name__ == "__main__":
    unittest.main()
