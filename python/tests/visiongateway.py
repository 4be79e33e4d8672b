"""A real `brand serve` of WebDataset shards of image-text samples, for
the vision tests.

vision_gateway() writes SHARDS shards of SAMPLES samples each — a txt
caption with 0 to 2 ``<image>`` placeholders and as many PNGs of seeded
noise, 28 to 90 pixels a side — indexes them with `brand index
--tokenizer` (the repository's byte-level BPE tokenizer.json, which
writes the samples' image-text facts: docs/format.md §6.12) and serves
them as dataset "pairs"; and TEXTS texts of those words as an MDS
string column indexed with `brand index --text --tokenizer` (the same
tokenizer: a vision mixture's text component, docs/http-api.md) as
dataset "prose". Started on first use, stopped when the process exits.
"""

from __future__ import annotations

import io
import json
import os
import random
import struct
import subprocess
import tarfile
import zlib
from typing import Dict, List, Tuple

from servetest import REPO, Fixture, brand_binary, shared

SHARDS = 2
SAMPLES = 15
TEXTS = 60
TOKENIZER = os.path.join(REPO, "tokenize", "testdata", "hf-golden-tokenizer.json")


def png(w: int, h: int, seed: int) -> bytes:
    """An RGB PNG of w×h seeded noise."""
    rng = random.Random(seed)
    raw = b"".join(b"\x00" + bytes(rng.randrange(256) for _ in range(3 * w)) for _ in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def corpus() -> Dict[str, Tuple[str, List[Tuple[int, int]]]]:
    """Every sample's key, text and images' sizes (w, h)."""
    rng = random.Random(70)
    words = ["a cat", "on a mat", "ein Hund", "山と川", "two images", "compare them"]
    out = {}
    for s in range(SHARDS):
        for i in range(SAMPLES):
            k = rng.randrange(3)
            sizes = [(rng.randint(28, 90), rng.randint(28, 90)) for _ in range(k)]
            text = " ".join("<image> " + rng.choice(words) for _ in range(k)) + " " + rng.choice(words)
            out[f"p{s}/s{i:03d}"] = (text.strip(), sizes)
    return out


def write_shards(root: str, samples: Dict[str, Tuple[str, List[Tuple[int, int]]]]) -> None:
    os.makedirs(root)
    for s in range(SHARDS):
        with tarfile.open(os.path.join(root, f"{s:03d}.tar"), "w", format=tarfile.USTAR_FORMAT) as tf:
            for key, (text, sizes) in samples.items():
                if not key.startswith(f"p{s}/"):
                    continue
                members = [(f"{key}.{j}.png", png(w, h, hash((key, j)) & 0xFFFF)) for j, (w, h) in enumerate(sizes)]
                members.append((key + ".txt", text.encode()))
                for name, data in members:
                    info = tarfile.TarInfo(name)
                    info.size, info.mode, info.mtime = len(data), 0o644, 0
                    tf.addfile(info, io.BytesIO(data))


def prose() -> List[str]:
    """The texts of dataset "prose": 3 to 80 of the corpus's words."""
    rng = random.Random(71)
    words = ["a cat", "on a mat", "ein Hund", "山と川", "a river", "the mill"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 80))) for _ in range(TEXTS)]


def write_mds_text(root: str, texts: List[str], per_shard: int = 16) -> None:
    """texts as an MDS dataset of one str column "text" (Mosaic
    Streaming's layout: format/mds/testdata/mds_writer.py), per_shard
    samples a shard."""
    os.makedirs(root)
    config = {"version": 2, "format": "mds", "compression": None, "hashes": [], "size_limit": None,
              "column_names": ["text"], "column_encodings": ["str"], "column_sizes": [None]}
    config_data = json.dumps(config, sort_keys=True).encode()
    shards = []
    for at in range(0, len(texts), per_shard):
        samples = [struct.pack("<I", len(t.encode())) + t.encode() for t in texts[at:at + per_shard]]
        head = 4 + 4 * (len(samples) + 1) + len(config_data)
        offsets = [head]
        for smp in samples:
            offsets.append(offsets[-1] + len(smp))
        raw = struct.pack(f"<I{len(offsets)}I", len(samples), *offsets) + config_data + b"".join(samples)
        name = "shard.%05d.mds" % len(shards)
        with open(os.path.join(root, name), "wb") as f:
            f.write(raw)
        shard = {"samples": len(samples), "raw_data": {"basename": name, "bytes": len(raw), "hashes": {}}, "zip_data": None}
        shard.update(config)
        shards.append(shard)
    with open(os.path.join(root, "index.json"), "w") as f:
        json.dump({"version": 2, "shards": shards}, f, sort_keys=True)


class VisionGateway(Fixture):
    def __init__(self) -> None:
        super().__init__("brand-pytest-vision-")

    def start(self) -> None:
        binary = brand_binary(self.tmp)
        src = os.path.join(self.tmp, "pairs")
        self.samples = corpus()
        write_shards(src, self.samples)
        subprocess.run([binary, "index", "--src", src, "--tokenizer", TOKENIZER],
                       check=True, timeout=120, stdout=subprocess.DEVNULL)
        text = os.path.join(self.tmp, "prose")
        self.texts = prose()
        write_mds_text(text, self.texts)
        subprocess.run([binary, "index", "--src", text, "--name", "prose", "--text", "text", "--tokenizer", TOKENIZER],
                       check=True, timeout=120, stdout=subprocess.DEVNULL)
        self.serve(binary, ["--dataset", "pairs=" + src, "--dataset", "prose=" + text])


@shared
def vision_gateway() -> VisionGateway:
    """The shared gateway of dataset "pairs", started on first use."""
    return VisionGateway()
