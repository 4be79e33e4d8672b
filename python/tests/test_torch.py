"""brand.torch against a real gateway: DDP ranks are simulated in one process
(constructor arguments or RANK/WORLD_SIZE), DataLoader workers are real."""

import dataclasses
import os
import socket
import sys
import time
import unittest
import urllib.parse
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakecluster import Cluster  # noqa: E402
from gateway import gateway  # noqa: E402

import torch  # noqa: E402  (a missing torch is an error, not a skip)
from torch.utils.data import DataLoader  # noqa: E402

import brand  # noqa: E402
from brand.torch import BrandDataset  # noqa: E402

B = 8
SEED = 4


def to_tensors(s):
    """A decode function: the label as a tensor, the image bytes kept."""
    return {"__key__": s["__key__"], "jpg": s["jpg"], "label": torch.tensor(int(s["cls"]))}


def keys(item):
    """The keys in a DataLoader item: a list of samples, or a collated dict."""
    if isinstance(item, dict):
        return list(item["__key__"])
    return [s["__key__"] for s in item]


class TorchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = gateway()

    def order(self, epoch):
        """The epoch's order, read at world 1."""
        with brand.Client(self.gw.url, dataset="t", seed=SEED, batch_size=B) as c:
            return [s["__key__"] for s in c.samples(epoch)]

    def dataset(self, **kw):
        kw.setdefault("batch_size", B)
        return BrandDataset(self.gw.url, dataset="t", seed=SEED, **kw)

    def assertExactlyOnce(self, got):
        self.assertEqual(len(got), len(set(got)), "duplicates")
        self.assertEqual(set(got), set(self.gw.files), "lost samples")


class TestSharding(TorchTest):
    def test_exactly_once_2_ranks_2_workers_2_epochs(self):
        orders = []
        for epoch in (0, 1):
            got = []
            for rank in (0, 1):
                with mock.patch.dict(os.environ, {"RANK": str(rank), "WORLD_SIZE": "2"}):
                    ds = self.dataset(batches=True)
                    ds.set_epoch(epoch)
                    for item in DataLoader(ds, batch_size=None, num_workers=2):
                        self.assertLessEqual(len(item), B)
                        got += keys(item)
            self.assertExactlyOnce(got)
            orders.append(got)
        self.assertNotEqual(orders[0], orders[1])

    def test_dataloader_num_workers_2_full_epoch(self):
        ds = self.dataset(decode=to_tensors)
        n = 0
        for item in ds.loader(num_workers=2):
            self.assertIsInstance(item["label"], torch.Tensor)
            self.assertLessEqual(len(item["__key__"]), B)
            for k, label, jpg in zip(item["__key__"], item["label"], item["jpg"]):
                self.assertEqual(jpg, self.gw.files[k]["jpg"])
                self.assertEqual(int(label), int(self.gw.files[k]["cls"]))
                n += 1
        self.assertEqual(n, self.gw.samples)
        self.assertEqual(ds.state_dict()["position"], self.gw.samples)

    def test_steps_consume_a_prefix(self):
        """Four ranks with two workers each, in lockstep: after k steps the
        samples received are exactly the epoch's first k*4*B positions, and
        every rank's state says so."""
        order = self.order(0)
        for k in (1, 2, 3, 5):
            dss = [self.dataset(world=4, rank=r) for r in range(4)]
            its = [iter(ds.loader(num_workers=2)) for ds in dss]
            got = []
            for _ in range(k):
                for it in its:
                    got += keys(next(it))
            self.assertEqual(sorted(got), sorted(order[: k * 4 * B]), k)
            for ds in dss:
                self.assertEqual(ds.state_dict()["position"], k * 4 * B)
            del its

    def test_direct_iteration_counts(self):
        ds = self.dataset(world=2, rank=1)
        it = iter(ds)
        for _ in range(B + 3):
            next(it)
        self.assertEqual(ds.state_dict()["position"], 2 * B)  # inside a step: rounds down
        for _ in it:
            pass
        self.assertEqual(ds.state_dict()["position"], self.gw.samples)
        self.assertEqual(ds.state_dict(steps=2)["position"], 4 * B)

    def test_errors_surface(self):
        ds = BrandDataset(self.gw.url, dataset="nope", batch_size=B)
        with self.assertRaisesRegex(brand.BrandError, "unknown dataset"):
            list(ds)
        with self.assertRaisesRegex(brand.BrandError, "unknown dataset"):
            list(DataLoader(ds, batch_size=None, num_workers=1))

    def test_loader_checks(self):
        with self.assertRaises(ValueError):
            self.dataset().loader(batch_size=B + 1)
        with self.assertRaises(ValueError):  # persistent workers need workers
            self.dataset(batches=True).loader(num_workers=0, persistent_workers=True)
        ds = self.dataset(world=1)
        state = ds.state_dict()
        with self.assertRaises(ValueError):
            BrandDataset(self.gw.url, dataset="t", seed=SEED + 1).load_state_dict(state)

    def test_state_keeps_the_index_version(self):
        ds = self.dataset(world=1)
        state = ds.state_dict()
        with brand.Client(self.gw.url, dataset="t") as c:
            want = [d["index"] for d in c.datasets() if d["name"] == "t"][0]
        self.assertEqual(state["index"], want)
        # Resumed on a version no gateway holds: a clear error, not
        # another order.
        state["index"] = "0123456789abcdef"
        other = self.dataset(world=1)
        other.load_state_dict(state)
        with self.assertRaises(brand.IndexChangedError):
            list(other.loader(num_workers=0))


