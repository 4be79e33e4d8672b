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

import atexit
import os
import random
import shutil
import struct
import subprocess
import tempfile
import time
import urllib.request
from typing import List, Optional

from gateway import REPO, free_port

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


class TokenGateway:
    url: str

    def __init__(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="brand-pytest-tokens-")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        binary = os.environ.get("BRAND_BIN")
        if not binary:
            binary = os.path.join(self.tmp, "brand")
            subprocess.run(["go", "build", "-o", binary, "./cmd/brand"], cwd=REPO, check=True, timeout=600)
        src, src2 = os.path.join(self.tmp, "corpus"), os.path.join(self.tmp, "corpus2")
        self.docs, self.docs2 = documents(), documents(DOCS, seed=6)
        for d, name, docs in ((src, "tok", self.docs), (src2, "tok2", self.docs2)):
            os.makedirs(d)
            write_megatron(os.path.join(d, "corpus_text_document"), docs)
            # Chunks of a few KiB: a dozen of them, so that windows of 2
            # chunks pack apart.
            subprocess.run([binary, "index", "--src", d, "--name", name, "--chunk-size", "8KiB"],
                           check=True, timeout=120, stdout=subprocess.DEVNULL)
        self.log = open(os.path.join(self.tmp, "serve.log"), "wb")
        for _ in range(5):
            port = free_port()
            self.url = f"http://127.0.0.1:{port}"
            self.proc = subprocess.Popen(
                [binary, "serve", "--dataset", "tok=" + src, "--dataset", "tok2=" + src2, "--listen", f"127.0.0.1:{port}",
                 "--cache-size", "32MiB", "--cache-prefault=false", "--window", "2",
                 "--log-level", "warn", "--log-format", "json", "--shutdown-timeout", "1s"],
                stdout=self.log, stderr=subprocess.STDOUT,
            )
            if self._wait_ready(30):
                return
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError(f"brand serve did not become ready; see {self.log.name}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        p = getattr(self, "proc", None)
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        log = getattr(self, "log", None)
        if log is not None:
            log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


_gw: Optional[TokenGateway] = None


def token_gateway() -> TokenGateway:
    """The shared gateway of dataset "tok", started on first use."""
    global _gw
    if _gw is None:
        _gw = TokenGateway()
        atexit.register(_gw.stop)
    return _gw
