"""A post-training run's prompt sampler as it is usually written: in the
trainer's process, in Python, standard library only.

brand-bench tasks runs this beside a task job (docs/tasks.md) through a
gateway, and compares the CPU each spends per 1,000 prompts leased. It
is the same policy as internal/task's plan, minus what needs a log or a
clock (leases' expiry, revisits of retired prompts, other nodes):

- passes: each pass serves every prompt that is not retired until it
  counts or is rested; within a pass prompts are drawn without
  replacement, each with its weight when it entered the pass's pool, from
  a sum tree (a Fenwick tree, as prioritised replay buffers keep one) of
  integer weights (a weight of 1 is 2^32, at least 1);
- curriculum: weight 1 for a prompt never answered or whose mean pass rate
  over its last `history` answers is in the band, exp(-d / temperature)
  (at least 1e-6) at distance d outside; a solve (every answer passes)
  adds one to its solves, and `retire` solves retire it (0: never);
- dynamic sampling: an answer whose scores all agree does not count; the
  prompt goes back into its pass, at most `redraws` times, then is rested;
- the window: at most (trainer + ahead) x step prompts leased beyond
  those counted;
- steps: counted prompts in the order they are answered, `step` a step.

G simulated generators each lease K prompts in turn; then each lease is
answered, in order, with N scores of the toy model at the trainer's step
(the model version); then the trainer consumes every full step. The toy
model is brand-bench's (cmd/brand-bench/internal/bench/tasks.go): the
same hashes, the same logistic.

It prints one JSON object: the sampling loop's seconds and CPU seconds
(getrusage, user + system), and what the plan did; building the state
over the prompts is timed apart (setup_s, setup_cpu_s).
"""

import argparse
import json
import math
import platform
import random
import resource
import sys
import time

MASK = (1 << 64) - 1
TOY_DIFFICULTY = 0x746F796469666669  # "toydiffi"
TOY_SCORE = 0x746F7973636F7265  # "toyscore"
QUANTUM = 1 << 32
MIN_WEIGHT = 1e-6

IN_POOL, IN_FRONT, IN_NEXT, IN_LEASE, IN_RETIRED = range(5)


