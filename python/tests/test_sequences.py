"""Token jobs (seq=) read by the Python client, against a real `brand serve`
of a Megatron dataset (tokengateway.py): steps of (B, seq) int32 tensors
on the received buffer, every token of every document once an epoch in
bestfit (documents reassembled from position_ids), exact resume at another
world size, and the numpy path."""

import io
import os
import sys
import tarfile
import unittest
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tokengateway import DOCS, PAD, SEQ, STRIDE, token_gateway  # noqa: E402  (puts the package on the path)

import numpy  # noqa: E402
import torch  # noqa: E402

import brand  # noqa: E402
from brand import _sequences  # noqa: E402
from brand.torch import BrandDataset, sequence_tensors  # noqa: E402

B = 4


def job(**kw):
    base = dict(dataset=None if "mix" in kw else "tok", seq=SEQ, batch_size=B, pad=PAD, seed=11)
    base.update(kw)
    return brand.Job(**base)


def rows(steps):
    """The sequences of a list of steps, in order: (input_ids, position_ids)
    as lists."""
    out = []
    for s in steps:
        for ids, pos in zip(s["input_ids"].tolist(), s["position_ids"].tolist()):
            out.append((tuple(ids), tuple(pos)))
    return out


def segments(ids, pos):
    """A sequence cut where position_ids restart at 0: each run's tokens."""
    starts = [i for i, p in enumerate(pos) if p == 0] + [len(pos)]
    return [list(ids[a:b]) for a, b in zip(starts, starts[1:])]


