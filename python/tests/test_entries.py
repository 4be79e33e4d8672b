"""The entries, one a kind of job, against real gateways: each yields its
one type with the arguments its kind needs, refuses what the gateway's
table refuses before any request (naming the pair), and is a dataset the
PyTorch idioms drive unchanged — ``len()``, ``set_epoch`` (on the loader's
sampler, where Lightning calls it), iterating twice, persistent workers,
and a plain ``torch.utils.data`` training loop that checkpoints the
loader's state beside the model's and resumes to the same weights.

The reproduction: ``BrandDataset(url, brand.Options(job=brand.Job(...)))``
took about 35 fields in the server's words and yielded sample dicts,
lists or dicts of tensors depending on the job."""

from __future__ import annotations

import io
import os
import sys
import threading
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import gateway, tensor_gateway  # noqa: E402
from tokengateway import PAD, SEQ, token_gateway  # noqa: E402
from videogateway import video_gateway  # noqa: E402

import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import brand  # noqa: E402
from brand import _compat  # noqa: E402
from brand.torch import (BrandDataset, ClipBatch, SampleBatch, SequenceBatch, TensorBatch,  # noqa: E402
                         WindowBatch)
from brand.torch._batches import window_batch  # noqa: E402
from brand.torch._shm import BLOCK_HEAD, Blocks, Board  # noqa: E402

NOWHERE = "http://127.0.0.1:1"  # no request may be made


def _message(a: str, b: str) -> str:
    for cell in _compat.table()["pairs"]:
        if cell["kind"] == "refuse" and {cell["a"], cell["b"]} == {a, b}:
            return cell["message"]
    raise AssertionError(f"the table refuses no pair {a}, {b}")


def _storage(t):
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


