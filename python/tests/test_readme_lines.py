"""python/README.md's first lines, run as written: one ``import brand`` and
a line a kind of job (images, tokens, clips, samples as stored), each a
loader of two workers over ``http://brand:8080``.

Each line runs verbatim against a gateway of this suite that serves a
dataset of the name it reads ("imagenet": JPEGs with a ``cls``; "web": a
Megatron corpus; "kinetics": a tree of videos), the name ``brand:8080``
resolved to that gateway as a user's DNS would resolve it (``socket.
getaddrinfo``, which the loader's forked workers inherit). ``train``, the
one name the lines leave to the reader, checks what each step hands it:
shapes, types, labels, and that every sample of the pass came.

Clips need a brand built with libavcodec and ffmpeg, as test_clips does
(videogateway.py): without them the clip line skips, or fails with
CI=true."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import REPO, Spec, _fixture, _generate  # noqa: E402
from servetest import Fixture, brand_binary, shared  # noqa: E402
from tokengateway import write_megatron  # noqa: E402
import videogateway  # noqa: E402

import torch  # noqa: E402

README = os.path.join(REPO, "python", "README.md")
IMAGES = 300  # a step of 256 and one of 44
DOCS = 120


def first_block() -> "list[str]":
    """The lines of python/README.md's first code block."""
    with open(README, encoding="utf-8") as f:
        m = re.search(r"```python\n(.*?)```", f.read(), re.S)
    assert m, "python/README.md has no Python block"
    return m.group(1).strip("\n").split("\n")


class ReadmeGateway(Fixture):
    """A gateway of "imagenet" (JPEGs of transform/testdata, a class
    each) and "web" (Megatron documents of 40 to 2,000 tokens)."""

    def __init__(self) -> None:
        super().__init__("brand-pytest-readme-")

    def start(self) -> None:
        binary = brand_binary(self.tmp)
        jpegs = [_fixture(n) for n in ("photo.jpg", "photo422.jpg", "photo444.jpg", "gray.jpg")]
        self.labels = {}
        extra = {}
        for i in range(IMAGES):
            key = f"n{i % 4:02d}/{i:05d}"
            extra[key] = {"jpg": jpegs[i % len(jpegs)], "cls": str(i % 4).encode()}
            self.labels[key] = i % 4
        src, store = os.path.join(self.tmp, "imagenet"), os.path.join(self.tmp, "store")
        _generate(src, "imagenet", Spec(0, 0, extra=extra), None)
        subprocess.run([binary, "pack", "--src", src, "--dst", "file://" + store, "--chunk-size", "64KiB"],
                       check=True, timeout=120, stdout=subprocess.DEVNULL)
        corpus = os.path.join(self.tmp, "web")
        os.makedirs(corpus)
        self.docs = [[d * 10_000 + j + 1 for j in range(40 + (d * 7919) % 1961)] for d in range(DOCS)]
        write_megatron(os.path.join(corpus, "web_text_document"), self.docs)
        subprocess.run([binary, "index", "--src", corpus, "--name", "web", "--chunk-size", "64KiB"],
                       check=True, timeout=120, stdout=subprocess.DEVNULL)
        self.serve(binary, ["--dataset", f"imagenet={store}", "--dataset", f"web={corpus}"])


@shared
def readme_gateway() -> ReadmeGateway:
    return ReadmeGateway()


class KineticsGateway(videogateway.VideoGateway):
    """videogateway's videos, served under the README's name."""

    def serve(self, binary: str, flags: "list[str]") -> None:
        super().serve(binary, [f.replace("vid=", "kinetics=", 1) for f in flags])


@shared
def kinetics_gateway() -> KineticsGateway:
    return KineticsGateway()