class TestOptions(TorchTest):
    """BrandDataset takes a Client's brand.Options, and fills in its own."""

    def test_typed_options_read_as_the_keywords(self):
        job = brand.Job(dataset="t", seed=SEED, batch_size=B, world=2, rank=1, name="torch-typed")
        ds = BrandDataset(self.gw.url, brand.Options(job=job, connection=brand.Connection(max_retries=1), ahead=1),
                          batches=True)
        self.assertEqual(ds.options, self.dataset(world=2, rank=1, name="torch-typed", max_retries=1, ahead=1,
                                                  batches=True).options)
        # Every worker's client reads with them, its own cut aside.
        c = ds._client(world=4, rank=3, offset=8)
        self.assertEqual(c.options.connection, ds.options.connection)
        self.assertEqual(c.options.ahead, 1)
        self.assertEqual((c.options.job.world, c.options.job.rank, c.options.job.offset), (4, 3, 8))
        self.assertEqual(c.options.job.name, "torch-typed")
        c.close()
        ds.set_epoch(1)
        got = [k for item in ds.loader(num_workers=2) for k in keys(item)]
        with brand.Client(self.gw.url, brand.Options(job=dataclasses.replace(job, name=None))) as c:
            want = [s["__key__"] for b in c.epoch(1) for s in b]
        self.assertEqual(got, want)

    def test_its_own_rules(self):
        url = "http://127.0.0.1:1"
        self.assertEqual(BrandDataset(url).batch_size, 32)  # it counts in batches: it must know theirs
        self.assertEqual(BrandDataset(url).options.job.batch_size, 32)
        self.assertIsNone(BrandDataset(url).options.job.world)  # detected when read
        for kw in (dict(batch_size=0), dict(offset=8), dict(collate=list)):
            with self.subTest(**kw), self.assertRaises(ValueError):
                BrandDataset(url, **kw)
        with self.assertRaisesRegex(TypeError, "unknown keyword 'decoder'"):
            BrandDataset(url, decoder=to_tensors)
        with self.assertRaisesRegex(TypeError, "brand.Options"):
            BrandDataset(url, "t")  # the first releases' positional dataset


class TestKeywords(TorchTest):
    def test_job_for_the_name_is_deprecated(self):
        url = "http://127.0.0.1:1"
        with self.assertWarnsRegex(DeprecationWarning, r"BrandDataset\(job=...\) is deprecated") as w:
            ds = BrandDataset(url, job="torch-old")
        self.assertEqual(w.filename, os.path.abspath(__file__))  # the caller's line
        self.assertEqual(ds.options, BrandDataset(url, name="torch-old").options)
        with self.assertRaisesRegex(TypeError, r"brand.Options\(job=...\)"):
            BrandDataset(url, job=brand.Job(seed=SEED))

    def test_malloc_tuning_is_opt_in(self):
        url = "http://127.0.0.1:1"
        with mock.patch("brand.torch._dataset.tune_malloc") as tune:
            BrandDataset(url)
            BrandDataset(url, brand.Options(job=brand.Job(seed=SEED)))
            tune.assert_not_called()
            BrandDataset(url, tune_malloc=True)
            tune.assert_called_once_with()