class TestTypes(unittest.TestCase):
    def test_samples(self):
        gw = gateway()
        ds = brand.Samples(gw.url, "t", batch_size=9, seed=3, ahead=1)
        loader = ds.loader(num_workers=2, prefetch_factor=1)
        keys = []
        steps = 0
        for b in loader:
            self.assertIsInstance(b, SampleBatch)
            self.assertEqual(len(b.keys), len(b.fields["jpg"]))
            for k, data, cls in zip(b.keys, b.bytes("jpg"), b.bytes("cls")):
                self.assertEqual(data, gw.files[k]["jpg"])
                self.assertEqual(cls, gw.files[k]["cls"])
            self.assertEqual(b.labels().tolist(), [int(gw.files[k]["cls"]) for k in b.keys])
            # Every member a view of the one buffer its batch was read
            # into, which crossed from the worker whole: no copy a member.
            members = b.fields["jpg"] + b.fields["cls"]
            self.assertTrue(all(t.dtype == torch.uint8 for t in members))
            self.assertEqual(len({t.data_ptr() - t.storage_offset() for t in members}), 1)
            self.assertIsNone(b.datasets)
            keys += b.keys
            steps += 1
        self.assertEqual(steps, len(loader))
        self.assertEqual(sorted(keys), sorted(gw.files))

    def test_samples_in_workers_blocks(self):
        """A loader's steps of brand.Samples reach the trainer in their
        workers' shared blocks, reused, by reference; a step is never
        overwritten while the trainer holds it, however many it holds
        (each checked again as it is let go, three steps later), over
        epochs of persistent workers and of workers forked each epoch.
        The blocks' flags were once cleared twice for a step's entries,
        and the steps overwritten (python/bench/blockrace.py)."""
        from brand.torch._shm import BLOCK_HEAD, BLOCK_MAGIC

        gw = gateway()

        def check(b):
            for k, data, cls in zip(b.keys, b.bytes("jpg"), b.bytes("cls")):
                self.assertEqual(data, gw.files[k]["jpg"], k)
                self.assertEqual(cls, gw.files[k]["cls"], k)

        for persistent in (True, False):
            ds = brand.Samples(gw.url, "t", batch_size=9, seed=5, ahead=1)
            loader = ds.loader(num_workers=2, prefetch_factor=2, persistent_workers=persistent)
            in_blocks = 0
            for epoch in range(3):
                ds.set_epoch(epoch)
                held = []
                for b in loader:
                    check(b)
                    t = b.fields["jpg"][0]
                    head = torch.empty(0, dtype=torch.uint8).set_(_storage(t), 0, (8,), (1,)).numpy().tobytes()
                    if head == BLOCK_MAGIC and t.storage_offset() >= BLOCK_HEAD:
                        in_blocks += 1
                    held.append(b)
                    if len(held) > 3:
                        check(held.pop(0))
                for b in held:
                    check(b)
            self.assertGreater(in_blocks, 0, f"persistent={persistent}: no step came in a worker's block")

    def test_samples_read_into_workers_blocks(self):
        """A worker of a loader of brand.Samples reads each batch straight
        into one of its shared blocks and copies no byte of it: its step's
        members are spans of that block, made tensors only in the
        trainer's process. Before, the body was read into the client's own
        buffer and copied into a block (a fresh buffer, zeroed, whenever
        the steps held the last: 31 % of a worker's CPU at 100 KiB a
        sample), and every member made a tensor in the worker and again in
        the trainer."""
        import multiprocessing

        from brand.torch import _batches, _shm

        gw = gateway()
        ctx = multiprocessing.get_context("fork")
        bodies, copies, made = ctx.Value("i", 0), ctx.Value("i", 0), ctx.Value("i", 0)
        body, take = _shm.Blocks.body, _shm.Blocks.take
        views = _batches._views
        reading = threading.local()  # in Blocks.body, whose take is the body's

        def counted_body(blocks, n):
            with bodies.get_lock():
                bodies.value += 1
            reading.on = True
            try:
                return body(blocks, n)
            finally:
                reading.on = False

        def counted_take(blocks, nbytes, shape):
            if not getattr(reading, "on", False):
                with copies.get_lock():
                    copies.value += 1
            return take(blocks, nbytes, shape)

        def counted_views(*a):
            if torch.utils.data.get_worker_info() is not None:
                with made.get_lock():
                    made.value += 1
            return views(*a)

        for name, f in (("body", counted_body), ("take", counted_take)):
            self.addCleanup(setattr, _shm.Blocks, name, getattr(_shm.Blocks, name))
            setattr(_shm.Blocks, name, f)
        self.addCleanup(setattr, _batches, "_views", views)
        _batches._views = counted_views
        ds = brand.Samples(gw.url, "t", batch_size=9, seed=2, ahead=1)
        loader = ds.loader(num_workers=2, prefetch_factor=2, multiprocessing_context=ctx)
        steps = 0
        for b in loader:
            self.assertEqual(b.bytes("jpg"), [gw.files[k]["jpg"] for k in b.keys])
            steps += 1
        self.assertEqual(steps, len(loader))
        self.assertGreaterEqual(bodies.value, steps, "the workers read batches elsewhere than their blocks")
        self.assertEqual(copies.value, 0, "a worker copied a batch into a block")
        self.assertEqual(made.value, 0, "a worker made its step's tensors")

    def test_samples_pickle_as_one_buffer(self):
        """A step crosses from a worker as its one buffer and where each
        member lies: unpickled, a step of 50 samples rebuilds one storage
        (one descriptor passed), not one a member (100)."""
        import pickle
        from multiprocessing.reduction import ForkingPickler

        gw = gateway()
        ds = brand.Samples(gw.url, "t", batch_size=50, seed=3)
        b = next(iter(ds))
        self.assertEqual(len({t.data_ptr() - t.storage_offset() for t in b.fields["jpg"]}), 1)
        data = ForkingPickler.dumps(b)
        import torch.multiprocessing.reductions as reductions

        rebuilt = []
        fd = reductions.rebuild_storage_fd
        self.addCleanup(setattr, reductions, "rebuild_storage_fd", fd)
        reductions.rebuild_storage_fd = lambda *a: rebuilt.append(1) or fd(*a)
        got = pickle.loads(data)
        self.assertEqual(len(rebuilt), 1, "the step pickles a storage (a descriptor) a member")
        self.assertIsInstance(got, SampleBatch)
        self.assertEqual(got.keys, b.keys)
        self.assertEqual(got.bytes("jpg"), [gw.files[k]["jpg"] for k in b.keys])
        self.assertEqual(len({t.data_ptr() - t.storage_offset() for t in got.fields["jpg"]}), 1)

    def test_samples_blocks_cross_once(self):
        """A loader's process maps each of its workers' blocks once, and a
        step on a block crosses as its slot and its members' spans: over
        two epochs of persistent workers after a first, the trainer's
        process rebuilds a storage (a descriptor passed through a worker's
        socket, mapped anew) at most once a block, not once a step (68
        steps). Every step still on a storage of its own, which frees its
        block when let go (test_samples_in_workers_blocks reads them back
        held three deep)."""
        import torch.multiprocessing.reductions as reductions

        from brand.torch import _shm

        if not _shm.can_keep():
            self.skipTest("this torch gives no block descriptor: each step crosses as its block")
        gw = gateway()
        ds = brand.Samples(gw.url, "t", batch_size=9, seed=4, ahead=1)
        loader = ds.loader(num_workers=2, prefetch_factor=2, persistent_workers=True)
        rebuilt = []
        fd = reductions.rebuild_storage_fd
        self.addCleanup(setattr, reductions, "rebuild_storage_fd", fd)
        steps = 0
        for epoch in range(3):
            ds.set_epoch(epoch)
            for b in loader:
                self.assertEqual(b.bytes("jpg"), [gw.files[k]["jpg"] for k in b.keys])
                self.assertEqual(b.bytes("cls"), [gw.files[k]["cls"] for k in b.keys])
                t = b.fields["jpg"][0]
                self.assertGreaterEqual(t.storage_offset(), BLOCK_HEAD, "a step not on a worker's block")
                self.assertEqual(_storage(b.fields["cls"][-1]).data_ptr(), _storage(t).data_ptr())
                steps += epoch > 0
            if epoch == 0:
                # Counted in this process alone, the workers started (they
                # would pickle the counting function with a step).
                reductions.rebuild_storage_fd = lambda *a: rebuilt.append(1) or fd(*a)
        blocks = 2 * loader.blocks_per_worker()
        self.assertGreater(steps, blocks, "too few steps to tell a block's crossing from a step's")
        self.assertLessEqual(len(rebuilt), blocks, f"{len(rebuilt)} storages rebuilt for {steps} steps")

    def test_samples_crossing(self):
        """A worker sends a block with its first step on it and names its
        slot after; a block replaced in its slot is sent again. In the
        loader's process each step is on a storage of its own over the
        block kept for its slot, which frees the block when every tensor
        of the step is let go."""
        import gc

        from brand.torch import _shm

        if not _shm.can_keep():
            self.skipTest("this torch gives no block descriptor")
        board = Board(1, per_worker=2)
        blocks = Blocks(board, 0)
        t = blocks.take(100, (100,))
        token, slot, carrier = blocks.crossing(t)
        self.assertEqual((token, slot), (board.token, 0))
        self.assertIsNotNone(carrier)
        self.assertEqual(blocks.crossing(t[10:20]), (board.token, 0, None), "a block sent twice")
        self.assertIsNone(blocks.crossing(torch.zeros(4, dtype=torch.uint8)), "a tensor on no block crossed")
        t[:3] = torch.tensor([7, 8, 9], dtype=torch.uint8)
        one = _shm.step_block(token, slot, carrier)
        two = _shm.step_block(token, slot, None)
        self.assertEqual(one[BLOCK_HEAD:BLOCK_HEAD + 3].tolist(), [7, 8, 9])
        self.assertEqual(one.data_ptr(), two.data_ptr())
        self.assertIsNot(_storage(one)._cdata, _storage(two)._cdata)
        board.received({"x": one[BLOCK_HEAD:BLOCK_HEAD + 5]})
        board.received({"x": two[BLOCK_HEAD + 5:BLOCK_HEAD + 9]})
        del t
        del one
        gc.collect()
        self.assertEqual(board.held_slots(), [0], "a block freed while a step on it is held")
        del two
        gc.collect()
        self.assertEqual(board.held_slots(), [])
        self.assertEqual(int(board.flags[0]), 0, "a block no step refers to is not freed")
        # Outgrown, the slot's block is made anew and sent again.
        big = blocks.take(1 << 20, (1 << 20,))
        self.assertIsNotNone(blocks.crossing(big)[2], "a new block in a slot crossed as the slot alone")
        with self.assertRaises(RuntimeError):
            _shm.step_block("another loader's", 0, None)

    def test_sample_batch_spans(self):
        """A step's members as spans of its buffer, each column found in
        one pass: a sample lacking a member (None), an empty member, and a
        read-only buffer (one member at a time) give the same bytes."""
        from brand.client import Batch
        from brand.torch._batches import sample_batch

        for readonly in (False, True):
            buf = bytearray(b"JPGcXYZd")
            mv = memoryview(bytes(buf) if readonly else buf)
            batch = Batch([{"__key__": "a", "jpg": mv[0:3], "cls": mv[3:4]},
                           {"__key__": "b", "jpg": mv[4:4]},
                           {"__key__": "c", "jpg": mv[4:7], "cls": mv[7:8]}])
            batch.body = mv
            b = sample_batch(batch)
            self.assertEqual(b.keys, ["a", "b", "c"])
            self.assertEqual(list(b.fields), ["jpg", "cls"])
            self.assertEqual(b.bytes("jpg"), [b"JPG", b"", b"XYZ"], f"readonly={readonly}")
            self.assertEqual(b.bytes("cls"), [b"c", None, b"d"], f"readonly={readonly}")

    def test_samples_decoded(self):
        gw = gateway()
        ds = brand.Samples(gw.url, "t", batch_size=50, decode=lambda s: {"__key__": s["__key__"], "n": len(s["jpg"])})
        b = next(iter(ds))
        self.assertEqual(list(b.fields), ["n"])
        self.assertEqual(b.fields["n"], [len(gw.files[k]["jpg"]) for k in b.keys])

    def test_tensors(self):
        gw = tensor_gateway()
        ds = brand.Tensors(gw.url, "img2", transform="crop32", batch_size=16, seed=1)
        n = 0
        for b in ds.loader(num_workers=2):
            self.assertIsInstance(b, TensorBatch)
            self.assertEqual(b.images.dtype, torch.uint8)
            self.assertEqual(tuple(b.images.shape), (len(b.keys), 3, 32, 32))
            self.assertEqual(b.labels.tolist(), [int(gw.datasets["img2"][k]["cls"]) for k in b.keys])
            self.assertNotIn("cls", b.fields)
            n += len(b.keys)
        self.assertEqual(n, len(gw.datasets["img2"]))

    def test_sequences(self):
        gw = token_gateway()
        ds = brand.Sequences(gw.url, "tok", seq_len=SEQ, batch_size=4, pad=PAD, seed=11)
        steps = 0
        for b in ds.loader(num_workers=2):
            self.assertIsInstance(b, SequenceBatch)
            self.assertEqual(b.tokens.dtype, torch.int32)
            self.assertEqual(b.tokens.shape, b.positions.shape)
            self.assertEqual(b.tokens.shape[1], SEQ)
            cu = b.cu_seqlens()
            self.assertEqual(int(cu[-1]), b.positions.numel())
            self.assertTrue(bool((b.positions.reshape(-1)[cu[:-1].long()] == 0).all()))
            steps += 1
        self.assertEqual(steps, len(ds))

    def test_clips(self):
        gw = video_gateway()
        ds = brand.Clips(gw.url, "vid", clip_len=8, stride=2, batch_size=2, seed=5)
        keys = []
        for b in ds.loader(num_workers=2):
            self.assertIsInstance(b, ClipBatch)
            self.assertEqual(tuple(b.frames.shape[1:]), (8, 48, 64, 3))
            self.assertEqual(b.labels.tolist(), [0 if i["video"].startswith("cat/") else 1 for i in b.info])
            keys += b.keys
        self.assertEqual(len(keys), len(set(keys)))
        self.assertGreater(len(keys), 0)

    def test_windows(self):
        """A LeRobot step's tensors by feature name (the collate alone: the
        suite has no LeRobot dataset to serve), and a BrandLoader notes the
        shared block of a camera's frames held in its features, to free it
        once the trainer lets go of it."""
        board = Board(1, 2)
        blocks = Blocks(board, 0)
        frames = blocks.take(2 * 3 * 4, (2, 3, 4))
        action = torch.zeros(2, 3)
        b = window_batch({"__key__": ["e0/1", "e0/2"], "observation.images.top": frames, "action": action,
                          "json": [{"rows": [0, 1]}, {"rows": [1, 2]}]})
        self.assertIsInstance(b, WindowBatch)
        self.assertEqual(list(b.features), ["observation.images.top", "action"])
        self.assertEqual(b.keys, ["e0/1", "e0/2"])
        self.assertEqual(b.info[1], {"rows": [1, 2]})
        self.assertEqual(frames.storage_offset(), BLOCK_HEAD)
        board.received(b)
        self.assertEqual(board.held_slots(), [0], "the camera's block, held in the step's features, is not noted")


