"""Tensors made by the gateway (transform=) through the Python client and
brand.torch, against a real gateway (gateway.tensor_gateway): the draws
against the Python reference (brand.transform), the pixels against the
PNGs' own and the fixtures' Pillow goldens, no copy between the socket and
the tensor, DataLoader workers, exact resume, bad images, unknown
pipelines, and samples without images."""

import ctypes
import io
import json
import os
import sys
import unittest
import urllib.parse
import urllib.request
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import FIXTURES, PIXELS, tensor_gateway  # noqa: E402

import numpy  # noqa: E402
import torch  # noqa: E402  (a missing torch is an error, not a skip)

import brand  # noqa: E402
from brand import transform as tf  # noqa: E402
from brand._tar import _plain_members  # noqa: E402
from brand.torch import BrandDataset, BrandSkipWarning, collate_tensors, npy_tensor  # noqa: E402

B = 8
SEED = 5


def address(buf):
    """The address of a bytearray's first byte."""
    return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))


def chw(width, height, rgb):
    """An HWC RGB byte string as a (3, H, W) uint8 tensor."""
    return torch.frombuffer(bytearray(rgb), dtype=torch.uint8).view(height, width, 3).permute(2, 0, 1)


def golden(name):
    """A fixture's Pillow-decoded pixels (NAME.pil.npy, HWC) as (3, H, W)."""
    return torch.from_numpy(numpy.load(os.path.join(FIXTURES, name + ".pil.npy"))).permute(2, 0, 1)


class TensorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = tensor_gateway()

    def client(self, dataset="img", transform="flip", **kw):
        kw.setdefault("batch_size", B)
        c = brand.Client(self.gw.url, dataset=dataset, seed=SEED, transform=transform, **kw)
        self.addCleanup(c.close)
        return c

    def dataset(self, dataset="img", transform="flip", **kw):
        kw.setdefault("batch_size", B)
        return BrandDataset(self.gw.url, dataset=dataset, seed=SEED, transform=transform, **kw)

    def ids(self, c, epoch, batch):
        """A batch's sample IDs by key, from its manifest."""
        q = urllib.parse.urlencode(c.params())
        with urllib.request.urlopen(f"{self.gw.url}/epoch/{epoch}/batch/{batch}/manifest?{q}") as r:
            return {s["key"]: s["id"] for s in json.load(r)["samples"]}

    def read_all(self, c, epoch):
        """(key, id, sample) of every sample of an epoch, in order."""
        out = []
        for m in range(int(c.epoch_info(epoch)["batches"])):
            ids = self.ids(c, epoch, m)
            out += [(s["__key__"], ids[s["__key__"]], s) for s in c.batch(epoch, m)]
        return out