class TestSequenceSteps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = token_gateway()

    def dataset(self, **kw):
        return BrandDataset(self.gw.url, brand.Options(job=job(world=1, rank=0, **kw)))

    def test_steps_are_int32_views_of_the_answer(self):
        ds = self.dataset()
        n = ds.samples_in_epoch(0)
        steps = list(ds)
        self.assertEqual(sum(s["input_ids"].shape[0] for s in steps), n)
        for k, s in enumerate(steps):
            self.assertEqual(set(s), {"input_ids", "position_ids"})
            rows_here = B if k < len(steps) - 1 else n - B * (len(steps) - 1)
            for t in s.values():
                self.assertEqual(t.dtype, torch.int32)
                self.assertEqual(tuple(t.shape), (rows_here, SEQ))
            # No copy: both are views of one storage, the answer's buffer
            # (its tar: two 512-byte headers and data padded to 512 a
            # sequence, 1024 closing bytes), at the first member's data.
            ids, pos = s["input_ids"], s["position_ids"]
            self.assertEqual(ids.storage().data_ptr(), pos.storage().data_ptr())
            member = 512 + -(-(128 + 4 * SEQ) // 512) * 512
            self.assertEqual(ids.storage().nbytes(), rows_here * 2 * member + 1024)
            self.assertEqual(ids.data_ptr() - ids.storage().data_ptr(), 512 + 128)
            self.assertEqual(pos.data_ptr() - ids.data_ptr(), member)
            self.assertEqual(ids.stride(), (2 * member // 4, 1))
        self.assertEqual(ds.state_dict()["position"], n)

    def test_no_copy_writes_through(self):
        c = brand.Client(self.gw.url, brand.Options(job=job()))
        with c:
            b = c.batch(0, 1)
            t = sequence_tensors(b)
            a = brand.sequence_arrays(b)
            buf = b.body
            self.assertFalse(buf.readonly)
            self.assertTrue(torch.equal(t["input_ids"], torch.from_numpy(numpy.array(a["input_ids"]))))
            lay = _sequences.layout(buf)
            # The last token of row 2 of position_ids, written in the buffer,
            # shows in both views.
            at = lay.pos + 2 * lay.stride + 4 * (SEQ - 1)
            buf[at:at + 4] = (-7).to_bytes(4, "little", signed=True)
            self.assertEqual(int(t["position_ids"][2, SEQ - 1]), -7)
            self.assertEqual(int(a["position_ids"][2, SEQ - 1]), -7)
            self.assertTrue(numpy.shares_memory(a["input_ids"], numpy.frombuffer(buf, numpy.uint8)))

    def test_bestfit_every_token_once(self):
        """An epoch of bestfit holds every token of every document exactly
        once: each run of position_ids from 0 is a piece of one document
        (its tokens consecutive from where the piece starts) or the pad; a
        document shorter than seq is one piece; the pieces of a longer one
        put back in order are the document."""
        docs = self.gw.docs
        ds = self.dataset()
        pieces = defaultdict(list)
        for ids, pos in rows(ds):
            segs = segments(ids, pos)
            for k, seg in enumerate(segs):
                if seg[0] == PAD:
                    self.assertEqual(k, len(segs) - 1, "pad before a document")
                    self.assertEqual(set(seg), {PAD})
                    continue
                d, j = divmod(seg[0] - 1, STRIDE)
                self.assertEqual(seg, docs[d][j:j + len(seg)], f"a piece of document {d} from {j}")
                pieces[d].append((j, len(seg)))
        self.assertEqual(sorted(pieces), list(range(len(docs))), "documents missing")
        for d, ps in pieces.items():
            ps.sort()
            if len(docs[d]) < SEQ:
                self.assertEqual(ps, [(0, len(docs[d]))], f"document {d} of {len(docs[d])} tokens cut")
            at = 0
            for j, n in ps:
                self.assertEqual(j, at, f"document {d}: pieces {ps}")
                at += n
            self.assertEqual(at, len(docs[d]), f"document {d}: pieces {ps}")

    def test_concat(self):
        """pack=concat: the documents in some order, each followed by the
        EOS, cut every seq; pad after the last alone."""
        eos = PAD - 1  # no document's token
        ds = self.dataset(pack="concat", eos=eos)
        stream = [t for ids, _ in rows(ds) for t in ids]
        while stream and stream[-1] == PAD:
            stream.pop()
        got, cur = [], []
        for t in stream:
            if t == eos:
                got.append(cur)
                cur = []
            else:
                cur.append(t)
        self.assertEqual(cur, [])
        self.assertEqual(sorted(got), sorted(self.gw.docs))

    def test_resume_at_another_world_size(self):
        """Three steps at world 2 (rank 0 through a loader with two workers,
        rank 1 iterated in-process), then the rest at world 3 from rank 0's
        state: the global steps in order are the uninterrupted world-1
        epoch's sequences."""
        self.resume_at_another_world_size()

    def test_mixture(self):
        """A mixture of two token datasets: steps of the same shape, each
        sequence of one component's documents, both components in the
        epoch; and resumed at another world size as one dataset is."""
        mix = "tok:0.5,tok2:0.5"
        comps = set()
        for ids, pos in rows(self.dataset(mix=mix)):
            docs = {(t - 1) // STRIDE >= DOCS for t in ids if t != PAD}
            self.assertEqual(len(docs), 1, "a sequence of both components")
            comps |= docs
        self.assertEqual(comps, {False, True})
        # The mixing block is part of the order: the world-2 run's (by
        # default its batch size times its world), given to all.
        self.resume_at_another_world_size(mix=mix, mix_block=2 * B)

    def test_schedule(self):
        """A schedule over two token datasets (seq= with mix_schedule=):
        each step of mix_block = 2 batches (8 sequences) holds tok and tok2
        as its phase says, 4 and 4 before step 6, 2 and 6 from it; and the
        job resumes at another world size as one dataset does."""
        sched = "0:tok:0.5,tok2:0.5;6:tok:0.25,tok2:0.75"
        steps = list(self.dataset(dataset=None, mix_schedule=sched, mix_block=2 * B))
        self.assertGreater(len(steps), 16)
        for k in range(len(steps) // 2):
            n2 = 0
            for ids, pos in rows(steps[2 * k:2 * k + 2]):
                docs = {(t - 1) // STRIDE >= DOCS for t in ids if t != PAD}
                self.assertEqual(len(docs), 1, "a sequence of both components")
                n2 += docs.pop()
            self.assertEqual(n2, 4 if k < 6 else 6, f"step {k}: {n2} sequences of tok2")
        self.resume_at_another_world_size(dataset=None, mix_schedule=sched, mix_block=2 * B)

    def resume_at_another_world_size(self, **kw):
        whole = rows(self.dataset(seed=12, **kw))
        first = [BrandDataset(self.gw.url, brand.Options(job=job(seed=12, world=2, rank=r, **kw))) for r in range(2)]
        loader = first[0].loader(num_workers=2)
        it0, it1 = iter(loader), iter(first[1])
        got = []
        for _ in range(3):
            s0, s1 = next(it0), next(it1)
            self.assertEqual(tuple(s0["input_ids"].shape), (B, SEQ))
            got += rows([s0]) + rows([s1])
        state = first[0].state_dict()
        self.assertEqual(state["position"], 3 * 2 * B)
        self.assertEqual(first[1].state_dict()["position"], 3 * 2 * B)
        self.assertEqual((state["seq"], state["pack"], state["eos"]), (SEQ, "bestfit", None))
        del it0, it1
        rest = []
        for r in range(3):
            d = BrandDataset(self.gw.url, brand.Options(job=job(seed=12, world=3, rank=r, **kw)))
            d.load_state_dict(state)
            rest.append(list(d))
        for k in range(max(len(x) for x in rest)):
            for r in range(3):
                if k < len(rest[r]):
                    got += rows([rest[r][k]])
        self.assertEqual(got, whole)

    def test_state_of_another_packing_refused(self):
        state = self.dataset(seed=12).state_dict()
        for kw in (dict(seq=SEQ * 2), dict(pack="concat", eos=3)):
            with self.assertRaisesRegex(ValueError, "sequences would differ"):
                self.dataset(seed=12, **kw).load_state_dict(state)
        with self.assertRaisesRegex(ValueError, "seq"):
            BrandDataset(self.gw.url, brand.Options(job=brand.Job(dataset="tok", seed=12))).load_state_dict(state)
        self.dataset(seed=12, pad=1).load_state_dict(state)  # the pad moves no sequence

    def test_decode_refused(self):
        with self.assertRaisesRegex(ValueError, "decode"):
            BrandDataset(self.gw.url, brand.Options(job=job()), decode=lambda s: s)

    def test_samples_refused(self):
        """A token job yields steps: batches=False is an error, not
        overridden in silence (it was)."""
        with self.assertRaisesRegex(ValueError, "batches=False"):
            BrandDataset(self.gw.url, brand.Options(job=job()), batches=False)
        for given in ({}, {"batches": True}):
            self.assertTrue(BrandDataset(self.gw.url, brand.Options(job=job()), **given).batches)


class TestLayout(unittest.TestCase):
    """Batches not as the gateway writes them: copied, or refused."""

    @staticmethod
    def tar(seqs, pax=False, extra=None):
        out = io.BytesIO()
        fmt = tarfile.PAX_FORMAT if pax else tarfile.USTAR_FORMAT
        with tarfile.open(fileobj=out, mode="w", format=fmt) as tf:
            for k, (ids, pos) in enumerate(seqs):
                for ext, v in (("input_ids.npy", ids), ("position_ids.npy", pos)):
                    f = io.BytesIO()
                    numpy.save(f, numpy.array(v, dtype="<i4"))
                    b = f.getvalue()
                    assert len(b) == 128 + 4 * len(v)
                    name = f"seq/0/{k:010d}.{ext}"
                    if pax and k == 1:
                        name = "seq/0/" + "x" * 120 + f"{k}.{ext}"  # a long name: a PAX header
                    ti = tarfile.TarInfo(name)
                    ti.size = len(b)
                    if pax and k == 1:
                        ti.pax_headers = {"comment": "y" * 700}
                    tf.addfile(ti, io.BytesIO(b))
                if extra is not None and k == 0:
                    ti = tarfile.TarInfo(f"seq/0/{k:010d}.{extra}")
                    ti.size = 3
                    tf.addfile(ti, io.BytesIO(b"abc"))
        return bytearray(out.getvalue())

    def batch(self, body):
        b = brand.Batch(brand.decode_tar(body, npy_views=True))
        b.body = memoryview(body)
        return b

    def test_even_is_a_view(self):
        seqs = [([1, 2, 3, 4], [0, 1, 0, 1]), ([5, 6, 7, 8], [0, 1, 2, 3])]
        body = self.tar(seqs)
        t = sequence_tensors(self.batch(body))
        self.assertEqual(t["input_ids"].tolist(), [[1, 2, 3, 4], [5, 6, 7, 8]])
        self.assertEqual(t["input_ids"].storage().nbytes(), len(body))

    def test_uneven_is_copied(self):
        seqs = [([1, 2, 3, 4], [0, 1, 0, 1]), ([5, 6, 7, 8], [0, 1, 2, 3]), ([9, 10, 11, 12], [0, 0, 0, 0])]
        body = self.tar(seqs, pax=True)
        self.assertIsNone(_sequences.layout(body))
        for got in (sequence_tensors(self.batch(body)), brand.sequence_arrays(self.batch(body))):
            self.assertEqual(numpy.asarray(got["input_ids"]).tolist(), [list(s[0]) for s in seqs])
            self.assertEqual(numpy.asarray(got["position_ids"]).tolist(), [list(s[1]) for s in seqs])
        t = sequence_tensors(self.batch(body))
        self.assertEqual(t["input_ids"].storage().nbytes(), 3 * 4 * 4)  # its own storage

    def test_other_members_refused(self):
        body = self.tar([([1, 2], [0, 1]), ([3, 4], [0, 1])], extra="txt")
        with self.assertRaisesRegex(ValueError, "not a token batch"):
            sequence_tensors(self.batch(body))


if __name__ == "__main__":
    unittest.main()


class TestVisionSteps(unittest.TestCase):
    """A vision job (``vision=``) read by brand.Sequences against a real
    `brand serve` of image-text shards indexed with `brand index
    --tokenizer` (visiongateway.py): each step's tokens, loss mask and
    images line up, and an epoch holds every image once."""

    RULE = "min:784,max:6272,patch:14,merge:2,image:682,start:683,end:684"

    def test_steps_carry_images_on_their_spans(self):
        from visiongateway import vision_gateway  # noqa: PLC0415

        gw = vision_gateway()
        ds = brand.Sequences(gw.url, "pairs", seq_len=256, batch_size=2, seed=3, vision=self.RULE)
        n = ds.samples_in_epoch(0)
        rows, images = 0, 0
        for b in ds:
            self.assertEqual(b.tokens.dtype, torch.int32)
            self.assertEqual(b.loss_mask.dtype, torch.uint8)
            self.assertEqual(b.tokens.shape, b.loss_mask.shape)
            self.assertEqual(b.tokens.shape[1], 256)
            for r in range(b.tokens.shape[0]):
                ids, loss = b.tokens[r].tolist(), b.loss_mask[r].tolist()
                spans, sizes = b.image_spans[r].tolist(), b.image_sizes[r].tolist()
                self.assertEqual(len(spans), len(b.images[r]))
                for (start, length), (h, w), im in zip(spans, sizes, b.images[r]):
                    self.assertEqual(im.dtype, torch.uint8)
                    self.assertEqual(tuple(im.shape), (3, h, w))
                    self.assertEqual(length, (h // 14) * (w // 14) // 4)
                    self.assertEqual(ids[start - 1], 683)
                    self.assertEqual(ids[start + length], 684)
                    self.assertEqual(set(ids[start:start + length]), {682})
                    self.assertEqual(set(loss[start - 1:start + length + 1]), {0})
                self.assertEqual(ids.count(682), sum(length for _, length in spans))
                images += len(spans)
            rows += b.tokens.shape[0]
        self.assertEqual(rows, n)
        self.assertEqual(images, sum(len(sizes) for _, sizes in gw.samples.values()))

    def test_mixture_with_text_steps_alike(self):
        """A mixture of the image-text dataset and a text corpus of its
        tokenizer (``mix=`` with ``vision=``) read by brand.Sequences:
        every step carries the vision members of every sequence; a
        sequence without an image span (every text one) has no image and
        a loss mask of 1 on every token before the pad; the epoch's
        sequences hold both kinds, every image on its span."""
        from visiongateway import vision_gateway  # noqa: PLC0415

        gw = vision_gateway()
        ds = brand.Sequences(gw.url, mix="pairs:1,prose:1", seq_len=256, batch_size=4, seed=3, vision=self.RULE)
        n = ds.samples_in_epoch(0)
        rows, with_images, without = 0, 0, 0
        for b in ds:
            self.assertEqual(b.tokens.shape[1], 256)
            self.assertEqual(b.loss_mask.shape, b.tokens.shape)
            for r in range(b.tokens.shape[0]):
                ids, loss = b.tokens[r].tolist(), b.loss_mask[r].tolist()
                spans = b.image_spans[r].tolist()
                self.assertEqual(len(spans), len(b.images[r]))
                self.assertEqual(tuple(b.image_sizes[r].shape), (len(spans), 2))
                if spans:
                    with_images += 1
                    self.assertEqual(ids.count(682), sum(length for _, length in spans))
                    continue
                without += 1
                self.assertNotIn(682, ids)
                pad = len(ids) - next(i for i, x in enumerate(reversed(ids)) if x != 0)
                self.assertEqual(loss, [1] * pad + [0] * (len(ids) - pad))
            rows += b.tokens.shape[0]
        self.assertEqual(rows, n)
        self.assertGreater(with_images, 0)
        self.assertGreater(without, 0)