class TestChecked(unittest.TestCase):
    def test_refused_pairs_named_before_any_request(self):
        for make, pair in (
            (lambda: brand.Sequences(NOWHERE, "tok", importance_job="run"), ("importance", "tokens")),
            (lambda: brand.Tensors(NOWHERE, "img", importance_job="run", columns=("image",)), None),
            (lambda: brand.Clips(NOWHERE, "vid", columns=("image",)), ("clips", "columns")),
        ):
            with self.subTest(pair=pair):
                if pair is None:
                    make()  # importance, transform and columns go together
                    continue
                with self.assertRaises(ValueError) as e:
                    make()
                # The table's refusal, in the gateway's words, naming the pair.
                self.assertEqual(e.exception.what, pair)
                self.assertEqual(str(e.exception), f"brand: {_compat.table()['error']}: {_message(*pair)}")

    def test_refused_rules_named_before_any_request(self):
        """A rule of the table beyond pairs (three features every two of
        which go together: a vision mixture balanced by cost) refuses the
        entry, naming the rule's features and its message, before any
        request: the client reads it from compat.json as the gateway
        applies it."""
        vision = "size:448x448,patch:14,image:32000"
        rule = next(r for r in _compat.table()["rules"] if r.get("features") == ["mix", "vision", "balance-cost"])
        with self.assertRaises(ValueError) as e:
            brand.Sequences(NOWHERE, None, vision=vision, mix="pairs:1,web:1", balance="vision")
        # The table's refusal, in the words the gateway answers it with.
        self.assertEqual(str(e.exception), f"brand: {_compat.table()['error']}: {rule['message']}")
        brand.Sequences(NOWHERE, None, vision=vision, mix="pairs:1,web:1")  # unbalanced: taken
        with self.assertRaisesRegex(ValueError, r"features do not go together: eos applies only with pack=concat"):
            brand.Sequences(NOWHERE, "tok", eos=2)
        # A clip job of a mixture: not a pair (a bucketed job takes it) but
        # a rule, unless buckets= is given.
        rule = next(r for r in _compat.table()["rules"] if r.get("features") == ["mix", "clips"])
        with self.assertRaises(ValueError) as e:
            brand.Clips(NOWHERE, mix="a:0.5,b:0.5")
        self.assertEqual(e.exception.what, ("mix", "clips"))
        self.assertEqual(str(e.exception), f"brand: {_compat.table()['error']}: {rule['message']}")

    def test_another_kinds_arguments(self):
        with self.assertRaisesRegex(TypeError, r"brand.Samples does not take seq=.*brand.Sequences"):
            brand.Samples(NOWHERE, "t", seq=64)
        # What the table refuses is its refusal, as the gateway says it.
        with self.assertRaisesRegex(ValueError, r"^brand: features do not go together: transform and seq do not go together"):
            brand.Sequences(NOWHERE, "t", transform="flip")
        with self.assertRaisesRegex(TypeError, r"give clip= as clip_len="):
            brand.Clips(NOWHERE, "vid", clip=4)
        with self.assertRaisesRegex(ValueError, "delta_timestamps.*or frames"):
            brand.LeRobot(NOWHERE, "robot")
        with self.assertRaisesRegex(TypeError, "unknown keyword 'batchsize'"):
            brand.Samples(NOWHERE, "t", batchsize=4)
        with self.assertRaisesRegex(ValueError, r"^brand: features do not go together: vision applies only to a token job"):
            brand.Samples(NOWHERE, "t", vision="size:28x28,patch:14,image:1")
        # brand.Buckets: a bucket job with a transform, sequences or a
        # clip length is the table's refusal (where it was a TypeError in
        # other words).
        for kw, says in ((dict(transform="imagenet-train"), "a bucket job resizes and crops each image"),
                         (dict(seq=64), "seq and buckets do not go together"),
                         (dict(clip=4), "clip does not apply to a bucket job")):
            with self.subTest(buckets=kw):
                with self.assertRaisesRegex(ValueError, r"^brand: features do not go together: " + says):
                    brand.Buckets(NOWHERE, "photos", budget=1 << 22, **kw)

    def test_defaults(self):
        self.assertEqual(brand.Samples(NOWHERE, "t").batch_size, 256)
        self.assertEqual(brand.Tensors(NOWHERE, "t").options.job.transform, "imagenet-train")
        self.assertEqual(brand.Sequences(NOWHERE, "t").options.job.seq, 4096)
        self.assertEqual(brand.Clips(NOWHERE, "v").options.job.clip, 16)
        w = brand.LeRobot(NOWHERE, "r", delta_timestamps={"observation.images.top": [-0.1, 0]})
        self.assertTrue(w.options.job.clips)

    def test_brand_dataset_is_deprecated(self):
        for kw, entry in (({}, "Samples"), ({"transform": "flip"}, "Tensors"), ({"seq": 8}, "Sequences"),
                          ({"clip": 4}, "Clips"), ({"frames": [0, 1]}, "LeRobot")):
            with self.subTest(entry=entry):
                want = rf"BrandDataset\(\) is deprecated.*brand\.{entry}\b"
                with self.assertWarnsRegex(DeprecationWarning, want) as w:
                    ds = BrandDataset(NOWHERE, dataset="t", **kw)
                self.assertEqual(w.filename, os.path.abspath(__file__))
                self.assertIsInstance(ds, BrandDataset)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            brand.Samples(NOWHERE, "t")
            brand.Sequences(NOWHERE, "t")


