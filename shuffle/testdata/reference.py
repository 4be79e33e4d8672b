#!/usr/bin/env python3
"""Reference implementation of Brand's shuffle, independent of the Go code.

The part above the "test driver" marker is reproduced verbatim in
docs/shuffle.md (a Go test checks that), and is the executable form of the
specification there, clusters (section 7) and mixtures (section 11)
included. The driver reads a JSON
file of inputs (the golden vectors of shuffle or cluster, or random cases a
Go test writes) and prints, as JSON, what this implementation computes for
them; the Go tests of shuffle and cluster compare that with Go.
"""

import hashlib
import math
from fractions import Fraction

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
    chunks = chunk_order(counts, seed, epoch)
    first = [0]
    for k in counts:
        first.append(first[-1] + k)
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


# ---- clusters (section 7) ----

DOMAIN_OWNER = 0x6272616E646F776E  # "brandown"


def fnv64a(text):
    """FNV-1a, 64 bits, of a string's bytes."""
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & MASK64
    return h


def index_key(index_id):
    return fnv64a(index_id)


def membership(urls):
    """A membership: its members (without a trailing slash, sorted, each
    once), its version and its members' IDs."""
    members = sorted({u.rstrip("/") for u in urls})
    text = "brand-members-v1\n" + "".join(u + "\n" for u in members)
    version = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return members, version, [fnv64a(u) for u in members]


def positions(nodes):
    """The IDs of nodes named by their positions."""
    return list(range(nodes))


def score(key, chunk, member_id):
    return mix64(mix64(mix64(DOMAIN_OWNER ^ key) ^ chunk) ^ member_id)


def ranking(key, chunk, ids):
    """Positions in ids by score, highest first; the lower first on a tie."""
    return sorted(range(len(ids)), key=lambda k: (-score(key, chunk, ids[k]), k))


def owner(key, chunk, ids):
    return ranking(key, chunk, ids)[0]


