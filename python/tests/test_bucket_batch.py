"""brand.torch's bucket_batch over batches made here: a batch whose
images lie evenly spaced in its buffer (the gateway's) is viewed there,
one whose members vary in length (captions past a tar block) is copied,
and both give the images as written."""

import io
import os
import sys
import tarfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy  # noqa: E402
import torch  # noqa: E402

from brand.client import Batch, _decode  # noqa: E402
from brand.torch._buckets import bucket_batch  # noqa: E402


def batch(captions, h=4, w=6):
    """A bucket batch of len(captions) images (uint8 (3, h, w), image i
    all i + 1) with a .txt caption each, read into a writable buffer as
    the client reads one."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for i, cap in enumerate(captions):
            for name, data in ((f"s{i}.npy", _npy(numpy.full((3, h, w), i + 1, numpy.uint8))), (f"s{i}.txt", cap)):
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
    body = memoryview(bytearray(out.getvalue()))
    b = Batch(_decode(0, 0, body, npy_views=True))
    b.body, b.transform = body, f"bucket:{h}x{w}"
    b.geometry = ";".join(f"{w},{h},0,0,0" for _ in captions)
    return b


def _npy(a):
    f = io.BytesIO()
    numpy.save(f, a)
    return f.getvalue()


def on_body(t, b):
    base = numpy.frombuffer(b.body, numpy.uint8).ctypes.data
    return base <= t.data_ptr() < base + len(b.body)


class TestBucketBatch(unittest.TestCase):
    def test_evenly_spaced_images_are_views(self):
        b = batch([b"a cat", b"a dog on a mat", b"x" * 512])
        s = bucket_batch(b)
        self.assertEqual(tuple(s.images.shape), (3, 3, 4, 6))
        self.assertTrue(on_body(s.images, b), "copied")
        for i in range(3):
            self.assertTrue(bool((s.images[i] == i + 1).all()))
        self.assertEqual(s.members["txt"][1], b"a dog on a mat")
        self.assertEqual(s.keys, ["s0", "s1", "s2"])

    def test_unevenly_spaced_images_are_copied(self):
        b = batch([b"a cat", b"x" * 513, b"a dog"])
        s = bucket_batch(b)
        self.assertFalse(on_body(s.images, b), "a view over samples not evenly spaced")
        self.assertTrue(s.images.is_contiguous())
        for i in range(3):
            self.assertTrue(bool((s.images[i] == i + 1).all()))

    def test_one_image(self):
        b = batch([b"a cat"])
        s = bucket_batch(b)
        self.assertTrue(on_body(s.images, b))
        self.assertTrue(s.images.is_contiguous())
        self.assertTrue(bool((s.images == 1).all()))


if __name__ == "__main__":
    unittest.main()
