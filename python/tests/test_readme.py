"""README.md's Python blocks that import brand, each run as written but for
the gateway's address, with a DeprecationWarning an error: a newcomer's
copy of any of them trains through an entry python/README.md teaches
(``brand.Tensors``, ``brand.Sequences``, ``brand.Samples``,
``brand.Clips``), never the first releases' ``BrandDataset(url,
brand.Options(job=...))``, which still works and warns (issue 80, case
8 (e)).

Each block runs in a Python of its own (``-W error::DeprecationWarning``)
through HARNESS, against a gateway of this suite that serves the datasets
it names: "demo" (JPEGs with a ``cls``, the first dataset, so the one a
request naming none reads), "food101" (Parquet files in the Hub's layout,
an image column and an integer label, served in place), "web" and "code"
(Megatron token corpora), and "kinetics" (a tree of videos, as
test_readme_lines serves it). The README's loops train for as long as a
run does; the harness lets a block's loaders read its first passes only
(the later ones are empty), counts every step they hand out and reports
the globals the test names. Clips need a brand built with libavcodec and
ffmpeg (videogateway.py): without them the clip block skips, or fails
with CI=true.

Besides: no Python block of the README names ``BrandDataset`` or
``brand.Options(job=...)``, every one compiles, every block that imports
brand is run here, and the LeRobot call the clip block's comment shows
makes a ``brand.LeRobot`` without a warning.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from typing import Any, Dict, List, NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from appendgateway import write_columns  # noqa: E402
from gateway import REPO, Spec, _fixture, _generate  # noqa: E402
from servetest import Fixture, brand_binary, shared  # noqa: E402
from test_readme_lines import kinetics_gateway  # noqa: E402
from tokengateway import write_megatron  # noqa: E402

import torch  # noqa: E402,F401  (a missing torch is an error, not a skip)

README = os.path.join(REPO, "README.md")

DEMO = 150  # images: steps of 64, 64 and 22
FOOD = 80  # Parquet rows in two files, labels 0 to 4
DOCS = {"web": 60, "code": 30}  # Megatron documents


class Block(NamedTuple):
    section: str  # the "## " heading it is under
    line: int  # of its first line of code
    text: str


def python_blocks() -> List[Block]:
    """README.md's ```python blocks, in order."""
    out, section, cur, start = [], "", None, 0
    with open(README, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if cur is None and line.startswith("## "):
            section = line[3:]
        elif cur is None and line.strip() == "```python":
            cur, start = [], i + 2
        elif cur is not None and line.strip() == "```":
            out.append(Block(section, start, "\n".join(cur) + "\n"))
            cur = None
        elif cur is not None:
            cur.append(line)
    return out


def imports_brand(b: Block) -> bool:
    return re.search(r"^(import\s[^#\n]*\bbrand\b|from\s+brand[\s.])", b.text, re.M) is not None


# The harness a block runs under: python -c HARNESS SNIPPET URL PASSES NAME...
# Every http://localhost:8080 of SNIPPET is URL; every BrandLoader pass
# after the first PASSES (of all the snippet's loaders) is empty; each step
# handed out is counted by the epoch of its loader's dataset (its type, the
# samples in it, a SampleBatch's datasets, a step's (key, label) pairs, a
# SequenceBatch's tokens); the globals NAME are reported (a tensor's shape,
# dtype and, when small, values; a dict or number as it is).
HARNESS = r'''
import collections, json, sys
import torch
import brand.torch as bt

snippet, url, passes = sys.argv[1], sys.argv[2], int(sys.argv[3])
names = sys.argv[4:]
src = open(snippet).read()
if "http://localhost:8080" not in src:
    sys.exit("the block names no http://localhost:8080")
src = src.replace("http://localhost:8080", url)

epochs = collections.defaultdict(lambda: {"steps": 0, "samples": 0, "types": [], "datasets": collections.Counter(),
                                          "labels": {}, "tokens": 0, "token_sum": 0})
iterate = bt.BrandLoader.__iter__
done = [0]

def watched(loader):
    done[0] += 1
    if done[0] > passes:
        return
    for step in iterate(loader):
        e = epochs[loader.dataset.epoch]
        e["steps"] += 1
        e["types"].append(type(step).__name__)
        if isinstance(step, bt.SequenceBatch):
            e["samples"] += len(step.tokens)
            nonzero = step.tokens[step.tokens != 0]
            e["tokens"] += nonzero.numel()
            e["token_sum"] += int(nonzero.long().sum())
        else:
            e["samples"] += len(step.keys)
        if getattr(step, "datasets", None) is not None:
            e["datasets"].update(step.datasets)
        labels = getattr(step, "labels", None)
        if isinstance(labels, torch.Tensor):
            e["labels"].update(zip(step.keys, labels.tolist()))
        yield step

bt.BrandLoader.__iter__ = watched
ns = {"__name__": "__main__"}
exec(compile(src, "README.md", "exec"), ns)

def plain(v):
    if isinstance(v, torch.Tensor):
        out = {"shape": list(v.shape), "dtype": str(v.dtype)}
        if v.numel() <= 100_000:
            out["values"] = v.cpu().tolist()
        return out
    try:
        json.dumps(v)
        return v
    except TypeError:
        return repr(v)

print(json.dumps({"epochs": {str(k): v for k, v in epochs.items()}, "globals": {n: plain(ns.get(n)) for n in names}}))
'''


class ReadmeGateway(Fixture):
    """"demo" (DEMO JPEGs of transform/testdata in four classes, packed;
    the first dataset), "food101" (FOOD rows of Parquet in the Hub's
    layout, an image column of those JPEGs and an int64 label, indexed in
    place), "web" and "code" (Megatron corpora, indexed in place)."""

    def __init__(self) -> None:
        super().__init__("brand-pytest-readmemd-")

    def start(self) -> None:
        binary = brand_binary(self.tmp)
        jpegs = [_fixture(n) for n in ("photo.jpg", "photo422.jpg", "photo444.jpg", "gray.jpg")]
        self.demo, extra = {}, {}
        for i in range(DEMO):
            key = f"n{i % 4:02d}/img_{i:05d}"
            extra[key] = {"jpg": jpegs[i % len(jpegs)], "cls": str(i % 4).encode()}
            self.demo[key] = i % 4
        src, store = os.path.join(self.tmp, "demo"), os.path.join(self.tmp, "demo-store")
        _generate(src, "demo", Spec(0, 0, extra=extra), None)
        subprocess.run([binary, "pack", "--src", src, "--dst", "file://" + store, "--chunk-size", "64KiB"],
                       check=True, timeout=120, stdout=subprocess.DEVNULL)
        flags = ["--dataset", f"demo={store}"]

        # food101 as the Hub holds it: data/train-0000k-of-00002.parquet.
        food, self.food = os.path.join(self.tmp, "food101"), {}
        half = FOOD // 2
        for k in range(2):
            rows = range(k * half, (k + 1) * half)
            write_columns(os.path.join(food, "data", f"train-{k:05d}-of-00002.parquet"),
                          [("image", "binary", [jpegs[i % len(jpegs)] for i in rows]),
                           ("label", "int64", [i % 5 for i in rows])], 16)
            self.food.update({f"data/train-{k:05d}-of-00002/{r:02d}": i % 5 for r, i in enumerate(rows)})
        index = os.path.join(self.tmp, "food101-train")
        subprocess.run([binary, "index", "--src", food, "--prefix", "data/train-", "--dst", index,
                        "--chunk-size", "64KiB"], check=True, timeout=120, stdout=subprocess.DEVNULL)
        flags += ["--dataset", f"food101={index}"]

        # web and code: documents of 40 to 339 tokens, each token its
        # document's and place's, none the pad (0).
        self.docs = {}
        for n, (name, count) in enumerate(DOCS.items()):
            corpus = os.path.join(self.tmp, name)
            os.makedirs(corpus)
            docs = [[(n * 1000 + d + 1) * 1000 + j for j in range(40 + d * 13 % 300)] for d in range(count)]
            write_megatron(os.path.join(corpus, f"{name}_text_document"), docs)
            subprocess.run([binary, "index", "--src", corpus, "--name", name, "--chunk-size", "64KiB"],
                           check=True, timeout=120, stdout=subprocess.DEVNULL)
            self.docs[name] = docs
            flags += ["--dataset", f"{name}={corpus}"]
        self.serve(binary, flags)


@shared
def readme_gateway() -> ReadmeGateway:
    return ReadmeGateway()


class TestReadmeBlocks(unittest.TestCase):
    """What the README's blocks say, without a gateway."""

    def test_no_deprecated_entry(self):
        blocks = python_blocks()
        self.assertTrue(any(imports_brand(b) for b in blocks), "README.md has no Python block that imports brand")
        for b in blocks:
            self.assertNotIn("BrandDataset", b.text, f"README.md's block at line {b.line} ({b.section})")
            self.assertIsNone(re.search(r"brand\.Options\(\s*job\s*=", b.text),
                              f"README.md's block at line {b.line} ({b.section}) passes brand.Options(job=...)")

    def test_blocks_compile(self):
        for b in python_blocks():
            compile(b.text, f"README.md:{b.line}", "exec")

    def test_every_block_is_run(self):
        """Each block that imports brand is one a test below runs."""
        run = {}
        for b in python_blocks():
            if imports_brand(b):
                run.setdefault(b.section, []).append(b.line)
        self.assertEqual(sorted(run), sorted(RUNS), "the sections whose blocks import brand, and those run here")
        for section, lines in run.items():
            self.assertEqual(len(lines), 1, f"{section}: blocks at lines {lines}; each is run as its section's one")

    def test_lerobot_comment(self):
        """The LeRobot call the clip block's comment shows, uncommented,
        makes a brand.LeRobot (no request is made) without a warning."""
        b = section_block("Video clips and robot episodes")
        lines = b.text.split("\n")
        at = next((i for i, ln in enumerate(lines) if ln.startswith("# LeRobot: ")), None)
        self.assertIsNotNone(at, f"README.md's clip block shows no LeRobot call:\n{b.text}")
        comment = []
        for ln in lines[at:]:
            if not ln.startswith("#"):
                break
            comment.append(ln.lstrip("#").strip())
        text = " ".join(comment)[len("LeRobot: "):]
        self.assertTrue(text.startswith("brand.LeRobot("), text)
        depth = 0
        for end, ch in enumerate(text):  # the call: to its closing parenthesis
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if ch == ")" and depth == 0:
                break
        call = text[:end + 1]
        code = f"import brand\nds = {call}\nassert isinstance(ds, brand.LeRobot), type(ds)\n"
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        r = subprocess.run([sys.executable, "-W", "error", "-c", code], env=env, capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, f"{call}\n{r.stderr}")


def section_block(section: str) -> Block:
    found = [b for b in python_blocks() if b.section == section and imports_brand(b)]
    assert len(found) == 1, f"README.md's {section!r}: {len(found)} Python blocks that import brand"
    return found[0]


def run_block(section: str, url: str, passes: int, *names: str) -> Dict[str, Any]:
    """Runs ``section``'s block under HARNESS in a directory of its own
    (the quick start's writes ckpt.pt), a DeprecationWarning an error."""
    b = section_block(section)
    with tempfile.TemporaryDirectory(prefix="brand-readme-block-") as tmp:
        snippet = os.path.join(tmp, "snippet.py")
        with open(snippet, "w") as f:
            f.write(b.text)
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        r = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", HARNESS, snippet, url,
                            str(passes), *names], cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"README.md's block at line {b.line} ({section}) failed:\n{b.text}\n{r.stderr[-4000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