class TestDraws(TensorTest):
    """Each tensor is the image under the draws brand.transform computes
    from the sample's key (docs/transform.md §4)."""

    def test_flips_are_the_references(self):
        ks = tf.key_seed(SEED, "img")
        flips = set()
        for epoch in (0, 1):
            for key, sid, s in self.read_all(self.client(), epoch):
                t = npy_tensor(s["npy"])
                self.assertEqual(t.dtype, torch.uint8)
                flip = tf.flip(ks, epoch, sid, 0)
                flips.add(flip)
                if ("img", key) in PIXELS:  # the PNGs: lossless, so exact
                    want = chw(*PIXELS[("img", key)])
                    tol = 0
                else:  # the fixtures: Pillow's decode, which Go's JPEG decoder is within 3 levels of
                    name = key.split("/")[1]
                    want = golden(name[: name.rindex("_")] + "." + name[name.rindex("_") + 1:])
                    tol = 0 if name.endswith("_png") else 3
                if flip:
                    want = want.flip(-1)
                with self.subTest(key=key, epoch=epoch):
                    self.assertEqual(t.shape, want.shape)
                    self.assertLessEqual(int((t.int() - want.int()).abs().max()), tol)
        self.assertEqual(flips, {True, False})

    def test_crop_boxes_are_the_references(self):
        """crop32: RandomResizedCrop(32) then a flip. The expected tensor is
        the reference's box of the PNG's pixels, resized with PyTorch's
        antialiased bilinear (Pillow's filter, in floating point: within one
        level of Pillow's fixed point); the same box one pixel over is far
        off, so the boxes are the reference's exactly."""
        ks = tf.key_seed(SEED, "img")
        c = self.client(transform="crop32")
        n = 0
        for key, sid, s in self.read_all(c, 0):
            if ("img", key) not in PIXELS:
                continue
            w, h, rgb = PIXELS[("img", key)]
            img = chw(w, h, rgb).float()
            box, _ = tf.random_resized_crop_box(ks, 0, sid, 0, w, h)
            flip = tf.flip(ks, 0, sid, 1)

            def resized(b):
                x = img[None, :, b.y:b.y + b.h, b.x:b.x + b.w]
                r = torch.nn.functional.interpolate(x, size=(32, 32), mode="bilinear", align_corners=False,
                                                    antialias=True)[0].round().clamp(0, 255).int()
                return r.flip(-1) if flip else r

            got = npy_tensor(s["npy"]).int()
            shifted = box  # the box one pixel over, where the image has room
            for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                x, y = box.x + dx, box.y + dy
                if 0 <= x and x + box.w <= w and 0 <= y and y + box.h <= h:
                    shifted = box._replace(x=x, y=y)
                    break
            with self.subTest(key=key, box=box):
                self.assertEqual(tuple(got.shape), (3, 32, 32))
                d = (resized(box) - got).abs()
                self.assertLessEqual(int(d.max()), 1)
                self.assertLess(float(d.float().mean()), 0.5)
                if shifted != box:
                    self.assertGreater(float((resized(shifted) - got).abs().float().mean()), 5)
            n += 1
        self.assertEqual(n, 72)

    def test_imagenet_train(self):
        c = self.client(transform="imagenet-train")
        b = c.batch(0, 0)
        self.assertEqual(b.transform, "imagenet-train")
        for s in b:
            t = npy_tensor(s["npy"])
            self.assertEqual((tuple(t.shape), t.dtype), ((3, 224, 224), torch.uint8))


class TestZeroCopy(TensorTest):
    """The tensors are views of the received body: no copy between the
    socket and the trainer's tensor."""

    def test_client_members_view_the_body(self):
        b = self.client().batch(0, 0)
        body = b[0]["npy"].obj
        self.assertIsInstance(body, bytearray)
        lo = address(body)
        for s in b:
            mv = s["npy"]
            self.assertTrue(mv.obj is body)
            t = npy_tensor(mv)
            arr = tf.npy_array(mv)
            self.assertTrue(lo <= t.data_ptr() and t.data_ptr() + t.numel() <= lo + len(body))
            self.assertEqual(arr.ctypes.data, t.data_ptr())
            # numpy's chain: the array, the array frombuffer made, the
            # memoryview, the body.
            base = arr
            while isinstance(base, numpy.ndarray):
                base = base.base
            self.assertTrue(isinstance(base, memoryview) and base.obj is body)
            self.assertIsInstance(s["cls"], bytes)

    def test_dataset_tensors_sit_at_their_members(self):
        """A batch's tensors lie in one buffer of the batch's length, each at
        its member's data offset plus the .npy header, as the raw tar
        says."""
        ds = self.dataset(batches=True, world=1)
        c = self.client(world=1)
        for m, batch in enumerate(ds):
            raw = c.batch_bytes(0, m, c.params())
            offsets = {name.decode().rsplit(".", 1)[0]: start for name, start, _ in _plain_members(raw)
                       if name.endswith(b".npy")}
            ptrs = [s["npy"].data_ptr() for s in batch]
            header, _ = tf.npy_header(raw[offsets[batch[0]["__key__"]]:])
            base = ptrs[0] - offsets[batch[0]["__key__"]] - header
            for s, p in zip(batch, ptrs):
                header, _ = tf.npy_header(raw[offsets[s["__key__"]]:])
                self.assertEqual(p - base, offsets[s["__key__"]] + header)
            self.assertLess(max(ptrs) - base, len(raw))