class TestJob(TorchTest):
    """job and weight among the client options: every worker's client sends
    them, and the state keeps the name."""

    def job_params(self, fc):
        """The (job, weight) of every plan and batch request fc received."""
        out = set()
        for _, path in fc.requests():
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
            out.add((q.get("job", [None])[0], q.get("weight", [None])[0]))
        return out

    def test_every_worker_sends_them(self):
        fc = Cluster(self.gw.url, 1)
        self.addCleanup(fc.close)
        ds = self.dataset(peers=fc.urls, name="torch-job", weight=0.25)
        ds.set_epoch(1)
        got = [k for item in ds.loader(num_workers=2) for k in keys(item)]
        self.assertEqual(got, self.order(1))  # the same bytes as an unnamed job
        self.assertEqual(self.job_params(fc), {("torch-job", "0.25")})

    def test_checked_at_construction(self):
        for kw in (dict(name="a b"), dict(weight=0), dict(weight=101), dict(name="a", importance_job="b")):
            with self.subTest(**kw):
                with self.assertRaises(ValueError):
                    self.dataset(**kw)

    def test_state_keeps_the_name(self):
        state = self.dataset(name="torch-run", weight=4).state_dict()
        self.assertEqual(state["job"], "torch-run")
        self.assertNotIn("weight", state)
        self.assertIsNone(self.dataset().state_dict()["job"])
        self.assertEqual(self.dataset(importance_job="torch-imp").state_dict()["job"], "torch-imp")

        # Resumed without a name: the state's.
        ds = self.dataset()
        ds.load_state_dict({**state, "position": 3 * B})
        self.assertEqual(ds.options.job.name, "torch-run")
        self.assertEqual(ds.state_dict()["job"], "torch-run")
        fc = Cluster(self.gw.url, 1)
        self.addCleanup(fc.close)
        ds = self.dataset(peers=fc.urls)
        ds.load_state_dict({**state, "epoch": 0, "position": 3 * B})
        got = [k for item in ds.loader(num_workers=2) for k in keys(item)]
        self.assertEqual(got, self.order(0)[3 * B:])
        self.assertEqual(self.job_params(fc), {("torch-run", None)})

        # Given a name, the dataset keeps it; a name changes no byte.
        for kw in (dict(name="torch-new"), dict(importance_job="torch-new")):
            with self.subTest(**kw):
                ds = self.dataset(**kw)
                ds.load_state_dict(state)
                self.assertEqual(ds.state_dict()["job"], "torch-new")
                if "importance_job" in kw:
                    self.assertIsNone(ds.options.job.name)

        # A state from before job names, and one with a bad name.
        ds = self.dataset()
        ds.load_state_dict({k: v for k, v in state.items() if k != "job"})
        self.assertIsNone(ds.state_dict()["job"])
        with self.assertRaises(ValueError):
            self.dataset().load_state_dict({**state, "job": "a b"})


class TestImportance(TorchTest):
    def test_epochs_drawn_from_the_sealed_version(self):
        job = "torch-imp"
        with brand.Client(self.gw.url, dataset="t", importance_job=job) as c:
            every = sorted(self.gw.files)
            c.feedback(0, every, [3.0 if k.startswith("c0/") else 0.1 for k in every])
            v = c.seal(0)
        ds = self.dataset(batches=True, importance_job=job, hot=1)
        with self.assertRaises(ValueError):
            self.dataset(batches=True).set_importance(v)
        ds.set_importance(v)
        ds.set_epoch(1)
        got = []
        for item in DataLoader(ds, batch_size=None, num_workers=2):
            got += keys(item)
        self.assertEqual(len(got), self.gw.samples)  # the epoch keeps its length
        self.assertLess(len(set(got)), self.gw.samples, "drawn with replacement: some repeat")
        self.assertGreater(sum(k.startswith("c0/") for k in got) / len(got), 0.35)