class TestReadmeRuns(unittest.TestCase):
    def assertTensor(self, got: Dict[str, Any], dtype: str, rest: List[int], what: str) -> int:
        """``got`` (a reported global) is a tensor of ``dtype`` shaped
        ``(B, *rest)``; returns B."""
        self.assertEqual(got.get("dtype"), dtype, f"{what}: {got.get('dtype')} {got.get('shape')}")
        self.assertEqual(got["shape"][1:], rest, what)
        return got["shape"][0]

    def assertEpochs(self, r: Dict[str, Any], epochs: List[str], kind: str, samples: int) -> None:
        self.assertEqual(sorted(r["epochs"]), epochs, r["epochs"].keys())
        for e in epochs:
            c = r["epochs"][e]
            self.assertEqual(set(c["types"]), {kind}, f"epoch {e}'s steps")
            self.assertEqual(c["samples"], samples, f"epoch {e}: every sample once")

    def test_quick_start(self):
        gw = readme_gateway()
        r = run_block("Quick start", gw.url, 2)
        self.assertEpochs(r, ["0", "1"], "TensorBatch", DEMO)
        for e in ("0", "1"):
            self.assertEqual(r["epochs"][e]["labels"], gw.demo, f"epoch {e}'s labels")

    def test_hugging_face(self):
        gw = readme_gateway()
        r = run_block("Train on a Hugging Face dataset without converting it", gw.url, 2, "x", "y")
        self.assertEpochs(r, ["0", "1"], "TensorBatch", FOOD)
        for e in ("0", "1"):
            self.assertEqual(r["epochs"][e]["labels"], gw.food, f"epoch {e}: each row's label")
        n = self.assertTensor(r["globals"]["x"], "torch.uint8", [3, 224, 224], "x")
        self.assertEqual(self.assertTensor(r["globals"]["y"], "torch.int64", [], "y"), n)

    def test_tokens(self):
        gw = readme_gateway()
        r = run_block("Train a language model from Megatron or Hugging Face token data", gw.url, 2,
                      "ids", "pos", "cu_seqlens")
        docs = gw.docs["web"]
        self.assertEqual(sorted(r["epochs"]), ["0", "1"])
        for e in ("0", "1"):
            c = r["epochs"][e]
            self.assertEqual(set(c["types"]), {"SequenceBatch"})
            self.assertEqual((c["tokens"], c["token_sum"]), (sum(map(len, docs)), sum(map(sum, docs))),
                             f"epoch {e}: every token of web once")
        g = r["globals"]
        self.assertTensor(g["ids"], "torch.int32", [4096], "ids")
        self.assertTensor(g["pos"], "torch.int32", [4096], "pos")
        flat = [p for row in g["pos"]["values"] for p in row]
        self.assertEqual(g["cu_seqlens"]["dtype"], "torch.int32")
        self.assertEqual(g["cu_seqlens"]["values"], [i for i, p in enumerate(flat) if p == 0] + [len(flat)],
                         "cu_seqlens: where each document starts, then the end")

    def test_mixture(self):
        gw = readme_gateway()
        r = run_block("Mixing datasets", gw.url, 1, "names", "state")
        c = r["epochs"]["0"]
        self.assertEqual(set(c["types"]), {"SampleBatch"})
        self.assertGreater(c["samples"], 0)
        web = c["datasets"].get("web", 0)
        self.assertEqual(web + c["datasets"].get("code", 0), c["samples"], c["datasets"])
        self.assertLessEqual(abs(web * 10 - 7 * c["samples"]), 10 * c["steps"], f"web 70 % a step: {c}")
        self.assertTrue(set(r["globals"]["names"]) <= {"web", "code"}, r["globals"]["names"])
        self.assertEqual(r["globals"]["state"]["mix"], "web:0.7,code:0.3", r["globals"]["state"])

    def test_tensors(self):
        gw = readme_gateway()
        r = run_block("Tensors, not bytes", gw.url, 1, "x", "y")  # one epoch of its 90
        self.assertEpochs(r, ["0"], "TensorBatch", DEMO)
        self.assertEqual(r["epochs"]["0"]["labels"], gw.demo)
        n = self.assertTensor(r["globals"]["x"], "torch.float32", [3, 224, 224], "x, normalised")
        self.assertEqual(self.assertTensor(r["globals"]["y"], "torch.int64", [], "y"), n)

    def test_clips(self):
        gw = kinetics_gateway()
        r = run_block("Video clips and robot episodes", gw.url, 2, "x", "y")
        self.assertEqual(sorted(r["epochs"]), ["0", "1"])
        for e in ("0", "1"):
            c = r["epochs"][e]
            self.assertEqual(set(c["types"]), {"ClipBatch"})
            self.assertGreater(c["samples"], 0)
            self.assertTrue(set(c["labels"].values()) <= {0, 1}, c["labels"])
        self.assertEqual(r["epochs"]["0"]["samples"], r["epochs"]["1"]["samples"])
        n = self.assertTensor(r["globals"]["x"], "torch.uint8", [16, 48, 64, 3], "x")
        self.assertEqual(self.assertTensor(r["globals"]["y"], "torch.int64", [], "y"), n)


#: The sections whose block a test of TestReadmeRuns runs.
RUNS = ["Quick start", "Train on a Hugging Face dataset without converting it",
        "Train a language model from Megatron or Hugging Face token data", "Mixing datasets",
        "Tensors, not bytes", "Video clips and robot episodes"]


if __name__ == "__main__":
    unittest.main()