class TestReuse(TensorTest):
    """The client reuses a transformed batch's buffer, and a loader's
    workers their shared-memory blocks, only once nothing refers to them."""

    def test_a_kept_tensor_is_never_overwritten(self):
        c = self.client(transform="crop32")
        first = c.batch(0, 0)
        kept = npy_tensor(first[0]["npy"])[1:]  # a view of a view of the buffer
        want = kept.clone()
        body = id(first[0]["npy"].obj)
        del first
        seen = set()
        for m in range(1, 8):
            b = c.batch(0, m)
            seen.add(id(b[0]["npy"].obj))
            del b
        self.assertNotIn(body, seen)
        self.assertTrue(torch.equal(kept, want))
        self.assertLess(len(seen), 7, "buffers nobody holds are reused")

    def slots(self, step):
        """The block slot a step's images were stacked in (-1: none)."""
        from brand.torch._shm import BLOCK_MAGIC, storage

        x = step["npy"]
        head = torch.empty(0, dtype=torch.uint8).set_(storage(x), 0, (12,), (1,)).numpy().tobytes()
        return int.from_bytes(head[8:12], "little") if head[:8] == BLOCK_MAGIC else -1

    def test_blocks_are_reused_once_let_go(self):
        want = [s["npy"] for s in TestLoader.single(self, 0, transform="crop32")]
        ds = self.dataset(transform="crop32")
        slots, views = [], []
        for i, step in enumerate(ds.loader(num_workers=1)):
            slots.append(self.slots(step))
            self.assertTrue(torch.equal(step["npy"], want[i]))
            if i == 1:
                views.append(step["npy"][2:4])  # a view keeps its block held
            del step
        self.assertEqual(len(slots), len(want))
        self.assertNotIn(-1, slots)
        self.assertLess(len(set(slots)), len(slots), f"no block reused: {slots}")
        self.assertNotIn(slots[1], slots[2:], "the block of a step still referred to was reused")
        self.assertTrue(torch.equal(views[0], want[1][2:4]))

    def test_steps_kept_stay_whole(self):
        """A trainer that keeps every step: no block is ever free, the
        workers make new ones as PyTorch does, and every step is intact."""
        want = TestLoader.single(self, 1, transform="crop32")
        ds = self.dataset(transform="crop32")
        ds.set_epoch(1)
        got = list(ds.loader(num_workers=2))
        TestLoader.assertSameSteps(self, got, want)


class TestLoader(TensorTest):
    def single(self, epoch, **kw):
        ds = self.dataset(**kw)
        ds.set_epoch(epoch)
        return list(ds.loader(num_workers=0))

    def assertSameSteps(self, got, want):
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertEqual(g["__key__"], w["__key__"])
            self.assertEqual(g["cls"], w["cls"])
            self.assertTrue(torch.equal(g["npy"], w["npy"]))

    def test_two_workers_deliver_the_single_process_batches(self):
        want = self.single(1, transform="crop32")
        ds = self.dataset(transform="crop32")
        ds.set_epoch(1)
        got = list(ds.loader(num_workers=2))
        self.assertSameSteps(got, want)
        for step in got:
            self.assertEqual(step["npy"].dtype, torch.uint8)
            self.assertEqual(tuple(step["npy"].shape[1:]), (3, 32, 32))
            self.assertTrue(step["npy"].is_shared(), "a worker's stack is in shared memory")
        self.assertEqual(sum(len(s["__key__"]) for s in got), len(self.gw.datasets["img"]))
        self.assertEqual(ds.state_dict()["position"], len(self.gw.datasets["img"]))

    def test_resume_gives_the_same_tensors(self):
        """Preempted after 3 steps at world 2 (2 workers a rank), resumed at
        world 1: the rest of the epoch is the uninterrupted read's rest,
        tensor for tensor."""
        whole = {}
        for step in self.single(0, transform="crop32"):
            for k, t in zip(step["__key__"], step["npy"]):
                whole[k] = t
        dss = [self.dataset(transform="crop32", world=2, rank=r) for r in range(2)]
        its = [iter(ds.loader(num_workers=2)) for ds in dss]
        before = []
        for _ in range(3):
            for it in its:
                before.append(next(it))
        state = dss[0].state_dict()
        del its
        self.assertEqual(state["position"], 3 * 2 * B)
        ds = self.dataset(transform="crop32", world=1)
        ds.load_state_dict(state)
        after = list(ds.loader(num_workers=2))
        seen = 0
        for step in before + after:
            for k, t in zip(step["__key__"], step["npy"]):
                self.assertTrue(torch.equal(t, whole[k]), k)
                seen += 1
        self.assertEqual(seen, len(whole))

    def test_batches_mode_with_collate(self):
        ds = self.dataset(transform="crop32", batches=True, collate=collate_tensors)
        steps = list(ds)
        self.assertSameSteps(steps, self.single(0, transform="crop32"))