def balanced_owners(key, counts, ids):
    """Each chunk's owner: rendezvous hashing with loads bounded in samples."""
    nodes = len(ids)
    limit = -(-17 * sum(counts) // (16 * nodes))  # ceiling division
    load = [0] * nodes
    owners = []
    for c, n in enumerate(counts):
        fits = [k for k in ranking(key, c, ids) if load[k] + n <= limit]
        k = fits[0] if fits else min(range(nodes), key=lambda k: (load[k], k))
        owners.append(k)
        load[k] += n
    return owners


def home(rank, world, nodes):
    return rank * nodes // world


def assign(ids, owners, shares, nodes):
    """Which samples of a global batch each rank takes, and how many moved."""
    homes = [home(r, len(shares), nodes) for r in range(len(shares))]
    room = [0] * nodes
    for r, share in enumerate(shares):
        room[homes[r]] += share
    held = [[] for _ in range(nodes)]  # batch positions each node will serve
    queued = [[] for _ in range(nodes)]  # its own samples it has no room for
    for pos, k in enumerate(owners):
        if len(held[k]) < room[k]:
            held[k].append(pos)
        else:
            queued[k].append(pos)
    moved = 0
    while any(queued):
        giver = max(range(nodes), key=lambda k: (len(queued[k]), -k))
        taker = max(range(nodes), key=lambda k: (room[k] - len(held[k]), -k))
        t = min(len(queued[giver]), room[taker] - len(held[taker]))
        held[taker].extend(queued[giver][:t])
        queued[giver] = queued[giver][t:]
        moved += t
    ranks, used = [], [0] * nodes
    for r, share in enumerate(shares):
        k = homes[r]
        mine = sorted(held[k])[used[k]:used[k] + share]
        used[k] += share
        ranks.append([ids[pos] for pos in mine])
    return ranks, moved


def cluster_batches(index_id, ids, counts, seed, epoch, window,
                    batch_size, world, drop_last, locality):
    """Every batch of a job on a cluster of len(ids) >= 2 members:
    [M][r] -> sample IDs."""
    nodes = len(ids)
    owners = balanced_owners(index_key(index_id), counts, ids)
    order, _ = epoch_order(counts, seed, epoch, window)
    owner_of_sample = {}
    first = 0
    for c, k in enumerate(counts):
        for i in range(first, first + k):
            owner_of_sample[i] = owners[c]
        first += k
    batches = []
    for m in range(num_batches(len(order), batch_size, world, drop_last)):
        cut = [batch_range(len(order), m, batch_size, world, r, drop_last)
               for r in range(world)]
        if not locality:
            batches.append([order[s:e] for s, e in cut])
            continue
        ids = order[cut[0][0]:cut[-1][1]]
        ranks, _ = assign(ids, [owner_of_sample[i] for i in ids],
                          [e - s for s, e in cut], nodes)
        batches.append(ranks)
    return batches


# ---- mixtures (section 11) ----

DOMAIN_MIX_SLOTS = 0x6272616E646D7873  # "brandmxs"


def int_weights(texts):
    """Decimal weights as written ("0.7") to integers in the same ratios,
    divided by their greatest common divisor."""
    decimals = max(len(t.partition(".")[2]) for t in texts)
    scaled = [Fraction(t) * 10**decimals for t in texts]
    assert all(x.denominator == 1 and x > 0 for x in scaled)
    g = math.gcd(*(x.numerator for x in scaled))
    return [x.numerator // g for x in scaled]


def pd2_subtask(w, j):
    """Release, pseudo-deadline, b-bit and group deadline of subtask j
    (from 1) of a Pfair task of weight w, 0 < w < 1."""
    release = math.floor((j - 1) / w)
    deadline = math.ceil(j / w)
    bbit = deadline != j / w
    group = 0
    if w >= Fraction(1, 2):
        group = math.ceil(math.ceil(deadline * (1 - w)) / (1 - w))
    return release, deadline, bbit, group


def locate(q, pass_len):
    """Pass and index of stream position q of a component whose pass p
    holds pass_len(p) positions: the pass whose earlier passes hold at
    most q positions, and q less those."""
    p = 0
    while q >= pass_len(p):
        q -= pass_len(p)
        p += 1
    return p, q


class Mixture:
    """Block counts, slots and draws of a mixture of datasets. sizes[i] is
    the length of each of component i's passes, or, when pass_lens is
    given, pass_lens[i] a function of p giving pass p's length (None for
    passes of sizes[i]), sizes[i] its pass 0's."""

    def __init__(self, weights, sizes, block, samples=0, pass_lens=None):
        g = math.gcd(*weights)
        self.weights = [a // g for a in weights]
        self.sizes = list(sizes)
        self.pass_lens = pass_lens or [None] * len(sizes)
        self.block = block
        share = [Fraction(block * a, sum(self.weights)) for a in self.weights]
        self.base = [math.floor(x) for x in share]
        # Each block hands out the fractional parts of the shares as whole
        # units: a Pfair task of that weight per component.
        self.unit = [x - math.floor(x) for x in share]
        assert sum(self.unit).denominator == 1
        self.extra = int(sum(self.unit))
        self.period = math.lcm(*(u.denominator for u in self.unit))
        length = samples or sum(sizes)
        self.length = max(1, -(-length // block)) * block
        self.blocks = self.length // block
        # A period too long to run the rule over (Go's MaxMixWork, 2^22,
        # blocks x components): each epoch restarts the rule at its block
        # 0 instead of running it on the global block index.
        self.restart = self.period * len(weights) > 2**22
        # period_cumulative[t][i]: component i's samples in blocks [0, t) of
        # a period, the rule run from the period's start as far as asked.
        self.period_cumulative = [[0] * len(weights)]
        self._done = [0] * len(weights)  # subtasks run this period so far
        # cumulative[b][i]: component i's samples in blocks [0, b) of epoch 0.
        self.cumulative = self.epoch_cumulative(0)

    def _chosen(self, t, done):
        """The components whose next subtask PD2 runs at slot t."""
        keys = []
        for i, w in enumerate(self.unit):
            if w:
                release, deadline, bbit, group = pd2_subtask(w, done[i] + 1)
                keys.append((release > t, deadline, not bbit, -group, i))
        return [key[-1] for key in sorted(keys)[:self.extra]]

    def global_cumulative(self, g):
        """C(g): each component's samples in global blocks [0, g), the rule
        run on the global block index: whole periods, then the rule from
        the period's start."""
        q, t = divmod(g, self.period)
        while len(self.period_cumulative) <= (self.period if q else t):
            u = len(self.period_cumulative) - 1
            counts = list(self.base)
            for i in self._chosen(u, self._done):
                counts[i] += 1
                self._done[i] += 1
            self.period_cumulative.append([c + n for c, n in zip(self.period_cumulative[-1], counts)])
        whole = self.period_cumulative[self.period] if q else [0] * len(self.weights)
        return [q * w + c for w, c in zip(whole, self.period_cumulative[t])]

    def _first_block(self, epoch):
        """The global block the rule counts epoch's block 0 as."""
        return 0 if self.restart else epoch * self.blocks

    def epoch_cumulative(self, epoch):
        """C(b) for b = 0..L/K of epoch epoch: its blocks are global blocks
        epoch*L/K + b, counted from the epoch's first."""
        g0 = self._first_block(epoch)
        start = self.global_cumulative(g0)
        return [[c - s for c, s in zip(self.global_cumulative(g0 + b), start)]
                for b in range(self.blocks + 1)]

    def start(self, epoch, i):
        """Component i's stream position at the start of epoch epoch."""
        if self.restart:
            return epoch * self.global_cumulative(self.blocks)[i]
        return self.global_cumulative(epoch * self.blocks)[i]

    def epoch_samples(self, i, epoch=0):
        return self.epoch_cumulative(epoch)[-1][i]

    def block_counts(self, b, epoch=0):
        g = self._first_block(epoch) + b
        return [hi - lo for lo, hi in zip(self.global_cumulative(g), self.global_cumulative(g + 1))]

    def slots(self, seed, epoch, b):
        slots = []
        for i, c in enumerate(self.block_counts(b, epoch)):
            slots += [i] * c
        fisher_yates(PCG(*stream_seeds(seed, epoch, DOMAIN_MIX_SLOTS, b)), slots)
        return slots

    def draws(self, seed, epoch, start, end):
        """(component, pass, index) for epoch positions [start, end)."""
        out = []
        cum = self.epoch_cumulative(epoch)
        first = [self.start(epoch, i) for i in range(len(self.weights))]
        for b in range(start // self.block, -(-end // self.block)):
            # Component i's stream position: its samples in the global
            # blocks before this one.
            read = [f + c for f, c in zip(first, cum[b])]
            for s, i in enumerate(self.slots(seed, epoch, b)):
                if start <= b * self.block + s < end:
                    if self.pass_lens[i] is None:
                        out.append((i, read[i] // self.sizes[i], read[i] % self.sizes[i]))
                    else:
                        out.append((i, *locate(read[i], self.pass_lens[i])))
                read[i] += 1
        return out


def component_window(weights, i, window):
    """Component i's shuffle window: the job's window split by weight,
    ceil(window * a_i / A), at least 1."""
    return max(1, -(-max(window, 1) * weights[i] // sum(weights)))


def mixture_samples(counts, weights, seed, window, draws, samples=None):
    """The sample ID each draw serves: position index of epoch pass of its
    component's dataset (counts[i] its samples per chunk), section 5's order
    in windows of component_window chunks; -1 for the components whose
    samples[i] is False (passes that are not a dataset's epoch order)."""
    g = math.gcd(*weights)
    weights = [a // g for a in weights]
    orders, out = {}, []
    for i, p, index in draws:
        if samples is not None and not samples[i]:
            out.append(-1)
            continue
        if (i, p) not in orders:
            orders[i, p] = epoch_order(counts[i], seed, p, component_window(weights, i, window))[0]
        out.append(orders[i, p][index])
    return out


# ---- schedules (section 11.9) ----


def ramp_counts(prev, nxt, ramp_from, ramp_end, s0, n, block):
    """C(t) for t = 0..n over a ramp's segment of n blocks from global step
    s0: each block's ideal counts K*w_i(s) handed out with the deficit
    carried from the blocks before it."""
    k = len(prev)
    cumulative, target = [[0] * k], [Fraction(0)] * k
    for t in range(n):
        lam = Fraction(s0 + t - ramp_from, ramp_end - ramp_from)
        target = [target[i] + block * ((1 - lam) * Fraction(prev[i], sum(prev))
                                       + lam * Fraction(nxt[i], sum(nxt))) for i in range(k)]
        want = [target[i] - cumulative[-1][i] for i in range(k)]
        counts = [max(0, math.floor(x)) for x in want]
        left = block - sum(counts)
        rem = [want[i] - counts[i] for i in range(k)]
        if left > 0:
            for i in sorted(range(k), key=lambda i: (-rem[i], i))[:left]:
                counts[i] += 1
        order = sorted((i for i in range(k) if counts[i] > 0), key=lambda i: (rem[i], -i))
        j = 0
        while left < 0:
            i = order[j % len(order)]
            if counts[i] > 0:
                counts[i] -= 1
                left += 1
            j += 1
        cumulative.append([c + x for c, x in zip(cumulative[-1], counts)])
    return cumulative


class Schedule:
    """A mixture whose weights change by global step. phases is a list of
    (step, end, weights), end 0 for a constant phase; sizes[i] the length
    of each of component i's passes."""

    def __init__(self, phases, sizes, block, samples=0):
        self.sizes, self.block = list(sizes), block
        self.first = Mixture(phases[0][2], sizes, block, samples)
        self.length = self.first.length
        self.blocks = self.length // block
        # pieces: (from, to, weights, previous weights or None)
        self.pieces = []
        for n, (step, end, weights) in enumerate(phases):
            to = phases[n + 1][0] if n + 1 < len(phases) else math.inf
            if end > step:
                self.pieces.append((step, end, weights, phases[n - 1][2]))
                step = end
            if step < to:
                self.pieces.append((step, to, weights, None))
        self._counts = {}  # piece -> its Mixture, or a ramp's cumulative

    def piece_cumulative(self, n, x):
        """Each component's samples in the first x steps of piece n, its
        rule run on the piece's steps from its first: a constant piece's
        mixture on its global block index, a ramp's carried deficit from
        the ramp's first step."""
        lo, hi, weights, prev = self.pieces[n]
        if n not in self._counts:
            if prev is None:
                self._counts[n] = Mixture(weights, self.sizes, self.block)
            else:
                self._counts[n] = ramp_counts(prev, weights, lo, hi, lo, hi - lo, self.block)
        if prev is None:
            return self._counts[n].global_cumulative(x)
        return self._counts[n][x]

    def epoch_cumulative(self, e):
        """C(b) for b = 0..L/K of epoch e: each piece's counts over its
        steps in the epoch, one piece after another."""
        g0, g1 = e * self.blocks, (e + 1) * self.blocks
        out = [[0] * len(self.sizes)]
        for n, (lo, hi, _, _) in enumerate(self.pieces):
            lo, hi = max(lo, g0), min(hi, g1)
            if lo >= hi:
                continue
            first = self.pieces[n][0]
            at = self.piece_cumulative(n, lo - first)
            base = out[-1]
            out += [[b + c - a for b, c, a in zip(base, self.piece_cumulative(n, x - first), at)]
                    for x in range(lo + 1, hi + 1)]
        return out

    def start(self, e, i):
        """Component i's stream position at the start of epoch e: each
        piece's count in its steps before the epoch's first."""
        g0 = e * self.blocks
        return sum(self.piece_cumulative(n, min(hi, g0) - lo)[i]
                   for n, (lo, hi, _, _) in enumerate(self.pieces) if lo < g0)

    def draws(self, seed, e, start, end):
        """(component, pass, index) for epoch positions [start, end) of
        epoch e."""
        cum = self.epoch_cumulative(e)
        first = [self.start(e, i) for i in range(len(self.sizes))]
        out = []
        for b in range(start // self.block, -(-end // self.block)):
            counts = [hi - lo for lo, hi in zip(cum[b], cum[b + 1])]
            slots = []
            for i, c in enumerate(counts):
                slots += [i] * c
            fisher_yates(PCG(*stream_seeds(seed, e, DOMAIN_MIX_SLOTS, b)), slots)
            read = [f + c for f, c in zip(first, cum[b])]
            for s, i in enumerate(slots):
                if start <= b * self.block + s < end:
                    out.append((i, read[i] // self.sizes[i], read[i] % self.sizes[i]))
                read[i] += 1
        return out


# ---- test driver ----

if __name__ == "__main__":
    import json
    import sys

    with open(sys.argv[1]) as f:
        inputs = json.load(f)

    # Each list of inputs present in the file gets a list of outputs.
    out = {}
    for case in inputs.get("cases", []):
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
        out.setdefault("cases", []).append({
            "name": case["name"],
            "chunk_order": chunk_order(counts, case["seed"], case["epoch"]),
            "window_starts": starts,
            "order": order,
            "num_batches": nb,
            "batches": batches,
        })
    for st in inputs.get("streams", []):
        s1, s2 = stream_seeds(st["seed"], st["epoch"], st["domain"], st["index"])
        rng = PCG(s1, s2)
        out.setdefault("streams", []).append({
            "seed1": s1,
            "seed2": s2,
            "outputs": [rng.uint64() for _ in st["outputs"]],
        })
    for bd in inputs.get("bounded", []):
        rng = PCG(bd["seed1"], bd["seed2"])
        out.setdefault("bounded", []).append({"values": [bounded(rng, n) for n in bd["n"]]})
    for ik in inputs.get("index_keys", []):
        out.setdefault("index_keys", []).append({"id": ik["id"], "key": index_key(ik["id"])})
    for rk in inputs.get("rankings", []):
        key, c, ids = index_key(rk["index_id"]), rk["chunk"], positions(rk["nodes"])
        out.setdefault("rankings", []).append({
            "scores": [score(key, c, k) for k in ids],
            "owner": owner(key, c, ids),
            "ranking": ranking(key, c, ids),
        })
    for bl in inputs.get("balanced", []):
        out.setdefault("balanced", []).append({
            "owners": balanced_owners(index_key(bl["index_id"]), bl["counts"], positions(bl["nodes"])),
        })
    for hm in inputs.get("homes", []):
        out.setdefault("homes", []).append({
            "homes": [home(r, hm["world"], hm["nodes"]) for r in range(hm["world"])],
        })
    for a in inputs.get("assign", []):
        ranks, moved = assign(a["ids"], a["owner"], a["share"], a["nodes"])
        out.setdefault("assign", []).append({"ranks": ranks, "moved": moved})
    for job in inputs.get("jobs", []):
        ids = positions(job["nodes"])
        if job.get("members"):
            ids = membership(job["members"])[2]
        out.setdefault("jobs", []).append({
            "name": job["name"],
            "owners": balanced_owners(index_key(job["index_id"]), job["counts"], ids),
            "chunk_order": chunk_order(job["counts"], job["seed"], job["epoch"]),
            "batches": cluster_batches(
                job["index_id"], ids, job["counts"], job["seed"], job["epoch"],
                job["window"], job["batch_size"], job["world"], job["drop_last"],
                job["locality"]),
        })
    for ms in inputs.get("memberships", []):
        members, version, ids = membership(ms["given"])
        out.setdefault("memberships", []).append({"members": members, "version": version, "ids": ids})
    for mx in inputs.get("mixtures", []):
        weights = mx["weights"]
        if mx["mix"]:
            weights = int_weights([c.rpartition(":")[2] for c in mx["mix"].split(",")])
        # A component's pass_lengths, when not empty, are cycled through:
        # pass p holds lens[p % len(lens)] positions.
        cycles = mx.get("pass_lengths") or [[] for _ in mx["counts"]]
        pass_lens = [(lambda p, lens=lens: lens[p % len(lens)]) if lens else None for lens in cycles]
        sizes = [lens[0] if lens else sum(c) for lens, c in zip(cycles, mx["counts"])]
        m = Mixture(weights, sizes, mx["block"], mx["samples"], pass_lens)
        draws = m.draws(mx["seed"], mx["epoch"], mx["start"], mx["end"])
        out.setdefault("mixtures", []).append({
            "name": mx["name"],
            "weights": weights,
            "reduced": m.weights,
            "num_samples": m.length,
            "period": m.period,
            "epoch_samples": [m.epoch_samples(i, mx["epoch"]) for i in range(len(sizes))],
            "cumulative": [m.epoch_cumulative(mx["epoch"])[b] for b in mx["blocks"]],
            "block_counts": [m.block_counts(b, mx["epoch"]) for b in mx["blocks"]],
            "slots": [m.slots(mx["seed"], mx["epoch"], b) for b in mx["blocks"]],
            "draws": [list(d) for d in draws],
            "sample_ids": mixture_samples(mx["counts"], weights, mx["seed"], mx["window"], draws,
                                          [not lens for lens in cycles]),
        })
    for sc in inputs.get("schedules", []):
        phases = [(p["step"], p["end"], p["weights"]) for p in sc["phases"]]
        sizes = [sum(c) for c in sc["counts"]]
        sched = Schedule(phases, sizes, sc["block"], sc["samples"])
        epochs = []
        for e in sc["epochs"]:
            cum = sched.epoch_cumulative(e)
            draws = sched.draws(sc["seed"], e, 0, sched.length)
            epochs.append({
                "epoch": e,
                "epoch_samples": cum[-1],
                "cumulative": cum,
                "draws": [list(d) for d in draws],
                "sample_ids": mixture_samples(sc["counts"], phases[0][2], sc["seed"], sc["window"], draws),
            })
        out.setdefault("schedules", []).append({"name": sc["name"], "num_samples": sched.length, "epochs": epochs})
    json.dump(out, sys.stdout)
