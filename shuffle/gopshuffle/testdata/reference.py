#!/usr/bin/env python3
"""Reference implementation of the GOP-then-sample order (docs/shuffle.md
section 17), independent of the Go code, with the standard library alone.

The part above the "test driver" marker is reproduced verbatim in
docs/shuffle.md (a Go test checks that). It uses the shuffle's generator,
bounded draws and Fisher-Yates (docs/shuffle.md sections 1 to 4), written
out again here so that this file runs alone. The driver reads a JSON file
of cases (testdata/golden.json, or random cases a Go test writes) and
prints, as JSON, the windows it computes for them.
"""

import json
import sys

MASK64 = (1 << 64) - 1
MASK128 = (1 << 128) - 1
GOLDEN = 0x9E3779B97F4A7C15

DOMAIN_GOPS = 0x6272616E64676F70        # "brandgop"
DOMAIN_GOP_WINDOW = 0x6272616E64677077  # "brandgpw"


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def stream_seeds(seed, epoch, domain, index):
    h = mix64(domain)
    h = mix64(h ^ seed)
    h = mix64(h ^ epoch)
    h = mix64(h ^ index)
    h = (h + GOLDEN) & MASK64
    seed1 = mix64(h)
    h = (h + GOLDEN) & MASK64
    return seed1, mix64(h)


class PCG:
    MUL = (2549297995355413924 << 64) | 4865540595714422341
    INC = (6364136223846793005 << 64) | 1442695040888963407

    def __init__(self, seed1, seed2):
        self.state = (seed1 << 64) | seed2

    def uint64(self):
        self.state = (self.state * self.MUL + self.INC) & MASK128
        hi, lo = self.state >> 64, self.state & MASK64
        hi ^= hi >> 32
        hi = (hi * 0xDA942042E4DD58B5) & MASK64
        hi ^= hi >> 48
        return (hi * (lo | 1)) & MASK64


def bounded(rng, n):
    m = rng.uint64() * n
    if m & MASK64 < n:
        thresh = ((1 << 64) - n) % n
        while m & MASK64 < thresh:
            m = rng.uint64() * n
    return m >> 64


def fisher_yates(rng, a):
    for i in range(len(a) - 1, 0, -1):
        j = bounded(rng, i + 1)
        a[i], a[j] = a[j], a[i]


def gop_window_order(ids, groups, seed, epoch, w, size):
    """Window w's samples ids (in the order the window's own permutation
    starts from), groups[i] the group of ids[i], in GOP-then-sample order:
    the samples and where each GOP window starts."""
    first, members = [], {}
    for i, g in zip(ids, groups):
        if g not in members:
            members[g] = []
            first.append(g)
        members[g].append(i)
    fisher_yates(PCG(*stream_seeds(seed, epoch, DOMAIN_GOPS, w)), first)
    out, starts = [], [0]
    for k in range(0, (len(first) + size - 1) // size):
        run = []
        for g in first[k * size:(k + 1) * size]:
            run += members[g]
        fisher_yates(PCG(*stream_seeds(seed, epoch, DOMAIN_GOP_WINDOW, (w << 32) | k)), run)
        out += run
        starts.append(len(out))
    return out, starts


# ---- test driver ----

def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)["cases"]
    out = []
    for c in cases:
        ids, starts = gop_window_order(c["ids"], c["groups"], c["seed"], c["epoch"], c["window"], c["size"])
        out.append({"name": c["name"], "order": ids, "starts": starts})
    json.dump({"cases": out}, sys.stdout)


if __name__ == "__main__":
    main()
