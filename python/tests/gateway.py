"""A real `brand serve` over small generated datasets, shared by the tests.

gateway() serves one dataset, "t"; mix_gateway() serves three of different
sizes, for mixtures; task_gateway() serves 500 prompts, for task jobs;
tensor_gateway(mode) serves images for transform= (PNGs whose pixels the
tests know, the decoding fixtures of transform/testdata, samples without
images, and bad images), with the pipelines of TRANSFORM_CONFIG and
--on-bad-image=mode. The binary comes from $BRAND_BIN, or is built from
this repository with `go build`. A gateway starts on first use and stops
when the process exits (servetest.py starts, waits for and stops them).
"""

from __future__ import annotations

import atexit
import json
import os
import random
import shutil
import struct
import subprocess
import tempfile
import time
import urllib.request
import zlib
from typing import Dict, List, Optional

from servetest import REPO, Fixture, brand_binary, free_port, shared  # servetest puts the package on the path

HERE = os.path.dirname(os.path.abspath(__file__))

CLASSES = 4
PER_CLASS = 75  # 300 samples
CHUNK_SIZE = "48KiB"  # about 2 KiB a sample: a dozen chunks


class Spec:
    """A generated dataset: classes × per_class samples, each a file of
    random bytes (up to max_bytes) with extension ext, a "cls" and, with
    tag, a "ds" holding the dataset's name; packed in chunks of
    chunk_size. With images, each sample's file is a PNG of random pixels
    (24 to 64 pixels a side) instead, and extra adds files of given names
    and bytes (key -> ext -> bytes)."""

    def __init__(self, classes: int, per_class: int, chunk_size: str = CHUNK_SIZE, max_bytes: int = 3000,
                 tag: bool = False, ext: str = "jpg", images: bool = False,
                 extra: Optional[Dict[str, Dict[str, bytes]]] = None, sizes: bool = False) -> None:
        self.classes, self.per_class, self.chunk_size = classes, per_class, chunk_size
        self.max_bytes, self.tag, self.ext = max_bytes, tag, ext
        self.images, self.extra, self.sizes = images, extra or {}, sizes


# The datasets of mix_gateway(): sizes 120, 60 and 12, in chunks of a few
# samples. Keys repeat across them (c0/s0_0000 is in all three), as a
# mixture allows, and the books' are "txt" where the others' are "jpg";
# each sample's "ds" names its dataset.
MIX_SPECS = {
    "web": Spec(3, 40, "8KiB", 1500, tag=True),
    "code": Spec(2, 30, "8KiB", 1500, tag=True),
    "books": Spec(2, 6, "4KiB", 1500, tag=True, ext="txt"),
}


class Gateway(Fixture):
    src: str
    files: Dict[str, Dict[str, bytes]]  # the first dataset's: key -> ext -> bytes
    datasets: Dict[str, Dict[str, Dict[str, bytes]]]  # name -> key -> ext -> bytes
    binary: str

    def __init__(self, specs: Optional[Dict[str, Spec]] = None, flags: Optional[List[str]] = None) -> None:
        self.specs = specs or {"t": Spec(CLASSES, PER_CLASS)}
        self.flags = flags or []
        super().__init__("brand-pytest-")

    def start(self) -> None:
        binary = self.binary = brand_binary(self.tmp)
        self.datasets = {}
        flags = []
        for k, (name, spec) in enumerate(self.specs.items()):
            src = os.path.join(self.tmp, "src" if k == 0 else f"src-{name}")
            store = os.path.join(self.tmp, "store" if k == 0 else f"store-{name}")
            self.datasets[name] = _generate(src, name, spec, random.Random(1 + k))
            subprocess.run(
                [binary, "pack", "--src", src, "--dst", "file://" + store, "--chunk-size", spec.chunk_size,
                 *(["--sizes"] if spec.sizes else [])],
                check=True, timeout=120, stdout=subprocess.DEVNULL,
            )
            flags += ["--dataset", f"{name}={store}"]
        first = next(iter(self.specs))
        self.src = os.path.join(self.tmp, "src")
        self.files = self.datasets[first]
        self.serve(binary, [*flags, *self.flags])

    @property
    def samples(self) -> int:
        return len(self.files)