class TestReadmeLines(unittest.TestCase):
    def setUp(self) -> None:
        self.lines = first_block()

    def test_five_lines(self):
        """The block is five lines: the import and a line a kind."""
        self.assertEqual(len(self.lines), 5, self.lines)
        self.assertEqual(self.lines[0], "import brand")
        kinds = [re.match(r"for b in brand\.(\w+)\(\"http://brand:8080\"", ln) for ln in self.lines[1:]]
        self.assertTrue(all(kinds), self.lines[1:])
        self.assertEqual([k.group(1) for k in kinds], ["Tensors", "Sequences", "Clips", "Samples"])

    def _run(self, kind: str, url: str, train) -> None:
        """Runs the README's import and its line of ``kind`` as written,
        ``brand:8080`` resolved to ``url``'s address."""
        line = next(ln for ln in self.lines[1:] if ln.startswith(f"for b in brand.{kind}("))
        host, port = url.rsplit("//", 1)[1].rsplit(":", 1)
        real = socket.getaddrinfo

        def resolve(h, p, *a, **kw):
            if (h, p) == ("brand", 8080):
                return real(host, int(port), *a, **kw)
            return real(h, p, *a, **kw)

        socket.getaddrinfo = resolve
        try:
            exec(compile(self.lines[0] + "\n" + line + "\n", README, "exec"), {"train": train})
        finally:
            socket.getaddrinfo = real

    def test_images(self):
        gw = readme_gateway()
        labels = []

        def train(images, y):
            self.assertEqual(images.dtype, torch.uint8)
            self.assertEqual(tuple(images.shape[1:]), (3, 224, 224))
            self.assertEqual(y.dtype, torch.int64)
            self.assertEqual(len(y), len(images))
            labels.extend(y.tolist())

        self._run("Tensors", gw.url, train)
        self.assertEqual(sorted(labels), sorted(gw.labels.values()), "not every image of the pass came")

    def test_samples(self):
        gw = readme_gateway()
        seen = []
        jpegs = {_fixture(n) for n in ("photo.jpg", "photo422.jpg", "photo444.jpg", "gray.jpg")}

        def train(members, y):
            self.assertEqual(len(members), len(y))
            for t in members:
                self.assertEqual(t.dtype, torch.uint8)
                self.assertIn(t.numpy().tobytes(), jpegs)
            seen.extend(y.tolist())

        self._run("Samples", gw.url, train)
        self.assertEqual(sorted(seen), sorted(gw.labels.values()), "not every sample of the pass came")

    def test_tokens(self):
        gw = readme_gateway()
        tokens, steps = [], []

        def train(ids, positions):
            self.assertEqual(ids.dtype, torch.int32)
            self.assertEqual(ids.shape[1], 4096)
            steps.append(len(ids))
            self.assertEqual(positions.shape, ids.shape)
            # Each document's tokens in order, positions from 0 at its start.
            flat, pos = ids.reshape(-1).tolist(), positions.reshape(-1).tolist()
            for i, (t, p) in enumerate(zip(flat, pos)):
                if p > 0 and t and flat[i - 1]:
                    self.assertEqual(t, flat[i - 1] + 1, f"token {i}")
            tokens.extend(t for t in flat if t)

        self._run("Sequences", gw.url, train)
        self.assertEqual(sorted(tokens), sorted(t for d in gw.docs for t in d), "not every token once in a pass")
        self.assertTrue(all(n == 8 for n in steps[:-1]) and 0 < steps[-1] <= 8, steps)

    def test_clips(self):
        gw = kinetics_gateway()
        clips = []

        def train(frames, y):
            self.assertEqual(frames.dtype, torch.uint8)
            self.assertEqual(tuple(frames.shape[1:]), (16, 48, 64, 3))
            self.assertEqual(len(y), len(frames))
            self.assertTrue(set(y.tolist()) <= {0, 1}, y)
            clips.append(len(frames))

        self._run("Clips", gw.url, train)
        self.assertGreater(sum(clips), 0)
        self.assertTrue(all(n == 8 for n in clips[:-1]), clips)


if __name__ == "__main__":
    unittest.main()