class TestIterations(unittest.TestCase):
    def test_the_pass_methods_are_renamed(self):
        """A loader's run over an epoch is an iteration; a pass is a
        mixture component's epoch, as in the Go client and the HTTP API.
        The first releases' names still work, and warn."""
        gw = gateway()
        ds = brand.Samples(gw.url, "t", batch_size=9, seed=3)
        ds.begin_iteration()
        ds.step_received()
        self.assertEqual(ds.iteration_state()["epoch"], 0)
        ds.end_iteration(False)
        self.assertEqual(ds.state_dict()["position"], 9)
        with self.assertWarnsRegex(DeprecationWarning, "begin_pass is deprecated: it is begin_iteration"):
            ds.begin_pass()
        ds.step_received()
        ds.step_received()
        with self.assertWarnsRegex(DeprecationWarning, "pass_state is deprecated"):
            self.assertEqual(ds.pass_state()["epoch"], 0)
        with self.assertWarnsRegex(DeprecationWarning, "end_pass is deprecated"):
            ds.end_pass(False)
        self.assertEqual(ds.state_dict()["position"], 18)


def _features(b: SampleBatch) -> "tuple[torch.Tensor, torch.Tensor]":
    """A batch's inputs (each sample's first 16 bytes, scaled) and labels."""
    x = torch.zeros(len(b.keys), 16)
    for i, data in enumerate(b.fields["jpg"]):
        head = data[:16].float() / 255
        x[i, :len(head)] = head
    y = b.labels()
    return x, y


