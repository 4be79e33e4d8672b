#!/usr/bin/env python3
"""Reference implementation of Brand's rank balancing (docs/shuffle.md §13),
written from that section, independent of the Go code.

The part between the "algorithm" and "test driver" markers is reproduced
verbatim in docs/shuffle.md (a Go test checks that). It scans every rank
and every pair where Go keeps a heap and binary searches.

Usage: reference.py INPUTS.json, where INPUTS.json holds
{"cases": [{"name", "costs", "shares"}, ...]}; prints each case's
"ranks", "costs" and "plain_costs" as JSON.
"""

import json
import sys

# ---- algorithm ----

MAX_SWAPS = 256


def plain(costs, shares):
    """The plain cut: rank r takes the next shares[r] positions."""
    ranks, at = [], 0
    for s in shares:
        ranks.append(list(range(at, at + s)))
        at += s
    return ranks, [sum(costs[i] for i in r) for r in ranks]


def assign(costs, shares):
    """Each rank's positions of a global batch (ascending) and its cost:
    longest first to the cheapest rank with room, then improving swaps
    with the costliest rank."""
    world = len(shares)
    ranks, load = [[] for _ in range(world)], [0] * world
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        r = min((r for r in range(world) if len(ranks[r]) < shares[r]),
                key=lambda r: (load[r], r))
        ranks[r].append(i)
        load[r] += costs[i]
    for _ in range(MAX_SWAPS):
        hi = min(range(world), key=lambda r: (-load[r], r))
        swapped = False
        for lo in sorted((r for r in range(world) if load[r] < load[hi]),
                         key=lambda r: (load[r], r)):
            gap = load[hi] - load[lo]
            pairs = [(abs(2 * (costs[i] - costs[j]) - gap), i, j)
                     for i in ranks[hi] for j in ranks[lo]
                     if 0 < costs[i] - costs[j] < gap]
            if not pairs:
                continue
            _, i, j = min(pairs)
            ranks[hi][ranks[hi].index(i)] = j
            ranks[lo][ranks[lo].index(j)] = i
            load[hi] += costs[j] - costs[i]
            load[lo] += costs[i] - costs[j]
            swapped = True
            break
        if not swapped:
            break
    return [sorted(r) for r in ranks], load


def attention_cost(pieces):
    """A packed sequence's attention cost: the sum of the squares of its
    pieces' lengths (its pad costs nothing)."""
    return sum(n * n for n in pieces)

# ---- test driver ----


def main():
    with open(sys.argv[1]) as f:
        inputs = json.load(f)
    out = {"cases": []}
    for case in inputs["cases"]:
        costs = case.get("costs")
        if case.get("pieces") is not None:
            costs = [attention_cost(p) for p in case["pieces"]]
        ranks, load = assign(costs, case["shares"])
        out["cases"].append({"name": case["name"], "ranks": ranks, "costs": load,
                             "plain_costs": plain(costs, case["shares"])[1]})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