class TestBadImages(TensorTest):
    def test_fail_names_the_sample(self):
        with self.assertRaises(brand.BrandError) as e:
            self.client("bad").batch(0, 0)
        self.assertEqual(e.exception.status, 422)
        self.assertRegex(e.exception.message, r"bad/(garbage|truncated)")
        with self.assertRaisesRegex(brand.BrandError, "HTTP 422"):
            list(self.dataset("bad").loader(num_workers=1))

    def test_skip_names_them_in_the_batch(self):
        gw = tensor_gateway("skip")
        c = brand.Client(gw.url, dataset="bad", seed=SEED, batch_size=B, transform="flip")
        self.addCleanup(c.close)
        b = c.batch(0, 0)
        self.assertEqual(b.missing, 2)
        self.assertEqual(sorted(b.missing_keys), ["bad/garbage", "bad/truncated"])
        self.assertEqual(sorted(s["__key__"] for s in b), sorted(k for k in gw.datasets["bad"] if k.startswith("c")))
        ds = BrandDataset(gw.url, dataset="bad", seed=SEED, batch_size=B, transform="flip")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = [s["__key__"] for s in ds]
        self.assertEqual(sorted(got), sorted(s["__key__"] for s in b))
        self.assertTrue(any(issubclass(w.category, BrandSkipWarning) and "bad/garbage" in str(w.message)
                            for w in caught))
        self.assertEqual(ds.state_dict()["position"], len(gw.datasets["bad"]))  # the skipped are consumed

    def test_unknown_pipeline_names_those_there_are(self):
        with self.assertRaises(brand.BrandError) as e:
            self.client(transform="imagenet-trian").batch(0, 0)
        self.assertEqual(e.exception.status, 400)
        for name in ("imagenet-train", "imagenet-eval", "flip", "crop32"):
            self.assertIn(name, e.exception.message)
        with self.assertRaisesRegex(brand.BrandError, "imagenet-eval"):
            list(self.dataset(transform="imagenet-trian"))
        with self.assertRaises(ValueError):
            brand.Job(transform="Not A Name")


class TestWithoutImages(TensorTest):
    def test_samples_without_images_are_as_without_a_transform(self):
        for dataset in ("txt", "img"):
            with self.subTest(dataset=dataset):
                plain = list(BrandDataset(self.gw.url, dataset=dataset, seed=SEED, batch_size=B))
                if dataset == "txt":
                    self.assertEqual(list(self.dataset("txt")), plain)
                for s in plain:
                    self.assertTrue(all(isinstance(v, (bytes, str)) for v in s.values()))
        with brand.Client(self.gw.url, dataset="img", seed=SEED, batch_size=B) as c:
            b = c.batch(0, 0)
            self.assertIsNone(b.transform)
            self.assertEqual(b.missing, 0)
            self.assertIsInstance(c.batch_bytes(0, 0), bytes)


class TestMixture(TensorTest):
    def test_adjacent_equal_keys_stay_apart(self):
        """img and img2 hold equal keys: two adjacent samples of one key are
        one to a tar's grouping by key, and a transformed batch's lengths
        are not its manifest's, so the client starts a sample at an
        extension its sample already has. Each tensor is its own dataset's
        image (or its flip)."""
        c = brand.Client(self.gw.url, mix="img:1,img2:1", seed=SEED, batch_size=2 * B, transform="flip")
        self.addCleanup(c.close)
        q = urllib.parse.urlencode(c.params())
        for epoch in range(8):
            for batch in range(int(c.epoch_info(epoch)["batches"])):
                with urllib.request.urlopen(f"{self.gw.url}/epoch/{epoch}/batch/{batch}/manifest?{q}") as r:
                    keys = [m["key"] for m in json.load(r)["samples"]]
                if any(a == b for a, b in zip(keys, keys[1:])):
                    break
            else:
                continue
            break
        else:
            self.fail("no batch with adjacent equal keys")
        self.assertLess(len(brand.decode_tar(c.batch_bytes(epoch, batch))), len(keys))
        got = c.batch(epoch, batch)
        self.assertEqual([s["__key__"] for s in got], keys)
        checked = 0
        for s in got:
            if (s["__dataset__"], s["__key__"]) not in PIXELS:
                continue  # img's fixtures
            want = chw(*PIXELS[(s["__dataset__"], s["__key__"])])
            t = npy_tensor(s["npy"])
            with self.subTest(dataset=s["__dataset__"], key=s["__key__"]):
                self.assertTrue(torch.equal(t, want) or torch.equal(t, want.flip(-1)))
            checked += 1
        self.assertGreater(checked, 0)


