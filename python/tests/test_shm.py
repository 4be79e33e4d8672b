"""A loader worker's shared blocks: mapped into the worker at once."""

from __future__ import annotations

import os
import resource
import unittest

from gateway import HERE  # noqa: F401 - puts the package on the path

import torch  # noqa: E402  (a missing torch is an error, not a skip)

from brand.torch._shm import BLOCK_HEAD, Blocks, Board  # noqa: E402


def _kernel() -> "tuple[int, int]":
    major, minor = os.uname().release.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


class TestPopulate(unittest.TestCase):
    @unittest.skipUnless(os.uname().sysname == "Linux", "madvise(MADV_POPULATE_WRITE) is Linux's")
    def test_a_block_is_mapped_before_it_is_written(self):
        """A worker maps a block's pages into its page tables in one call
        when it takes it (Linux 5.14 and later), so that reading a batch
        into it faults no page in: the faults were most of a worker's CPU
        over a short pass."""
        if _kernel() < (5, 14):
            self.skipTest(f"kernel {os.uname().release} has no MADV_POPULATE_WRITE")
        blocks = Blocks(Board(1, 2), 0)
        n = 8 << 20
        body = blocks.body(n)
        self.assertIsNotNone(body)
        self.assertGreaterEqual(blocks.mapped[0], BLOCK_HEAD + n)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t = torch.frombuffer(body, dtype=torch.uint8)
        t[::4096] = 1
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        self.assertLess(faults, n // 4096 // 8, f"{faults} page faults writing a populated block of {n >> 20} MiB")


if __name__ == "__main__":
    unittest.main()
