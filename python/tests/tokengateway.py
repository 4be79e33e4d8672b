"""A real `brand serve` of a Megatron token dataset, for the token tests.

token_gateway() writes one Megatron prefix (``corpus_text_document.bin``
and ``.idx``, int32, as megatron/core/datasets/indexed_dataset.py writes
them; docs/format.md §6.6) of DOCS documents whose lengths run from 1 to
past SEQ, indexes it in place with `brand index --chunk-size`, and serves
it as dataset "tok"; and a second prefix of DOCS2 documents as "tok2", for
mixtures. Document ``d``'s token ``j`` is ``d * STRIDE + j + 1``, "tok2"'s
documents numbered on from DOCS, so every token names its document and
place, and no token is PAD. Started on first use, stopped when the process
exits.
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
from typing import List

from servetest import Fixture, brand_binary, shared

SEQ = 64
STRIDE = 10_000
PAD = 2_000_000_000  # no document's token
DOCS = 240
DOCS2 = 80


def lengths(seed: int = 5) -> List[int]:
    """The documents' token counts: mostly short, a tail past SEQ (up to
    3.5 × SEQ), one of exactly SEQ and one of 1 token."""
    rng = random.Random(seed)
    out = [rng.randint(1, SEQ // 2) if rng.random() < 0.8 else rng.randint(SEQ // 2, 7 * SEQ // 2)
           for _ in range(DOCS if seed == 5 else DOCS2)]
    out[7], out[11] = SEQ, 1
    return out


def documents(first: int = 0, seed: int = 5) -> List[List[int]]:
    return [[d * STRIDE + j + 1 for j in range(n)] for d, n in enumerate(lengths(seed), first)]


def write_megatron(prefix: str, docs: List[List[int]]) -> None:
    """prefix.bin and prefix.idx of int32 documents, one sequence each."""
    with open(prefix + ".bin", "wb") as f:
        for d in docs:
            f.write(struct.pack(f"<{len(d)}i", *d))
    sizes = [len(d) for d in docs]
    pointers, at = [], 0
    for n in sizes:
        pointers.append(at)
        at += 4 * n
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 4, len(docs), len(docs) + 1))
        f.write(struct.pack(f"<{len(sizes)}i", *sizes))
        f.write(struct.pack(f"<{len(pointers)}q", *pointers))
        f.write(struct.pack(f"<{len(docs) + 1}q", *range(len(docs) + 1)))


class TokenGateway(Fixture):
    def __init__(self) -> None:
        super().__init__("brand-pytest-tokens-")

    def start(self) -> None:
        binary = brand_binary(self.tmp)
        src, src2 = os.path.join(self.tmp, "corpus"), os.path.join(self.tmp, "corpus2")
        self.docs, self.docs2 = documents(), documents(DOCS, seed=6)
        for d, name, docs in ((src, "tok", self.docs), (src2, "tok2", self.docs2)):
            os.makedirs(d)
            write_megatron(os.path.join(d, "corpus_text_document"), docs)
            # Chunks of a few KiB: a dozen of them, so that windows of 2
            # chunks pack apart.
            subprocess.run([binary, "index", "--src", d, "--name", name, "--chunk-size", "8KiB"],
                           check=True, timeout=120, stdout=subprocess.DEVNULL)
        self.serve(binary, ["--dataset", "tok=" + src, "--dataset", "tok2=" + src2])


@shared
def token_gateway() -> TokenGateway:
    """The shared gateway of dataset "tok", started on first use."""
    return TokenGateway()
