"""Clip jobs (clip=) against a real gateway decoding videos: the client's
arrays and BrandDataset's steps view a batch's frames as (B, T, H, W, 3)
on its buffer, every frame is PyAV's, every clip once an epoch, and a
state resumes exactly at another world size."""

from __future__ import annotations

import dataclasses
import unittest

from gateway import HERE  # noqa: F401 - puts the package on the path
from videogateway import video_gateway

import brand

T, B = 8, 2
JOB = brand.Job(dataset="vid", seed=5, batch_size=B, clip=T, stride=2)


def _clips(per_video: int = 75) -> int:
    span = (T - 1) * 2 + 1
    starts = per_video - span + 1
    return 3 * -(-starts // span)


class TestClipArrays(unittest.TestCase):
    def test_frames_are_pyavs_on_the_buffer(self):
        import numpy

        gw = video_gateway()
        seen = []
        with brand.Client(gw.url, brand.Options(job=JOB)) as c:
            for batch in c.epoch(0):
                step = brand.clip_arrays(batch)
                frames = step["frames"]
                self.assertEqual(frames.dtype, numpy.uint8)
                self.assertEqual(frames.shape, (len(batch), T, 48, 64, 3))
                body = numpy.frombuffer(batch.body, numpy.uint8)
                self.assertTrue(numpy.shares_memory(frames, body), "the frames are a copy, not a view of the batch")
                for i, js in enumerate(step["json"]):
                    seen.append(step["__key__"][i])
                    self.assertEqual(int(step["cls"][i]), 0 if js["video"].startswith("cat/") else 1)
                    ref = gw.reference(js["video"])
                    for t, pts in enumerate(js["pts"]):
                        self.assertEqual(frames[i, t].tobytes(), ref[pts], f"{js['video']} pts {pts}")
        self.assertEqual(len(seen), _clips())
        self.assertEqual(len(set(seen)), len(seen))


class TestClipDataset(unittest.TestCase):
    def test_steps_and_resume_at_another_world(self):
        import torch
        from brand.torch import BrandDataset

        gw = video_gateway()
        ds = BrandDataset(gw.url, brand.Options(job=dataclasses.replace(JOB, world=1, rank=0)))
        ds.set_epoch(0)
        it = iter(ds)
        first = next(it)
        self.assertEqual(first["frames"].dtype, torch.uint8)
        self.assertEqual(tuple(first["frames"].shape), (B, T, 48, 64, 3))
        frames = first["frames"]
        storage = frames.untyped_storage() if hasattr(frames, "untyped_storage") else frames.storage()
        self.assertGreater(storage.nbytes(), frames.numel(),
                           "the frames are a view of the batch's buffer, not a copy of them")
        self.assertEqual(first["cls"].dtype, torch.int64)
        state = ds.state_dict(steps=1)
        self.assertEqual(state["clip"], T)
        del it
        # Two ranks resume where one stopped: the rest of the epoch, once.
        rest = []
        for r in range(2):
            other = BrandDataset(gw.url, brand.Options(job=dataclasses.replace(JOB, world=2, rank=r)))
            other.load_state_dict(state)
            for step in other:
                rest += step["__key__"]
        got = list(first["__key__"]) + rest
        self.assertEqual(len(got), _clips())
        self.assertEqual(len(set(got)), len(got))
        with self.assertRaises(ValueError):
            BrandDataset(gw.url, brand.Options(job=dataclasses.replace(JOB, clip=4))).load_state_dict(state)

    def test_samples_refused(self):
        """A clip job yields steps: batches=False is an error, not
        overridden in silence (it was). Made without asking a gateway."""
        from brand.torch import BrandDataset

        with self.assertRaisesRegex(ValueError, "batches=False"):
            BrandDataset("http://127.0.0.1:1", brand.Options(job=JOB), batches=False)
        self.assertTrue(BrandDataset("http://127.0.0.1:1", brand.Options(job=JOB)).batches)

    def test_workers_hand_frames_over_by_reference(self):
        """A BrandLoader's workers read each clip batch into their shared
        blocks, so a step's frames reach the trainer's process as the
        block itself (its head names it), not as a copy PyTorch makes into
        a new block for every step — what cost the training node about
        45 ms a 320x240 clip of 16 frames (brand-bench video). The blocks
        are reused: a pass of more steps than a worker has blocks makes
        no more of them. Every clip once, with PyAV's frames."""
        import torch
        from brand.torch import BrandDataset
        from brand.torch._shm import BLOCK_MAGIC, BLOCKS_PER_WORKER

        gw = video_gateway()
        # One clip a step: more steps than two workers have blocks.
        ds = BrandDataset(gw.url, brand.Options(job=dataclasses.replace(JOB, world=1, rank=0, batch_size=1)))
        ds.set_epoch(0)
        seen, blocks = [], set()
        for workers in (1, 2):
            seen.clear()
            for step in ds.loader(num_workers=workers):
                frames = step["frames"]
                st = frames.untyped_storage() if hasattr(frames, "untyped_storage") else frames.storage()
                head = torch.empty(0, dtype=torch.uint8).set_(st, 0, (8,), (1,)).numpy().tobytes()
                self.assertEqual(head, BLOCK_MAGIC, f"{workers} workers: the frames came over in a block of PyTorch's own")
                blocks.add((workers, st.data_ptr()))
                for i, js in enumerate(step["json"]):
                    ref = gw.reference(js["video"])
                    for t, pts in enumerate(js["pts"]):
                        self.assertEqual(frames[i, t].numpy().tobytes(), ref[pts], f"{js['video']} pts {pts}")
                seen += step["__key__"]
                del step, frames, st
            self.assertEqual(sorted(seen), sorted(set(seen)))
            self.assertEqual(len(seen), _clips())
        # Each worker keeps enough blocks for every step in flight: its
        # client's batches ahead, the DataLoader's prefetch, the trainer's
        # (a step that found none free would have failed above).
        per = ds.loader(num_workers=1).blocks_per_worker()
        self.assertEqual(per, max(BLOCKS_PER_WORKER, 2 + ds.options.ahead + 4))
        steps = _clips()
        self.assertGreater(steps, per, "too few steps to see blocks reused")
        for workers in (1, 2):
            made = len({p for w, p in blocks if w == workers})
            self.assertLessEqual(made, workers * per, f"{workers} workers: {made} blocks for {steps} steps")


def _block_of(t):
    """The slot a step's tensor ``t`` came in (its block's head) and the
    identity (device, inode) of the block's shared-memory file."""
    import os

    import torch
    from brand.torch._shm import BLOCK_MAGIC, storage

    st = storage(t)
    head = torch.empty(0, dtype=torch.uint8).set_(st, 0, (12,), (1,)).numpy().tobytes()
    if head[:8] != BLOCK_MAGIC:
        return None
    fd, _ = st._share_fd_cpu_()
    info = os.fstat(fd)
    return int.from_bytes(head[8:12], "little"), (info.st_dev, info.st_ino)


def _mapped_inodes():
    """The inodes of the files this process maps or holds open in /dev/shm."""
    import os

    inodes = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/dev/shm/"):
                inodes.add(int(parts[4]))
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/dev/shm/"):
                inodes.add(os.fstat(int(fd)).st_ino)
        except OSError:
            pass
    return inodes


class TestBlocksAcrossPasses(unittest.TestCase):
    """A BrandLoader keeps its workers' shared blocks from pass to pass:
    the workers of the next pass, forked anew, write into the blocks of
    the pass before (their pages allocated once), not into new ones; and
    the loader lets them go when it goes."""

    def passes(self, loader, n, check=None):
        """Runs ``n`` passes of ``loader``: per pass, slot -> block."""
        out = []
        for _ in range(n):
            slots = {}
            for step in loader:
                got = _block_of(step["frames"])
                self.assertIsNotNone(got, "the frames came over in a block of PyTorch's own")
                slot, ident = got
                self.assertEqual(slots.setdefault(slot, ident), ident, f"slot {slot} held two blocks in a pass")
                if check is not None:
                    check(step)
                del step
            out.append(slots)
        return out

    def test_the_next_pass_reuses_the_blocks(self):
        import gc

        gw = video_gateway()
        ds = BrandDataset_(gw.url, batch_size=1)
        before = _mapped_inodes()
        for ctx in (None, "spawn"):
            with self.subTest(multiprocessing_context=ctx):
                loader = ds.loader(num_workers=2, multiprocessing_context=ctx)
                first, second, third = self.passes(loader, 3)
                both = set(first) & set(second)
                self.assertTrue(both, f"no slot used in both passes: {first} {second}")
                for slot in both:
                    self.assertEqual(second[slot], first[slot], f"slot {slot}: pass 2 made a block of its own")
                for slot in set(second) & set(third):
                    self.assertEqual(third[slot], second[slot], f"slot {slot}: pass 3 made a block of its own")
                per = loader.blocks_per_worker()
                made = {ino for p in (first, second, third) for _, ino in p.values()}
                self.assertLessEqual(len(made), 2 * per)
                self.assertTrue(made <= _mapped_inodes(), "the loader keeps its blocks between passes")
                del loader
                gc.collect()
                self.assertFalse(made & _mapped_inodes(), "the blocks outlived their loader")
        self.assertFalse(_mapped_inodes() - before)

    def test_a_pass_beside_a_running_one(self):
        """A pass started while another of the same loader runs takes
        blocks of its own: neither pass's frames are overwritten."""
        gw = video_gateway()
        ds = BrandDataset_(gw.url, batch_size=1)
        loader = ds.loader(num_workers=2)
        self.passes(loader, 1)

        def check(step):
            for i, js in enumerate(step["json"]):
                ref = gw.reference(js["video"])
                for t, pts in enumerate(js["pts"]):
                    self.assertEqual(step["frames"][i, t].numpy().tobytes(), ref[pts], f"{js['video']} pts {pts}")

        one = iter(loader)
        kept = [next(one), next(one)]
        other = self.passes(loader, 1, check)[0]
        kept += list(one)
        for step in kept:
            check(step)
        slots = {_block_of(s["frames"]) for s in kept}
        self.assertFalse({ident for _, ident in slots} & set(other.values()),
                         "a pass beside a running one wrote into its blocks")

    def test_persistent_workers_keep_their_blocks(self):
        """With persistent_workers the same two workers serve every pass,
        each writing into the blocks it mapped in the first; a pass the
        trainer stops early, holding a step, leaves that step's frames
        alone through the passes after, and every pass gives its epoch's
        clips once, with PyAV's frames."""
        gw = video_gateway()
        ds = BrandDataset_(gw.url, batch_size=1)  # steps of one size: no block outgrown
        loader = ds.loader(num_workers=2, persistent_workers=True)

        def check(step):
            for i, js in enumerate(step["json"]):
                ref = gw.reference(js["video"])
                for t, pts in enumerate(js["pts"]):
                    self.assertEqual(step["frames"][i, t].numpy().tobytes(), ref[pts], f"{js['video']} pts {pts}")

        seen = []

        def keys(step):
            check(step)
            seen.extend(step["__key__"])

        slots, workers = {}, None
        for epoch in (0, 1, 2):
            ds.set_epoch(epoch)
            if epoch == 1:
                it = iter(loader)
                held = next(it)
                next(it)
                del it
                check(held)
                ds.set_epoch(epoch)  # the pass stopped: epoch 1 again from its start
            seen.clear()
            for slot, ident in self.passes(loader, 1, keys)[0].items():
                self.assertEqual(slots.setdefault(slot, ident), ident, f"epoch {epoch}: slot {slot} has a new block")
            self.assertEqual(len(seen), _clips())
            self.assertEqual(len(set(seen)), len(seen))
            pids = [w.pid for w in loader._iterator._workers]
            self.assertEqual(workers or pids, pids, f"epoch {epoch}: new workers")
            workers = pids
        check(held)
        self.assertIn(_block_of(held["frames"])[0], slots)


def BrandDataset_(url, **job):
    from brand.torch import BrandDataset

    ds = BrandDataset(url, brand.Options(job=dataclasses.replace(JOB, world=1, rank=0, **job)))
    ds.set_epoch(0)
    return ds


if __name__ == "__main__":
    unittest.main()