def mix64(z):
    """SplitMix64's finaliser (internal/seeded.Mix64)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def unit(x):
    return (x >> 11) / float(1 << 53)


def toy_pass(q, v, steps):
    d = unit(mix64(q ^ TOY_DIFFICULTY))
    skill = 0.2 + 0.6 * v / max(steps, 1)
    return 1.0 / (1.0 + math.exp(-4.0 * (skill - d)))


def toy_scores(q, v, steps, lease, n):
    p = toy_pass(q, v, steps)
    h = mix64(mix64(q ^ TOY_SCORE) ^ lease)
    return [1.0 if unit(mix64(h ^ j)) < p else 0.0 for j in range(n)]


class SumTree:
    """A Fenwick tree of integer weights: draw by prefix sum, set a weight."""

    def __init__(self, weights):
        n = len(weights)
        t = [0] * (n + 1)
        for i, v in enumerate(weights):
            t[i + 1] += v
            j = (i + 1) + ((i + 1) & -(i + 1))
            if j <= n:
                t[j] += t[i + 1]
        self.t, self.w, self.sum = t, list(weights), sum(weights)
        self.top = 1 << (n.bit_length() - 1) if n else 0

    def set(self, i, v):
        d = v - self.w[i]
        if d == 0:
            return
        self.w[i] = v
        self.sum += d
        t, n, j = self.t, len(self.t), i + 1
        while j < n:
            t[j] += d
            j += j & -j

    def find(self, u):
        t, n, pos, step = self.t, len(self.t), 0, self.top
        while step:
            k = pos + step
            if k < n and t[k] <= u:
                pos = k
                u -= t[k]
            step >>= 1
        return pos


class Sampler:
    def __init__(self, a):
        n = a.prompts
        self.a = a
        self.rng = random.Random(a.seed)
        self.lo, self.hi = a.band
        self.served = [0] * n
        self.redraws = [0] * n
        self.solves = [0] * n
        self.where = bytearray(n)  # IN_POOL
        self.hist = [0.0] * (n * a.history)
        self.hn = bytearray(n)
        self.hat = bytearray(n)
        self.tree = SumTree([self.fixed(1.0)] * n)
        self.cur = 0
        self.front = []
        self.fhead = 0
        self.next = []
        self.retired = 0
        self.leased = 0
        self.counted = 0
        self.trainer = 0
        self.leases = 0
        self.stats = dict(rows=0, redrawn=0, rested=0, refused=0, prompts=0)

    @staticmethod
    def fixed(w):
        return max(1, int(w * QUANTUM))

    def weight(self, q):
        if self.a.policy == "uniform":
            return 1.0
        k, hn = self.a.history, self.hn[q]
        if hn == 0:
            return 1.0
        if self.a.policy == "importance":
            last = self.hist[q * k + (self.hat[q] - 1) % k]
            return max(1.0 - last, 0.1)
        r = sum(self.hist[q * k:q * k + hn]) / hn
        if r < self.lo:
            d = self.lo - r
        elif r > self.hi:
            d = r - self.hi
        else:
            return 1.0
        return max(math.exp(-d / self.a.temperature), MIN_WEIGHT)

    def window(self):
        a = self.a
        return max(0, (self.trainer + a.ahead) * a.step - self.counted - self.leased)

    def pool_add(self, q):
        self.where[q] = IN_POOL
        self.tree.set(q, self.fixed(self.weight(q)))

    def advance(self):
        if not self.next:
            return False
        self.cur += 1
        for q in self.next:
            if self.where[q] == IN_NEXT and self.served[q] == self.cur:
                self.pool_add(q)
        self.next = []
        return self.tree.sum > 0

    def lease(self, k):
        """Up to k prompts, or [] when the window or the pass has none."""
        k = min(k, self.window())
        out = []
        front = self.front
        while len(out) < k and self.fhead < len(front):
            out.append(front[self.fhead])
            self.fhead += 1
        if self.fhead > 1024 and self.fhead * 2 > len(front):
            del front[:self.fhead]
            self.fhead = 0
        tree, rnd = self.tree, self.rng.random
        while len(out) < k:
            if tree.sum == 0:
                if not self.advance():
                    break
                continue
            q = tree.find(int(rnd() * tree.sum))
            tree.set(q, 0)
            out.append(q)
        if not out:
            self.stats["refused"] += 1
            return 0, out
        for q in out:
            self.where[q] = IN_LEASE
        self.leased += len(out)
        self.leases += 1
        self.stats["prompts"] += len(out)
        return self.leases, out

    def answer(self, q, scores):
        a = self.a
        self.leased -= 1
        self.stats["rows"] += 1
        passes = sum(1 for s in scores if s >= a.pass_score)
        n = len(scores)
        flat = all(s == scores[0] for s in scores)
        k = a.history
        hat = self.hat[q]
        self.hist[q * k + hat] = passes / n
        self.hat[q] = (hat + 1) % k
        if self.hn[q] < k:
            self.hn[q] += 1
        if passes == n:
            self.solves[q] += 1
        if not (a.redraws > 0 and flat):
            self.counted += 1
            self.served[q] += 1
            self.redraws[q] = 0
        elif self.redraws[q] < a.redraws:
            self.redraws[q] += 1
            self.stats["redrawn"] += 1
        else:
            self.served[q] += 1
            self.redraws[q] = 0
            self.stats["rested"] += 1
        if a.policy == "curriculum" and a.retire > 0 and self.solves[q] >= a.retire:
            self.where[q] = IN_RETIRED
            self.retired += 1
            return
        s = self.served[q]
        if s < self.cur:
            self.where[q] = IN_FRONT
            self.front.append(q)
        elif s == self.cur:
            self.pool_add(q)
        else:
            self.where[q] = IN_NEXT
            self.next.append(q)


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=1_000_000)
    p.add_argument("--step", type=int, default=256)
    p.add_argument("--ahead", type=int, default=8)
    p.add_argument("--policy", default="curriculum", choices=["uniform", "curriculum", "importance"])
    p.add_argument("--redraws", type=int, default=2)
    p.add_argument("--retire", type=int, default=3)
    p.add_argument("--history", type=int, default=4)
    p.add_argument("--band", type=float, nargs=2, default=[0.2, 0.8])
    p.add_argument("--temperature", type=float, default=0.1)
    p.add_argument("--pass-score", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--generators", type=int, default=8)
    p.add_argument("--lease", type=int, default=64)
    p.add_argument("--answers", type=int, default=8)
    p.add_argument("--steps", type=int, default=1000)
    a = p.parse_args()

    t0, c0 = time.perf_counter(), cpu()
    s = Sampler(a)
    t1, c1 = time.perf_counter(), cpu()
    while s.counted // a.step < a.steps:
        leases = [s.lease(a.lease) for _ in range(a.generators)]
        version = s.trainer
        if not any(qs for _, qs in leases):
            raise SystemExit("tasks_sampler: nothing to lease: every prompt is retired or leased")
        for num, qs in leases:
            for q in qs:
                s.answer(q, toy_scores(q, version, a.steps, num, a.answers))
        s.trainer = s.counted // a.step  # the trainer consumes every full step
    t2, c2 = time.perf_counter(), cpu()
    st = s.stats
    json.dump({
        "python": platform.python_version(),
        "setup_s": t1 - t0, "setup_cpu_s": c1 - c0,
        "seconds": t2 - t1, "cpu_s": c2 - c1,
        "leases": s.leases, "prompts_leased": st["prompts"], "feedback_rows": st["rows"],
        "steps": s.counted // a.step, "counted": s.counted, "redrawn": st["redrawn"], "rested": st["rested"],
        "retired": s.retired, "refused": st["refused"],
    }, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
