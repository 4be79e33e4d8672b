"""Independent reference implementation of docs/importance.md.

Run as `python3 reference.py golden.json`: it recomputes every output of the
golden file from its inputs and prints them as JSON, which
TestPythonReference compares with Go. It uses only the standard library.
"""

import hashlib
import math
import struct

MASK64 = (1 << 64) - 1
MASK128 = (1 << 128) - 1
GOLDEN = 0x9E3779B97F4A7C15

DOMAIN_KEYS = 0x6272616E64696D6B  # "brandimk"
DOMAIN_DRAWS = 0x6272616E64696D64  # "brandimd"
DOMAIN_WINDOW = 0x6272616E64696D77  # "brandimw"

FLOOR = 0.1
HOT_SHARE = 0.5


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


def stream(seed, epoch, domain, index):
    return PCG(*stream_seeds(seed, epoch, domain, index))


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


def unit_open(rng):
    return ((rng.uint64() >> 12) + 0.5) * 2.0**-52


def unit_half_open(rng):
    return (rng.uint64() >> 11) * 2.0**-53


def spec_log(x):
    """FreeBSD e_log.c for x in (0, 1); Python floats round every operation."""
    ln2_hi, ln2_lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
    l1, l2, l3 = 6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01
    l4, l5, l6 = 2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01
    l7 = 1.479819860511658591e-01
    f1, ki = math.frexp(x)
    if f1 < 0.70710678118654752440:
        f1 *= 2
        ki -= 1
    f = f1 - 1
    k = float(ki)
    s = f / (2 + f)
    s2 = s * s
    s4 = s2 * s2
    t1 = s2 * (l1 + s4 * (l3 + s4 * (l5 + s4 * l7)))
    t2 = s4 * (l2 + s4 * (l4 + s4 * l6))
    r = t1 + t2
    hfsq = 0.5 * f * f
    return k * ln2_hi - ((hfsq - (s * (hfsq + r) + k * ln2_lo)) - f)


def as_float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def sample_weights(scores):
    n = len(scores)
    ids = sorted(range(n), key=lambda i: (scores[i], i))
    w = [0.0] * n
    a = 0
    while a < n:
        b = a + 1
        while b < n and scores[ids[b]] == scores[ids[a]]:
            b += 1
        r = max((2 * a + (b - a) + 1) / (2 * n), FLOOR)
        for i in ids[a:b]:
            w[i] = r
        a = b
    return w


def fsum_seq(values):
    s = 0.0
    for v in values:
        s += v
    return s


def importance_epoch(counts, scores, seed, epoch, window, hot):
    first = [0]
    for k in counts:
        first.append(first[-1] + k)
    n = first[-1]
    scores = [as_float32(s) + 0.0 for s in scores]
    w = sample_weights(scores)
    cw = [fsum_seq(w[first[c]:first[c + 1]]) for c in range(len(counts))]
    out = {"weights": w, "chunk_weights": cw}

    total = fsum_seq(cw)
    mean = total / n if n else 0.0
    a = max(w) / (mean * mean) if n else 0.0

    rng = stream(seed, epoch, DOMAIN_KEYS, 0)
    keys = []
    for c in range(len(counts)):
        u = unit_open(rng)
        keys.append(spec_log(u) / cw[c] if cw[c] > 0 else 0.0)
    live = [c for c in range(len(counts)) if cw[c] > 0]

    hot_set = set()
    if hot > 0:
        s = 0.0
        for c in sorted(live, key=lambda c: (-cw[c], c))[:hot]:
            x = cw[c] * a
            if s + x > HOT_SHARE * n:
                break
            s += x
            hot_set.add(c)
    by_key = lambda c: (-keys[c], c)
    walk = sorted((c for c in live if c in hot_set), key=by_key) + \
        sorted((c for c in live if c not in hot_set), key=by_key)

    draws = [0] * len(counts)
    order = []
    x, prev = 0.0, 0
    for k, c in enumerate(walk):
        x += cw[c] * a
        b = min(n, round(x))  # round() on a float is round-half-even
        if k == len(walk) - 1:
            b = n
        if b > prev:
            draws[c] = b - prev
            order.append(c)
            prev = b
        if prev == n:
            break

    def chunk_draws(c):
        p = []
        s = 0.0
        for v in w[first[c]:first[c + 1]]:
            s += v
            p.append(s)
        u = unit_half_open(stream(seed, epoch, DOMAIN_DRAWS, c))
        q = draws[c]
        ids = []
        for k in range(q):
            t = ((u + k) * s) / q
            j = next((j for j, pj in enumerate(p) if pj > t), len(p) - 1)
            ids.append(first[c] + j)
        return ids

    starts, ids_all = [0], []
    for wi in range((len(order) + window - 1) // window):
        ids = []
        for c in order[wi * window:(wi + 1) * window]:
            ids.extend(chunk_draws(c))
        fisher_yates(stream(seed, epoch, DOMAIN_WINDOW, wi), ids)
        separate_repeats(ids)
        ids_all.extend(ids)
        starts.append(len(ids_all))
    out.update(draws=draws, chunk_order=order, window_starts=starts, order=ids_all)
    return out


def separate_repeats(a):
    """No sample twice in a row: a repeat swaps with the next different one,
    or, with none after it, moves back into the first gap between two others."""
    for i in range(1, len(a)):
        d = a[i]
        if d != a[i - 1]:
            continue
        after = [j for j in range(i + 1, len(a)) if a[j] != d]
        if after:
            j = after[0]
            a[i], a[j] = a[j], a[i]
            continue
        for k in range(i):
            if a[k] != d and (k == 0 or a[k - 1] != d):
                a[k + 1:i + 1] = a[k:i]
                a[k] = d
                break


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def encode_snapshot(index_id, job, epoch, scores):
    b = b"BRANDIMP" + struct.pack("<I", 1)
    b += struct.pack("<H", len(index_id)) + index_id.encode()
    b += struct.pack("<H", len(job)) + job.encode()
    b += struct.pack("<QI", epoch, len(scores))
    b += b"".join(struct.pack("<f", s + 0.0) for s in scores)
    b += struct.pack("<I", crc32c(b))
    return b, hashlib.sha256(b).hexdigest()[:16]


# ---- test driver ----

if __name__ == "__main__":
    import json
    import sys

    with open(sys.argv[1]) as f:
        golden = json.load(f)
    out = {"cases": [], "streams": [], "logs": [], "snapshots": []}
    for case in golden["cases"]:
        r = importance_epoch(case["counts"], case["scores"], case["seed"], case["epoch"], case["window"], case["hot"])
        r["name"] = case["name"]
        out["cases"].append(r)
    for st in golden["streams"]:
        s1, s2 = stream_seeds(st["seed"], st["epoch"], st["domain"], st["index"])
        rng = PCG(s1, s2)
        out["streams"].append({"seed1": s1, "seed2": s2, "outputs": [rng.uint64() for _ in st["outputs"]]})
    for lg in golden["logs"]:
        x = struct.unpack("<d", struct.pack("<Q", lg["x_bits"]))[0]
        out["logs"].append({"log_bits": struct.unpack("<Q", struct.pack("<d", spec_log(x)))[0]})
    for sn in golden["snapshots"]:
        enc, version = encode_snapshot(sn["index_id"], sn["job"], sn["epoch"], sn["scores"])
        out["snapshots"].append({"encoding": enc.hex(), "version": version})
    json.dump(out, sys.stdout)
