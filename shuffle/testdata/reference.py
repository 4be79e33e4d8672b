#!/usr/bin/env python3
"""Reference implementation of Brand's shuffle, independent of the Go code.

The part above the "test driver" marker is reproduced verbatim in
docs/shuffle.md (a Go test checks that), and is the executable form of the
specification there. The driver reads the golden vectors and prints, as
JSON, what this implementation computes for them; shuffle's Go tests compare
that with the Go implementation.
"""

MASK64 = (1 << 64) - 1
MASK128 = (1 << 128) - 1

DOMAIN_CHUNKS = 0x6272616E6463686B  # "brandchk"
DOMAIN_WINDOW = 0x6272616E6477696E  # "brandwin"
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z):
    """SplitMix64 finalizer, on 64-bit unsigned integers."""
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
    seed2 = mix64(h)
    return seed1, seed2


class PCG:
    """Go's math/rand/v2 PCG: 128-bit LCG with the DXSM output function."""

    MUL = (2549297995355413924 << 64) | 4865540595714422341
    INC = (6364136223846793005 << 64) | 1442695040888963407

    def __init__(self, seed1, seed2):
        self.state = (seed1 << 64) | seed2  # NewPCG(seed1, seed2)

    def uint64(self):
        self.state = (self.state * self.MUL + self.INC) & MASK128
        hi, lo = self.state >> 64, self.state & MASK64
        hi ^= hi >> 32
        hi = (hi * 0xDA942042E4DD58B5) & MASK64
        hi ^= hi >> 48
        hi = (hi * (lo | 1)) & MASK64
        return hi


def bounded(rng, n):
    """Uniform integer in [0, n), 1 <= n < 2**64: Lemire's method."""
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


def chunk_order(counts, seed, epoch):
    order = list(range(len(counts)))
    fisher_yates(PCG(*stream_seeds(seed, epoch, DOMAIN_CHUNKS, 0)), order)
    return order


def epoch_order(counts, seed, epoch, window):
    """The sample IDs of the whole epoch, in order, and the window starts."""
    first = [0]
    for k in counts:
        first.append(first[-1] + k)
    chunks = chunk_order(counts, seed, epoch)
    order, starts = [], [0]
    for w in range((len(chunks) + window - 1) // window):
        ids = []
        for c in chunks[w * window:(w + 1) * window]:
            ids.extend(range(first[c], first[c + 1]))
        fisher_yates(PCG(*stream_seeds(seed, epoch, DOMAIN_WINDOW, w)), ids)
        order.extend(ids)
        starts.append(len(order))
    return order, starts


def num_batches(n, batch_size, world, drop_last):
    g = batch_size * world
    return n // g if drop_last else (n + g - 1) // g


def batch_range(n, m, batch_size, world, rank, drop_last):
    assert 0 <= m < num_batches(n, batch_size, world, drop_last)
    assert 0 <= rank < world
    start = min(m * batch_size * world + rank * batch_size, n)
    return start, min(start + batch_size, n)


# ---- test driver ----

if __name__ == "__main__":
    import json
    import sys

    with open(sys.argv[1]) as f:
        golden = json.load(f)

    out = {"cases": [], "streams": [], "bounded": []}
    for case in golden["cases"]:
        counts, b, world = case["counts"], case["batch_size"], case["world"]
        order, starts = epoch_order(counts, case["seed"], case["epoch"], case["window"])
        nb = num_batches(len(order), b, world, case["drop_last"])
        batches = []
        for m in range(nb):
            ranks = []
            for r in range(world):
                s, e = batch_range(len(order), m, b, world, r, case["drop_last"])
                ranks.append(order[s:e])
            batches.append(ranks)
        out["cases"].append({
            "name": case["name"],
            "chunk_order": chunk_order(counts, case["seed"], case["epoch"]),
            "window_starts": starts,
            "order": order,
            "num_batches": nb,
            "batches": batches,
        })
    for st in golden["streams"]:
        s1, s2 = stream_seeds(st["seed"], st["epoch"], st["domain"], st["index"])
        rng = PCG(s1, s2)
        out["streams"].append({
            "seed1": s1,
            "seed2": s2,
            "outputs": [rng.uint64() for _ in st["outputs"]],
        })
    for bd in golden["bounded"]:
        rng = PCG(bd["seed1"], bd["seed2"])
        out["bounded"].append({"values": [bounded(rng, n) for n in bd["n"]]})
    json.dump(out, sys.stdout)
