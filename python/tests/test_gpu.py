"""The GPU path (transform=imagenet-train-gpu, docs/transform.md §13)
through brand.GPUTensors against a real gateway built with libjpeg-turbo
(cutgateway.cut_gateway), finished on the CPU path (torchvision's CPU
decoder): every step the TensorBatch brand.Tensors gives for
imagenet-train, the same keys, labels and shapes, the images the cut
refuses (a PNG, a CMYK JPEG) byte for byte, the others within the bound
§13 states; the steps' members and the finishing of a hand-made step."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cutgateway import LAYOUTS, PHOTOS, cut_gateway  # noqa: E402

import torch  # noqa: E402  (a missing torch is an error, not a skip)

import brand  # noqa: E402
from brand.torch import CutBatch, TensorBatch, cut_batch, finish  # noqa: E402

B = 8
SEED = 3
# docs/transform.md §13: the largest difference of a level from
# imagenet-train's (measured over 2,000 photos: 13 with chroma subsampled,
# where the cut's edges are upsampled from its own chroma; 1 without:
# torchvision's resize rounds otherwise than Pillow's), and of an image's
# mean absolute difference (measured: 0.68).
MAX_LEVELS = {"420": 16, "422": 16, "progressive": 16, "444": 1, "gray": 1}
MEAN_LEVELS = 1.0


def steps(ds):
    return list(ds)


class GPUTensorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = cut_gateway()

    def test_same_as_imagenet_train(self):
        gpu = brand.GPUTensors(self.gw.url, "photos", batch_size=B, seed=SEED, device="cpu")
        ref = brand.Tensors(self.gw.url, "photos", transform="imagenet-train", batch_size=B, seed=SEED)
        got, want = steps(gpu), steps(ref)
        self.assertEqual(len(got), len(want))
        self.assertEqual(sum(len(b.keys) for b in got), PHOTOS + 2)
        worst, means, exact = 0, [], 0
        for g, w in zip(got, want):
            self.assertIsInstance(g, TensorBatch)
            self.assertEqual(g.keys, w.keys)
            self.assertTrue(torch.equal(g.labels, w.labels))
            self.assertEqual(g.images.shape, w.images.shape)
            self.assertEqual(g.images.dtype, torch.uint8)
            for i, key in enumerate(g.keys):
                d = (g.images[i].int() - w.images[i].int()).abs()
                if key.endswith(("p%05d" % PHOTOS, "p%05d" % (PHOTOS + 1))):
                    # the PNG and the CMYK JPEG: imagenet-train's tensors
                    self.assertTrue(torch.equal(g.images[i], w.images[i]), key)
                    exact += 1
                    continue
                worst = max(worst, int(d.max()))
                means.append(float(d.float().mean()))
                layout = LAYOUTS[int(key.rsplit("p", 1)[1]) % len(LAYOUTS)]
                self.assertLessEqual(int(d.max()), MAX_LEVELS[layout], (key, layout))
                self.assertLessEqual(means[-1], MEAN_LEVELS, key)
        self.assertEqual(exact, 2)
        print(f"\nGPU path on the CPU, {len(means)} photos: max |Δ| {worst}, mean |Δ| per image "
              f"≤ {max(means):.2f} (mean {sum(means) / len(means):.2f})", file=sys.stderr)

    def test_loader_finishes_in_the_trainer(self):
        gpu = brand.GPUTensors(self.gw.url, "photos", batch_size=B, seed=SEED, device="cpu")
        direct = steps(gpu)
        got = list(gpu.loader(num_workers=2))
        self.assertEqual([b.keys for b in got], [b.keys for b in direct])
        for g, d in zip(got, direct):
            self.assertTrue(torch.equal(g.images, d.images))
            self.assertTrue(torch.equal(g.labels, d.labels))

    def test_resume(self):
        # A loader stopped after two steps: its state resumes at the third.
        def make():
            return brand.GPUTensors(self.gw.url, "photos", batch_size=B, seed=SEED, device="cpu")

        whole = [b.keys for b in make().loader(num_workers=0)]
        ds = make()
        it = iter(ds.loader(num_workers=0))
        first = [next(it).keys for _ in range(2)]
        state = ds.state_dict()
        del it
        again = make()
        again.load_state_dict(state)
        rest = [b.keys for b in again.loader(num_workers=0)]
        self.assertEqual(first + rest, whole)

    def test_members(self):
        c = brand.Client(self.gw.url, dataset="photos", seed=SEED, batch_size=B, transform="imagenet-train-gpu")
        self.addCleanup(c.close)
        b = c.batch(0, 0)
        self.assertEqual(b.transform, "imagenet-train-gpu")
        for s in b:
            if "npy" in s:
                continue
            self.assertEqual(bytes(s["cut"][:3]), b"\xff\xd8\xff")
            box = json.loads(bytes(s["cut.json"]))
            self.assertEqual(sorted(box), ["box", "flip", "size"])
            self.assertEqual(box["size"], [224, 224])
            x, y, w, h = box["box"]
            self.assertTrue(0 <= x < 16 and 0 <= y < 16 and w > 0 and h > 0, box)

    def test_a_pipeline_that_cuts_nothing(self):
        # Every image a tensor: the steps are brand.Tensors', exactly.
        gpu = brand.GPUTensors(self.gw.url, "photos", transform="imagenet-train", batch_size=B, seed=SEED,
                               device="cpu")
        ref = brand.Tensors(self.gw.url, "photos", transform="imagenet-train", batch_size=B, seed=SEED)
        for g, w in zip(steps(gpu), steps(ref)):
            self.assertEqual(g.keys, w.keys)
            self.assertTrue(torch.equal(g.images, w.images))


class FinishTest(unittest.TestCase):
    """finish on a hand-made step: crop, resize, flip, tensors in place."""

    def test_finish(self):
        from PIL import Image
        import io

        img = Image.new("RGB", (40, 24))
        img.paste((200, 10, 10), (0, 0, 20, 24))
        img.paste((10, 10, 200), (20, 0, 40, 24))
        b = io.BytesIO()
        img.save(b, "JPEG", quality=95, subsampling=0)
        jpg = b.getvalue()
        t = torch.full((3, 4, 4), 7, dtype=torch.uint8)
        box = json.dumps({"box": [4, 2, 32, 16], "flip": True, "size": [4, 4]}).encode()
        samples = [{"__key__": "a", "cut": jpg, "cut.json": box, "cls": b"1"},
                   {"__key__": "b", "npy": t, "cls": b"2"},
                   {"__key__": "c", "cut": jpg, "cut.json": box.replace(b"true", b"false"), "cls": b"x"}]
        step = cut_batch(samples)
        self.assertIsInstance(step, CutBatch)
        self.assertEqual(step.offsets.tolist(), [0, len(jpg), len(jpg), 2 * len(jpg)])
        out = finish(step, "cpu")
        self.assertEqual(out.images.shape, (3, 3, 4, 4))
        self.assertEqual(out.labels.tolist(), [1, 2, -1])
        self.assertTrue(torch.equal(out.images[1], t))
        # flipped: blue on the left; not flipped: red on the left
        self.assertGreater(int(out.images[0, 2, 0, 0]), 150)
        self.assertGreater(int(out.images[2, 0, 0, 0]), 150)
        self.assertTrue(torch.equal(out.images[0], out.images[2].flip(-1)))
        self.assertIs(finish(out), out)

    def test_refuses_a_step_without_cuts(self):
        with self.assertRaisesRegex(ValueError, "neither a cut JPEG nor a tensor"):
            cut_batch([{"__key__": "a", "jpg": b"x"}])


if __name__ == "__main__":
    unittest.main()