class TestNpyTensor(unittest.TestCase):
    """npy_tensor against numpy.save for what numpy.lib.format allows."""

    def test_arrays_numpy_writes(self):
        rng = numpy.random.default_rng(3)
        cases = [
            rng.integers(0, 255, (3, 7, 5), dtype=numpy.uint8),
            rng.integers(-9, 9, (4, 6), dtype=numpy.int16),
            rng.random((2, 3, 4), dtype=numpy.float32),
            numpy.asfortranarray(rng.random((5, 3))),
            numpy.zeros((0, 3), dtype=numpy.uint8),
            numpy.uint8(7),
        ]
        for a in cases:
            f = io.BytesIO()
            numpy.save(f, a)
            buf = bytearray(f.getvalue())
            with self.subTest(dtype=a.dtype, shape=a.shape):
                t = npy_tensor(buf)
                self.assertTrue(numpy.array_equal(t.numpy(), numpy.load(io.BytesIO(bytes(buf)))))
                if a.size:
                    lo = address(buf)
                    self.assertTrue(lo <= t.data_ptr() < lo + len(buf), "a view, not a copy")
                self.assertTrue(numpy.array_equal(npy_tensor(bytes(buf)).numpy(), a))  # read-only: copied

    def test_bad_input(self):
        f = io.BytesIO()
        numpy.save(f, numpy.zeros((4, 4), dtype=numpy.uint8))
        good = f.getvalue()
        for bad in (b"", b"NUMPY\x01\x00", bytearray(good[:-3]), bytearray(b"\x93NUMPY\x01\x00\xff\x00")):
            with self.subTest(bad=bad[:12]), self.assertRaises(ValueError):
                npy_tensor(bad)


class TestCollate(unittest.TestCase):
    def test_stacks_tensors_and_passes_the_rest(self):
        samples = [{"__key__": f"k{i}", "npy": torch.full((3, 4, 4), i, dtype=torch.uint8), "cls": b"%d" % i}
                   for i in range(5)]
        out = collate_tensors(samples)
        self.assertEqual(out["__key__"], [f"k{i}" for i in range(5)])
        self.assertEqual(out["cls"], [b"%d" % i for i in range(5)])
        self.assertEqual(tuple(out["npy"].shape), (5, 3, 4, 4))
        self.assertEqual(out["npy"][:, 0, 0, 0].tolist(), list(range(5)))
        pairs = collate_tensors([(s["npy"], int(s["cls"])) for s in samples])
        self.assertEqual(tuple(pairs[0].shape), (5, 3, 4, 4))
        self.assertEqual(pairs[1], list(range(5)))

    def test_refuses_what_cannot_stack(self):
        a = {"__key__": "a", "npy": torch.zeros(3, 4, 4, dtype=torch.uint8)}
        with self.assertRaisesRegex(ValueError, "one shape"):
            collate_tensors([a, {"__key__": "b", "npy": torch.zeros(3, 5, 4, dtype=torch.uint8)}])
        with self.assertRaisesRegex(ValueError, "members"):
            collate_tensors([a, {"__key__": "b", "jpg": b""}])


class TestTransformHeader(unittest.TestCase):
    def test_an_answer_without_the_pipeline_is_an_error(self):
        """A gateway that ignores transform= (one from before transforms)
        answers the images as stored: the client says so rather than hand
        JPEG bytes on as tensors."""
        c = brand.Client("http://127.0.0.1:1", transform="imagenet-train")
        with self.assertRaisesRegex(brand.BrandError, "Brand-Transform"):
            c._decode(0, 0, c.params(), {}, bytes(1024))


if __name__ == "__main__":
    unittest.main()