class TestTraining(unittest.TestCase):
    """A training loop as written for any DataLoader, over brand.Samples."""

    EPOCHS = 2
    STOP = 5  # steps into epoch 1 the first run stops at

    def setUp(self):
        self.gw = gateway()

    def model(self):
        torch.manual_seed(0)
        m = torch.nn.Linear(16, 4)
        return m, torch.optim.SGD(m.parameters(), lr=0.5)

    def train(self, make_loader, checkpoint=None, stop=None):
        """Trains from ``checkpoint`` (or afresh), to the end or to step
        ``stop`` of epoch 1; returns the keys trained on, the model's
        weights and, when stopped, the checkpoint."""
        m, opt = self.model()
        ds = brand.Samples(self.gw.url, "t", batch_size=12, seed=3, ahead=1)
        loader, steps_of = make_loader(ds)
        start = 0
        if checkpoint is not None:
            saved = torch.load(io.BytesIO(checkpoint))
            m.load_state_dict(saved["model"])
            opt.load_state_dict(saved["optimizer"])
            loader_state = saved["data"]
            (loader if hasattr(loader, "load_state_dict") else ds).load_state_dict(loader_state)
            start = loader_state["epoch"]
        keys = []
        for epoch in range(start, self.EPOCHS):
            ds.set_epoch(epoch)
            for step, b in enumerate(loader):
                x, y = _features(b)
                opt.zero_grad()
                torch.nn.functional.cross_entropy(m(x), y).backward()
                opt.step()
                keys += [(epoch, k) for k in b.keys]
                if epoch == 1 and step + 1 == stop:
                    buf = io.BytesIO()
                    torch.save({"model": m.state_dict(), "optimizer": opt.state_dict(),
                                "data": steps_of(loader, ds, step + 1)}, buf)
                    return keys, m.state_dict(), buf.getvalue()
        return keys, m.state_dict(), None

    def check_resumes(self, make_loader):
        whole, want, _ = self.train(make_loader)
        first, _, ckpt = self.train(make_loader, stop=self.STOP)
        rest, got, _ = self.train(make_loader, checkpoint=ckpt)
        self.assertEqual(first + rest, whole, "the resumed run read other samples than the uninterrupted one")
        for k in want:
            self.assertTrue(torch.equal(want[k], got[k]), f"{k}: the resumed run trained to other weights")

    def test_plain_dataloader(self):
        """``torch.utils.data.DataLoader`` as is, with workers: the state
        is the dataset's, told the steps received."""
        self.check_resumes(lambda ds: (DataLoader(ds, batch_size=None, num_workers=2),
                                       lambda loader, ds, n: ds.state_dict(steps=n)))

    def test_brand_loader(self):
        """The dataset's loader, with persistent workers: it counts the
        steps, so its ``state_dict`` is the checkpoint's as it is."""
        self.check_resumes(lambda ds: (ds.loader(num_workers=2, persistent_workers=True),
                                       lambda loader, ds, n: loader.state_dict()))

    def test_lightning_idioms(self):
        """What PyTorch Lightning's Trainer asks of a train loader (it is
        not installed here): ``len`` for its step count, the epoch set
        through the loader's sampler before each epoch
        (``_set_sampler_epoch``), iterated once an epoch, and a loader with
        ``state_dict``/``load_state_dict`` (its ``_Stateful``) saved in the
        checkpoint and restored before the loop goes on."""
        ds = brand.Samples(self.gw.url, "t", batch_size=12, seed=3, ahead=1)
        loader = ds.loader(num_workers=2)
        orders = []
        for epoch in range(2):
            for s in {id(o): o for o in (loader.sampler, getattr(loader.batch_sampler, "sampler", None))
                      if o is not None}.values():
                if callable(getattr(s, "set_epoch", None)):
                    s.set_epoch(epoch)
            n = len(loader)
            got = [b.keys for b in loader]
            self.assertEqual(len(got), n)
            self.assertEqual(ds.epoch, epoch)
            orders.append(got)
        self.assertNotEqual(orders[0], orders[1], "set_epoch through the sampler did not reach the dataset")
        self.assertEqual(sorted(sum(orders[0], [])), sorted(sum(orders[1], [])))
        # Stopped mid-epoch 1 and restored into a new loader: the rest.
        it = iter(loader)
        head = [next(it).keys for _ in range(3)]
        state = loader.state_dict()
        del it
        other = brand.Samples(self.gw.url, "t", batch_size=12, seed=3, ahead=1).loader(num_workers=3)
        other.load_state_dict(state)
        self.assertEqual(head + [b.keys for b in other], orders[1][:3] + orders[1][3:])


if __name__ == "__main__":
    unittest.main()