class TestCluster(TorchTest):
    """Two DDP ranks with two workers each on a cluster of two fake nodes
    (fakecluster.py): server rank w*2 + r of world 4 reads through its home,
    node (w*2 + r) * 2 // 4, and fails over when it is down."""

    def run_epoch(self, fc, epoch):
        got = []
        for rank in (0, 1):
            ds = self.dataset(world=2, rank=rank, peers=fc.urls)
            ds.set_epoch(epoch)
            for item in ds.loader(num_workers=2):
                got += keys(item)
        self.assertExactlyOnce(got)
        return got

    def server_ranks(self, fc, node):
        """The (world, rank) of the requests for plans and batches of the
        workers' world that node k received."""
        out = set()
        for k, path in fc.requests():
            if k == node and path.startswith("/epoch/"):
                q = dict(p.split("=", 1) for p in path.split("?", 1)[1].split("&"))
                if q["world"] == "4":
                    out.add((int(q["world"]), int(q["rank"])))
        return out

    def test_each_worker_reads_through_its_home(self):
        fc = Cluster(self.gw.url, 2)
        self.addCleanup(fc.close)
        got = self.run_epoch(fc, 0)
        self.assertEqual(sorted(got), sorted(self.order(0)))
        self.assertEqual(self.server_ranks(fc, 0), {(4, 0), (4, 1)})
        self.assertEqual(self.server_ranks(fc, 1), {(4, 2), (4, 3)})

    def test_a_node_down(self):
        fc = Cluster(self.gw.url, 2)
        self.addCleanup(fc.close)
        fc.fail(1, 503)
        self.run_epoch(fc, 1)
        self.assertEqual(self.server_ranks(fc, 0), {(4, 0), (4, 1), (4, 2), (4, 3)})
        self.assertEqual(self.server_ranks(fc, 1), {(4, 2), (4, 3)})  # tried first, then passed over

    def test_a_silent_node_with_probe_after(self):
        # Worker 0's home, node 0, completes TCP handshakes and answers
        # nothing (a stopped gateway); probe_after reaches its client.
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        self.addCleanup(s.close)
        fc = Cluster(self.gw.url, 1)
        self.addCleanup(fc.close)
        ds = self.dataset(world=1, rank=0, peers=[f"http://127.0.0.1:{s.getsockname()[1]}", fc.urls[0]],
                          probe_after=1.0, timeout=30)
        ds.set_epoch(0)
        t0 = time.monotonic()
        got = [k for item in ds.loader(num_workers=2) for k in keys(item)]
        took = time.monotonic() - t0
        self.assertEqual(got, self.order(0))
        self.assertLess(took, 8, f"the epoch took {took:.1f} s")


def with_pid(s):
    """A decode function: the sample's key and the worker that read it."""
    return {"__key__": s["__key__"], "pid": os.getpid()}


def pids_of(item):
    """The workers that read a DataLoader item of with_pid's samples."""
    if isinstance(item, dict):
        return {int(p) for p in item["pid"]}
    return {s["pid"] for s in item}


