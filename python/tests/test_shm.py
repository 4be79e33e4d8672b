"""A loader worker's shared blocks: mapped into the worker at once."""

from __future__ import annotations

import os
import resource
import unittest

from gateway import HERE  # noqa: F401 - puts the package on the path

import torch  # noqa: E402  (a missing torch is an error, not a skip)

import types  # noqa: E402
import warnings  # noqa: E402

import brand  # noqa: E402
from brand.torch import _shm  # noqa: E402
from brand.torch._shm import BLOCK_HEAD, BLOCK_MAGIC, Blocks, Board, PrivateTorchWarning  # noqa: E402
from gateway import tensor_gateway  # noqa: E402


def _kernel() -> "tuple[int, int]":
    major, minor = os.uname().release.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


class TestPopulate(unittest.TestCase):
    @unittest.skipUnless(os.uname().sysname == "Linux", "madvise(MADV_POPULATE_WRITE) is Linux's")
    def test_a_block_is_mapped_before_it_is_written(self):
        """A worker maps a block's pages into its page tables in one call
        when it takes it (Linux 5.14 and later), so that reading a batch
        into it faults no page in: the faults were most of a worker's CPU
        over a short pass."""
        if _kernel() < (5, 14):
            self.skipTest(f"kernel {os.uname().release} has no MADV_POPULATE_WRITE")
        blocks = Blocks(Board(1, 2), 0)
        n = 8 << 20
        body = blocks.body(n)
        self.assertIsNotNone(body)
        self.assertGreaterEqual(blocks.mapped[0], BLOCK_HEAD + n)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t = torch.frombuffer(body, dtype=torch.uint8)
        t[::4096] = 1
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        self.assertLess(faults, n // 4096 // 8, f"{faults} page faults writing a populated block of {n >> 20} MiB")


def _in_block(t: torch.Tensor) -> bool:
    """Whether ``t`` lies in a worker's shared block (handed over by
    reference), by the block's head."""
    st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    head = torch.empty(0, dtype=torch.uint8).set_(st, 0, (8,), (1,))
    return t.storage_offset() >= BLOCK_HEAD and head.numpy().tobytes() == BLOCK_MAGIC


class TestWithoutPrivateCalls(unittest.TestCase):
    """The loader on a torch without the private storage calls the blocks
    use (``_new_shared``, ``_share_fd_cpu_``, ``_new_shared_fd_cpu``),
    simulated by a storage class without them where ``_shm`` looks them
    up: a warning names what is missing, and the public path hands every
    step over by reference as the private one does, with the same bytes."""

    def read(self, persistent: bool):
        gw = tensor_gateway()
        ds = brand.Tensors(gw.url, "img2", transform="crop32", batch_size=16, seed=1, ahead=1)
        loader = ds.loader(num_workers=2, persistent_workers=persistent)
        got = {}
        for epoch in range(2):
            ds.set_epoch(epoch)
            for b in loader:
                self.assertTrue(_in_block(b.images), "a step was copied, not handed over in its block")
                for k, img in zip(b.keys, b.images):
                    got[epoch, k] = img.numpy().tobytes()
        return got

    def test_public_path(self):
        # Workers forked for each iteration, and persistent ones (whose
        # header is checked alone below too).
        want = {p: self.read(p) for p in (False, True)}
        self.addCleanup(setattr, _shm, "UntypedStorage", _shm.UntypedStorage)
        self.addCleanup(setattr, _shm, "_warned", _shm._warned)
        _shm.UntypedStorage = types.SimpleNamespace()  # no attribute at all
        _shm._warned = set()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = {p: self.read(p) for p in (False, True)}
            header = _shm.IterationHeader(4096)
            self.assertTrue(header.buf.is_shared(), "the public path's header is not in shared memory")
            header.write({"epoch": 3})
            self.assertEqual(header.read(), {"epoch": 3})
        missing = {str(w.message).split("UntypedStorage.")[1].split(":")[0] for w in caught
                   if issubclass(w.category, PrivateTorchWarning)}
        self.assertEqual(missing, {"_share_fd_cpu_", "_new_shared_fd_cpu", "_new_shared"}, [str(w.message) for w in caught])
        self.assertFalse(Board(2).keeps)
        for p in (False, True):
            self.assertEqual(len(got[p]), 2 * 72)
            self.assertEqual(got[p], want[p], "the public path handed over other bytes")

    def test_public_path_samples(self):
        """brand.Samples on a torch without the private calls: its steps
        cross as their blocks, the (slot, spans) crossing needing a
        block's descriptor, with the same bytes and a warning."""
        from gateway import gateway

        gw = gateway()

        def read():
            ds = brand.Samples(gw.url, "t", batch_size=9, seed=6, ahead=1)
            loader = ds.loader(num_workers=2, persistent_workers=True)
            got = {}
            for epoch in range(2):
                ds.set_epoch(epoch)
                for b in loader:
                    for k, jpg, cls in zip(b.keys, b.bytes("jpg"), b.bytes("cls")):
                        self.assertEqual((jpg, cls), (gw.files[k]["jpg"], gw.files[k]["cls"]), k)
                        got[epoch, k] = True
            return got

        want = read()
        self.addCleanup(setattr, _shm, "UntypedStorage", _shm.UntypedStorage)
        self.addCleanup(setattr, _shm, "_warned", _shm._warned)
        _shm.UntypedStorage = types.SimpleNamespace()
        _shm._warned = set()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = read()
        self.assertTrue(any(issubclass(w.category, PrivateTorchWarning) for w in caught))
        self.assertEqual(got, want)
        self.assertEqual(len(got), 2 * len(gw.files))


if __name__ == "__main__":
    unittest.main()


class TestIterationHeader(unittest.TestCase):
    """A persistent worker reads its iteration's state from the header the
    loader's process writes. Twice under scripts/test-python.sh a worker
    spun there without end, its sequence number odd."""

    def test_a_header_over_old_memory(self):
        """The public path's block is a copy of ``torch.empty``'s memory,
        whatever it held: an odd number where the sequence number lies made
        every write end odd, and a persistent worker waited on the header
        for good (found by the timeout below, under scripts/
        test-python.sh: sequence 7596570299435334247)."""
        self.addCleanup(setattr, _shm, "new_block", _shm.new_block)
        _shm.new_block = lambda size: torch.full((size,), 0x55, dtype=torch.uint8)  # 0x5555...: odd
        header = _shm.IterationHeader(4096)
        self.assertIsNone(header.read(timeout=1), "a header never written")
        header.write({"epoch": 2})
        self.assertEqual(header.read(timeout=1), {"epoch": 2})
        header.write({"epoch": 3})
        self.assertEqual(header.read(timeout=1), {"epoch": 3})

    def test_a_write_left_under_way_is_an_error(self):
        import threading

        header = _shm.IterationHeader(4096)
        header.write({"epoch": 1})
        header._words()[0] += 1  # a write begun and never ended
        got = []

        def read():
            try:
                got.append(header.read(timeout=0.2))
            except RuntimeError as e:
                got.append(e)

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(10)
        self.assertFalse(t.is_alive(), "a worker waits without end on a write under way")
        self.assertIsInstance(got[0], RuntimeError)
        self.assertIn("mid-write", str(got[0]))


class TestBodiesLetGo(unittest.TestCase):
    """A batch read into a block (Blocks.body) and handed on to no one (an
    empty batch) frees its block at once; before, its flag stayed set until
    the next iteration, one fewer block for every such batch."""

    def test_an_unsent_body_frees_its_block(self):
        board = _shm.Board(1, per_worker=2)
        blocks = _shm.Blocks(board, 0)
        kept = blocks.body(100)
        body = blocks.body(1024)
        self.assertEqual(board.flags.tolist(), [1, 1])
        self.assertIsNone(blocks.body(10), "a third body with both blocks held")
        blocks.let_go(body[512:])  # any view of it
        self.assertEqual(board.flags.tolist(), [1, 0])
        blocks.let_go(memoryview(bytearray(8)))  # not a block's: nothing
        blocks.let_go(None)
        self.assertEqual(board.flags.tolist(), [1, 0])
        del kept


class TestBlockFreedWhenAllLetGo(unittest.TestCase):
    """A block is free again only once no tensor of the loader's process
    refers to it: a step whose tensors reach it through several storages
    (a step's members rebuilt each on a mapping of its own) keeps it held
    while any of them lives. Freed when the first of them was let go, the
    block was reused by its worker for a later step while the trainer
    still read the others: steps overwritten under load
    (python/bench/blockrace.py: 54–119 bad samples in each of four
    loaders, 1,100–2,600 with every member noted)."""

    def test_held_while_any_tensor_lives(self):
        if not _shm.can_keep():
            self.skipTest("this torch gives no block descriptor to map a block twice")
        import gc

        board = _shm.Board(1, per_worker=2)
        blocks = _shm.Blocks(board, 0)
        t = blocks.take(64, (64,))
        self.assertIsNotNone(t)
        slot = 0
        self.assertEqual(int(board.flags[slot]), 1)
        fd, size = _shm.block_fd(_shm.storage(t))
        # The loader's process: two members of one step, each rebuilt on
        # a storage of its own over the same block.
        m1, m2 = _shm.map_fd(fd, size), _shm.map_fd(fd, size)
        v1 = torch.empty(0, dtype=torch.uint8).set_(_shm.storage(m1), _shm.BLOCK_HEAD, (8,), (1,))
        v2 = torch.empty(0, dtype=torch.uint8).set_(_shm.storage(m2), _shm.BLOCK_HEAD + 8, (8,), (1,))
        del m1, m2
        board.received({"key": v1, "jpg": v2})
        del v1
        gc.collect()
        self.assertEqual(board.held_slots(), [slot])
        self.assertEqual(int(board.flags[slot]), 1, "a block freed while a member of its step is still read")
        del v2
        gc.collect()
        self.assertEqual(board.held_slots(), [])
        self.assertEqual(int(board.flags[slot]), 0, "a block no tensor refers to is not freed")

    def test_a_slot_is_freed_once(self):
        """Several entries of one slot expiring together clear its flag
        once: a worker takes a block the moment its flag is cleared, and a
        second clearing handed back as free the block it had just filled,
        to be filled again before the trainer read it."""
        import gc
        from torch.multiprocessing.reductions import StorageWeakRef

        board = _shm.Board(1, per_worker=2)
        writes: "list[tuple[int, int]]" = []

        class Flags:
            def __init__(self, t):
                self.t = t

            def __len__(self):
                return len(self.t)

            def __getitem__(self, i):
                return self.t[i]

            def __setitem__(self, i, v):
                writes.append((i, int(v)))
                self.t[i] = v

        board.flags = Flags(board.flags)
        a, b = torch.zeros(4, dtype=torch.uint8), torch.zeros(4, dtype=torch.uint8)
        board.held = [(StorageWeakRef(_shm.storage(a)), 0), (StorageWeakRef(_shm.storage(b)), 0)]
        del a, b
        gc.collect()
        board._expire()
        self.assertEqual(writes, [(0, 0)], "slot 0's flag cleared more than once")
