"""Schedules (mix_schedule=) and schedules stored under a job's name
(schedule=): the client's options, and a real gateway serving the three
datasets of test_mix (web 120 samples, code 60, books 12)."""

import json
import os
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import mix_gateway  # noqa: E402

import brand  # noqa: E402
from brand._options import job_query  # noqa: E402
from brand.torch import BrandDataset  # noqa: E402

MIX = "web:0.5,code:0.3,books:0.2"
SEED = 11
K = 8  # batch_size 8 at world 1: a step is a batch


def keys(batches):
    return [(s["__dataset__"], s["__key__"]) for b in batches for s in b]


class TestScheduleOptions(unittest.TestCase):
    def test_query(self):
        j = brand.Job(mix_schedule="0:web:0.7,code:0.3;40~80:web:0,code:1", mix_block=32)
        self.assertEqual(job_query(j)["mix_schedule"], "0:web:0.7,code:0.3;40~80:web:0,code:1")
        self.assertNotIn("mix", job_query(j))
        self.assertEqual(j.components, ("web", "code"))
        j = brand.Job(name="run", schedule_version="latest")
        self.assertEqual((job_query(j)["schedule"], job_query(j)["job"]), ("latest", "run"))

    def test_checks(self):
        for kw in (dict(mix_schedule="web:1"), dict(mix_schedule="0:web"), dict(mix_schedule="0:web:-1"),
                   dict(mix_schedule="0:web:1", mix="web:1"), dict(mix_schedule="0:web:1", dataset="t"),
                   dict(schedule_version="latest"), dict(name="n", schedule_version="v1"),
                   dict(name="n", schedule_version="latest", mix_schedule="0:web:1"),
                   dict(mix_schedule=";".join(f"{i}:web:1" for i in range(1025)))):
            with self.subTest(kw=kw), self.assertRaises(ValueError):
                brand.Job(**kw)


class TestScheduleGateway(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = mix_gateway()

    def client(self, **kw):
        return brand.Client(self.gw.url, seed=SEED, batch_size=K, mix_block=K, **kw)

    def send(self, method, job, body):
        req = urllib.request.Request(f"{self.gw.url}/jobs/{job}/schedule", json.dumps(body).encode(), method=method)
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())

    def test_inline_schedule(self):
        with self.client(mix=MIX) as c:
            plain = keys(c.epoch(0))
        with self.client(mix_schedule=f"0:{MIX};5:web:0.2,code:0.6,books:0.2") as c:
            got = keys(c.epoch(0))
        self.assertEqual(got[:5 * K], plain[:5 * K])
        self.assertNotEqual(got, plain)
        self.assertEqual(len(got), len(plain))

    def test_stored_schedule_edit_and_resume(self):
        job = "py-edit"
        v1 = self.send("PUT", job, {"schedule": f"0:{MIX}"})["version"]
        with self.client(name=job, schedule_version="latest") as c:
            c.epoch_info(0)
            self.assertEqual(c.schedule_version, v1)
            head = keys(c.batch(0, m) for m in range(4))
        edit = "6:web:0.2,code:0.6,books:0.2"
        v2 = self.send("POST", job, {"schedule": edit, "from_step": 6, "base": v1})["version"]
        # Resumed from a checkpoint pinned to v1, at batch 4: the client
        # re-pins to v2 at step 6.
        with self.client(name=job, schedule_version=v1, offset=4 * K) as c:
            rest = keys(c.epoch(0))
            self.assertEqual(c.schedule_version, v2)
        with self.client(mix_schedule=f"0:{MIX};{edit}") as c:
            whole = keys(c.epoch(0))
        self.assertEqual(head + rest, whole)
        # A dataset's state carries the version.
        ds = BrandDataset(self.gw.url, seed=SEED, batch_size=K, mix_block=K, name=job, schedule_version="latest")
        ds.samples_in_epoch(0)
        self.assertEqual(ds.state_dict()["schedule_version"], v2)

    def test_edit_races_two_workers_read_ahead(self):
        """A trainer edits its stored schedule mid-epoch while two
        DataLoader workers read ahead. An edit from the step after the one
        it is on is refused, the workers having read it (the reproduction:
        that 409 reached the training loop as a raw HTTPError); through the
        loader's helper the edit succeeds, from the first step no worker
        had read: after every step the trainer received, within
        read_ahead_steps() of it. Every step from it holds the new weights,
        and the epoch is what a job given the final schedule reads."""
        job = "py-race"
        c = brand.Client(self.gw.url, name=job)
        v1 = c.store_schedule(f"0:{MIX}")["version"]
        with self.assertRaises(brand.ScheduleConflictError) as e:
            c.store_schedule(f"0:{MIX}")
        self.assertEqual(e.exception.schedule_version, v1)
        ds = BrandDataset(self.gw.url, seed=SEED, batch_size=K, name=job, schedule_version="latest", batches=True,
                          collate=step_keys)
        loader = ds.loader(num_workers=2)
        self.assertEqual(loader.read_ahead_steps(), 2 * (2 + 2 + 2))
        steps, made = [], None
        for t, step in enumerate(loader):
            steps.append(step)
            if t != 3:
                continue
            # The workers read on while the trainer is at step 3.
            deadline = time.monotonic() + 60
            while c.schedule().get("latest_step", 0) <= t + 1:
                self.assertLess(time.monotonic(), deadline, "the workers read no step ahead")
                time.sleep(0.01)
            with self.assertRaises(brand.ScheduleConflictError) as e:
                c.edit_schedule("4:web:0,code:1,books:0", from_step=t + 1)
            self.assertGreater(e.exception.first_editable_step, t + 1)
            made = loader.edit_schedule("next:web:0,code:1,books:0")
            self.assertEqual(made["previous"], v1)
            self.assertGreater(made["from_step"], t + 1)
            self.assertLessEqual(made["from_step"], t + loader.read_ahead_steps())
        self.assertIsNotNone(made)
        self.assertEqual(ds.schedule_version, made["version"])
        self.assertEqual(ds.state_dict()["schedule_version"], made["version"])
        self.assertEqual(len(steps), 24)  # 192 samples, 8 a step
        for t, step in enumerate(steps[made["from_step"]:], made["from_step"]):
            self.assertEqual({d for d, _ in step}, {"code"}, f"step {t}, after the edit from {made['from_step']}")
        with self.client(mix_schedule=f"0:{MIX};{made['from_step']}:web:0,code:1,books:0") as plain:
            self.assertEqual([tuple(k) for s in steps for k in s], keys(plain.epoch(0)))


def step_keys(samples):
    """A step's samples as (dataset, key) pairs: collated in the workers."""
    return [(s["__dataset__"], s["__key__"]) for s in samples]


if __name__ == "__main__":
    unittest.main()