class ServeCluster:
    """n `brand serve` processes over the shared gateway's store (its first
    dataset's, served as ``dataset``), each given the same --peers list: a
    real cluster on loopback. Ready when every node sees every other up
    and answers /readyz (its datasets loaded)."""

    def __init__(self, gw: Gateway, n: int, dataset: str = "t") -> None:
        self.procs: list = []
        self.logs: list = []
        # In URL order, as a cluster's membership sorts its members: node k
        # is member k, whose position /cluster's "self" and the homes name.
        ports = sorted((free_port() for _ in range(n)), key=str)
        self.urls = [f"http://127.0.0.1:{p}" for p in ports]
        store = os.path.join(gw.tmp, "store")
        try:
            for k, port in enumerate(ports):
                log = open(os.path.join(gw.tmp, f"cluster-{port}.log"), "wb")
                self.logs.append(log)
                self.procs.append(subprocess.Popen(
                    [gw.binary, "serve", "--dataset", f"{dataset}={store}", "--listen", f"127.0.0.1:{port}",
                     "--cache-size", "8MiB", "--cache-prefault=false", "--window", "2",
                     "--peers", ",".join(self.urls), "--self", str(k),
                     "--log-level", "warn", "--log-format", "json", "--shutdown-timeout", "1s"],
                    stdout=log, stderr=subprocess.STDOUT,
                ))
            self._wait_ready(60)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for k, p in enumerate(self.procs):
            while True:
                if p.poll() is not None:
                    raise RuntimeError(f"node {k} exited; see {self.logs[k].name}")
                try:
                    with urllib.request.urlopen(self.urls[k] + "/cluster", timeout=2) as r:
                        doc = json.load(r)
                    # /cluster answers before the node's datasets are
                    # loaded, when a job's requests still get 503.
                    if doc["self"] == k and len(doc["nodes"]) == len(self.urls) and all(n["up"] for n in doc["nodes"]):
                        with urllib.request.urlopen(self.urls[k] + "/readyz", timeout=2):
                            break
                except (OSError, ValueError, KeyError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {k} not ready with its peers up; see {self.logs[k].name}")
                time.sleep(0.05)

    def kill(self, k: int) -> None:
        """Ends node k at once, as a machine's loss would."""
        self.procs[k].kill()
        self.procs[k].wait()

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()


def png(width: int, height: int, rgb: bytes) -> bytes:
    """An 8-bit RGB PNG of ``rgb`` (rows of width*3 bytes, top first)."""
    row = width * 3
    raw = b"".join(b"\x00" + rgb[y * row:(y + 1) * row] for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


#: Pixels of the PNGs a Spec with images generates: (dataset, key) ->
#: (width, height, RGB bytes, HWC), beside the files themselves.
PIXELS: Dict["tuple[str, str]", "tuple[int, int, bytes]"] = {}

#: The fixtures of transform/testdata.
FIXTURES = os.path.join(REPO, "transform", "testdata")

#: The pipelines tensor_gateway() defines beside the built-ins: a flip
#: alone (the tensor is the image, mirrored as the draw says) and a
#: random resized crop to 32×32 then a flip.
TRANSFORM_CONFIG = {"pipelines": {
    "flip": {"ops": [{"op": "hflip"}]},
    "crop32": {"ops": [{"op": "random_resized_crop", "size": 32}, {"op": "hflip"}]},
}}


def _fixture(name: str) -> bytes:
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read()


def tensor_specs() -> Dict[str, Spec]:
    """tensor_gateway()'s datasets: "img", 3 × 24 PNGs of known pixels
    and four fixtures of transform/testdata (two JPEGs, a grayscale JPEG,
    a PNG with alpha), each with its Pillow-decoded pixels (NAME.pil.npy)
    for a golden; "img2", 3 × 24 other PNGs under img's keys (a mixture's
    components with equal keys); "txt", samples without images; "bad", 6
    PNGs and a truncated and an undecodable JPEG."""
    fixtures = {f"fx/{n.replace('.', '_')}": {n.rsplit(".", 1)[1]: _fixture(n), "cls": b"9"}
                for n in ("photo.jpg", "progressive.jpg", "gray.jpg", "alpha.png")}
    bad = {"bad/truncated": {"jpg": _fixture("truncated.jpg"), "cls": b"7"},
           "bad/garbage": {"jpg": _fixture("garbage.jpg"), "cls": b"7"}}
    return {
        "img": Spec(3, 24, "16KiB", images=True, extra=fixtures),
        "img2": Spec(3, 24, "16KiB", images=True),
        "txt": Spec(2, 20, "8KiB", 1500, ext="txt"),
        "bad": Spec(2, 3, "16KiB", images=True, extra=bad),
    }


def _generate(src: str, name: str, spec: Spec, rng: random.Random) -> Dict[str, Dict[str, bytes]]:
    """Writes spec's sample files under src; returns them by key."""
    files = {}
    for key, data in spec.extra.items():
        d, stem = os.path.split(os.path.join(src, key))
        os.makedirs(d, exist_ok=True)
        for ext, b in data.items():
            with open(os.path.join(d, f"{stem}.{ext}"), "wb") as f:
                f.write(b)
        files[key] = data
    for c in range(spec.classes):
        d = os.path.join(src, f"c{c}")
        os.makedirs(d)
        for i in range(spec.per_class):
            stem = f"s{c}_{i:04d}"
            if spec.images:
                w, h = rng.randint(24, 64), rng.randint(24, 64)
                rgb = rng.randbytes(w * h * 3)
                PIXELS[(name, f"c{c}/{stem}")] = (w, h, rgb)
                body = png(w, h, rgb)
            else:
                body = rng.randbytes(rng.randint(1, spec.max_bytes))
            data = {"png" if spec.images else spec.ext: body, "cls": str(c).encode()}
            if spec.tag:
                data["ds"] = name.encode()
            for ext, b in data.items():
                with open(os.path.join(d, f"{stem}.{ext}"), "wb") as f:
                    f.write(b)
            files[f"c{c}/{stem}"] = data
    return files


@shared
def gateway() -> Gateway:
    """The shared gateway of dataset "t", started on first use."""
    return Gateway()


@shared
def mix_gateway() -> Gateway:
    """The shared gateway of MIX_SPECS's three datasets, started on first
    use."""
    return Gateway(MIX_SPECS)


def rank_at(peers: "list[str]", url: str) -> int:
    """The rank of a two-rank job whose home is ``url`` among ``peers``:
    rank r of two lives on node r of the peers sorted as a cluster's
    membership sorts them (the clients sort a peer list the same way)."""
    return sorted(peers).index(url)


#: task_gateway()'s dataset: 500 prompts (5 classes of 100), each sample
#: a "txt" (its prompt, up to 400 random bytes) and a "cls".
PROMPT_SPEC = Spec(5, 100, "16KiB", 400, ext="txt")


@shared
def task_gateway() -> Gateway:
    """The shared gateway of "prompts" (PROMPT_SPEC), for task jobs
    (docs/tasks.md), started on first use."""
    return Gateway({"prompts": PROMPT_SPEC})


@shared
def bucket_gateway() -> Gateway:
    """The shared gateway of "img": 4 × 40 PNGs of random sizes (24 to 64
    pixels a side, PIXELS), packed with their image sizes (--sizes) for
    bucket jobs, started on first use."""
    return Gateway({"img": Spec(4, 40, "16KiB", images=True, sizes=True)})


@shared
def bucket_mix_gateway() -> Gateway:
    """The shared gateway of a bucketed mixture's sources, started on
    first use: "img", 4 × 40 PNGs of random sizes, and "art", 3 × 30,
    both packed with their image sizes (--sizes)."""
    return Gateway({"img": Spec(4, 40, "16KiB", images=True, sizes=True),
                    "art": Spec(3, 30, "16KiB", images=True, sizes=True)})


@shared
def tensor_gateway(on_bad_image: str = "fail") -> Gateway:
    """The shared gateway of tensor_specs()'s datasets with TRANSFORM_CONFIG's
    pipelines and --on-bad-image=on_bad_image ("fail" or "skip"), started on
    first use."""
    tmp = tempfile.mkdtemp(prefix="brand-pytest-config-")
    atexit.register(shutil.rmtree, tmp, True)
    config = os.path.join(tmp, "transforms.json")
    with open(config, "w") as f:
        json.dump(TRANSFORM_CONFIG, f)
    return Gateway(tensor_specs(), ["--transform-config", config, "--on-bad-image", on_bad_image])