class TestPersistentWorkers(TorchTest):
    """persistent_workers=True: the workers live across passes and still
    read each pass's epoch (set_epoch) and a restored position
    (load_state_dict), as workers forked for each pass do."""

    def passes(self, loader, ds, epochs):
        """Per epoch: the keys in the order the loader gave them, and the
        workers that read them."""
        out = []
        for e in epochs:
            ds.set_epoch(e)
            got, pids = [], set()
            for item in loader:
                got += keys(item)
                pids |= pids_of(item)
            out.append((got, pids))
        return out

    def test_each_epoch_as_without(self):
        epochs = (0, 1, 2)
        ds = self.dataset(decode=with_pid)
        kept = self.passes(ds.loader(num_workers=2, persistent_workers=True), ds, epochs)
        ds = self.dataset(decode=with_pid)
        forked = self.passes(ds.loader(num_workers=2), ds, epochs)
        for e, (k, f) in enumerate(zip(kept, forked)):
            self.assertEqual(k[0], f[0], f"epoch {e}: persistent workers gave another order")
            self.assertEqual(sorted(k[0]), sorted(self.order(e)), e)
        self.assertEqual(len(kept[0][1]), 2)
        self.assertTrue(kept[0][1] == kept[1][1] == kept[2][1], f"the workers changed: {[k[1] for k in kept]}")
        self.assertFalse(forked[0][1] & forked[1][1], "workers forked each pass kept their pids")
        self.assertEqual(ds.state_dict()["position"], self.gw.samples)

    def test_resume_mid_epoch(self):
        """A state saved three steps into epoch 1, loaded into a dataset
        whose persistent workers already read epoch 0: they read the rest
        of epoch 1 exactly, then epoch 2 whole."""
        ds = self.dataset(batches=True, decode=with_pid)
        ds.set_epoch(1)
        it = iter(ds.loader(num_workers=2))
        first = [k for _ in range(3) for k in keys(next(it))]
        state = ds.state_dict()
        del it
        self.assertEqual(state["position"], 3 * B)
        ref = self.dataset(batches=True)
        ref.load_state_dict(state)
        rest = [k for item in ref.loader(num_workers=2) for k in keys(item)]

        ds = self.dataset(batches=True, decode=with_pid)
        loader = ds.loader(num_workers=2, persistent_workers=True)
        (whole, pids), = self.passes(loader, ds, (0,))
        self.assertEqual(sorted(whole), sorted(self.order(0)))
        # Stopped early, holding a step: the next pass is still exact.
        ds.set_epoch(3)
        held = next(iter(loader))
        ds.load_state_dict(state)
        got, again = [], set()
        for item in loader:
            got += keys(item)
            again |= pids_of(item)
        self.assertEqual(got, rest)
        self.assertEqual(sorted(first + got), sorted(self.order(1)))
        self.assertEqual(ds.state_dict()["position"], self.gw.samples)
        self.assertEqual(again, pids)
        (after, later), = self.passes(loader, ds, (2,))
        self.assertEqual(sorted(after), sorted(self.order(2)))
        self.assertEqual(later, pids)
        self.assertEqual(len(keys(held)), B)


class TestResume(TorchTest):
    """Preempted at world 4 (2 workers a rank), resumed at another world and
    worker count with the gateway's offset: nothing lost, nothing twice.
    These need the gateway's `offset` parameter."""

    def run_resume(self, new_world, new_workers, steps=3, epoch=1, batches=False):
        dss = [self.dataset(world=4, rank=r, batches=batches) for r in range(4)]
        for ds in dss:
            ds.set_epoch(epoch)
        its = [iter(ds.loader(num_workers=2)) for ds in dss]
        got = []
        for _ in range(steps):
            for it in its:
                got += keys(next(it))
        state = dss[0].state_dict()
        del its
        self.assertEqual(state["epoch"], epoch)
        self.assertEqual(state["position"], steps * 4 * B)

        after = []
        for r in range(new_world):
            ds = self.dataset(world=new_world, rank=r, batches=batches)
            ds.load_state_dict(state)
            ds.set_epoch(epoch)  # as a training loop does; keeps the resume point
            for item in ds.loader(num_workers=new_workers):
                after += keys(item)
            self.assertEqual(ds.state_dict()["position"], self.gw.samples)
            # The next epoch starts from its beginning.
            ds.set_epoch(epoch + 1)
            self.assertEqual(ds.state_dict()["position"], 0)
        self.assertEqual(len(after), self.gw.samples - steps * 4 * B)
        self.assertExactlyOnce(got + after)

    def test_resume_world_4_to_3(self):
        self.run_resume(3, 3)

    def test_resume_world_4_to_8(self):
        self.run_resume(8, 1, steps=2, batches=True)

    def test_resume_world_4_to_1(self):
        self.run_resume(1, 0, steps=5)

    def test_resume_at_end_of_epoch(self):
        ds = self.dataset()
        ds.load_state_dict({**ds.state_dict(), "position": self.gw.samples})
        self.assertEqual(list(ds), [])


if __name__ == "__main__":
    unittest.main()
