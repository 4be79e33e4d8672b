"""A real `brand serve` of WebDataset shards of image-text samples, for
the vision tests.

vision_gateway() writes SHARDS shards of SAMPLES samples each — a txt
caption with 0 to 2 ``<image>`` placeholders and as many PNGs of seeded
noise, 28 to 90 pixels a side — indexes them with `brand index
--tokenizer` (the repository's byte-level BPE tokenizer.json, which
writes the samples' image-text facts: docs/format.md §6.12) and serves
them as dataset "pairs". Started on first use, stopped when the process
exits.
"""

from __future__ import annotations

import io
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
        self.serve(binary, ["--dataset", "pairs=" + src])


@shared
def vision_gateway() -> VisionGateway:
    """The shared gateway of dataset "pairs", started on first use."""
    return VisionGateway()
