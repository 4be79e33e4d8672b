#!/usr/bin/env python3
"""Reference implementation of Brand's packing, independent of the Go code.

The part between the "algorithm" and "test driver" markers is reproduced
verbatim in docs/shuffle.md section 12 (a Go test checks that), and is the
executable form of the specification there. It builds on the shuffle's
reference, shuffle/testdata/reference.py (section 10 of the same
document): PCG, stream_seeds, fisher_yates and epoch_order. The driver
reads a JSON file of inputs (pack's golden vectors, or random cases a Go
test writes) and prints, as JSON, what this implementation computes for
them; the Go tests of pack compare that with Go.
"""

import importlib.util
import json
import os
import sys

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "..", "..", "shuffle", "testdata", "reference.py")
_spec = importlib.util.spec_from_file_location("shuffle_reference", _path)
_shuffle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shuffle)
PCG, stream_seeds, fisher_yates = _shuffle.PCG, _shuffle.stream_seeds, _shuffle.fisher_yates
epoch_order, num_batches, batch_range = _shuffle.epoch_order, _shuffle.num_batches, _shuffle.batch_range

# ---- algorithm ----

DOMAIN_PACK = 0x6272616E6470616B  # "brandpak"


def bestfit_window(docs, tokens, seq, seed, epoch, w):
    """Window w's sequences in epoch order, each (pieces, pad), a piece
    (doc, offset, length, eos): docs are the window's documents in epoch
    order, tokens[d] document d's token count."""
    whole, rest = [], []
    for pos, d in enumerate(docs):
        n = tokens[d]
        for k in range(n // seq):
            whole.append(([(d, k * seq, seq, False)], 0))
        if n % seq:
            rest.append((n % seq, pos, d, n - n % seq))
    # Best fit decreasing: longest first, ties by position in the window;
    # each into the bin with the least room that fits it, the first
    # opened among equals, else into a new bin.
    rest.sort(key=lambda r: (-r[0], r[1]))
    bins, room = [], []
    for length, _, d, offset in rest:
        fits = [b for b in range(len(bins)) if room[b] >= length]
        if fits:
            b = min(fits, key=lambda b: (room[b], b))
        else:
            b = len(bins)
            bins.append([])
            room.append(seq)
        bins[b].append((d, offset, length, False))
        room[b] -= length
    seqs = whole + list(zip(bins, room))
    fisher_yates(PCG(*stream_seeds(seed, epoch, DOMAIN_PACK, w)), seqs)
    return seqs


def concat(windows, tokens, seq):
    """The epoch's sequences, each (pieces, pad): every document followed
    by one EOS, which is its token number tokens[d], cut every seq
    tokens; the last sequence padded."""
    seqs, pieces, room = [], [], seq
    for docs in windows:
        for d in docs:
            end, offset = tokens[d] + 1, 0
            while offset < end:
                n = min(room, end - offset)
                pieces.append((d, offset, n, offset + n == end))
                offset += n
                room -= n
                if room == 0:
                    seqs.append((pieces, 0))
                    pieces, room = [], seq
    if pieces:
        seqs.append((pieces, room))
    return seqs


def pack_epoch(windows, tokens, seq, mode, seed, epoch):
    """Every sequence of the epoch, and each window's first sequence (the
    first whose first token is one of the window's)."""
    if mode == "bestfit":
        seqs, starts = [], [0]
        for w, docs in enumerate(windows):
            seqs += bestfit_window(docs, tokens, seq, seed, epoch, w)
            starts.append(len(seqs))
        return seqs, starts
    starts, at = [0], 0
    for docs in windows:
        at += sum(tokens[d] + 1 for d in docs)
        starts.append(-(-at // seq))
    return concat(windows, tokens, seq), starts


def positions(sequence):
    """position_ids: 0, 1, ... in each piece, then 0 ... pad-1."""
    pieces, pad = sequence
    out = []
    for _, _, n, _ in pieces:
        out += range(n)
    return out + list(range(pad))


# ---- test driver ----


def main():
    with open(sys.argv[1]) as f:
        inputs = json.load(f)
    out = {"cases": []}
    for case in inputs.get("cases", []):
        tokens, seq = case["doc_tokens"], case["seq"]
        if case.get("windows") is not None:
            windows = case["windows"]
        else:
            order, starts = epoch_order(case.get("counts", []), case["seed"], case["epoch"], case["window"])
            windows = [order[starts[w]:starts[w + 1]] for w in range(len(starts) - 1)]
        seqs, starts = pack_epoch(windows, tokens, seq, case["mode"], case["seed"], case["epoch"])
        split = 0
        if case["mode"] == "bestfit":
            split = sum(1 for docs in windows for d in docs if tokens[d] > seq)
        else:
            at = 0
            for docs in windows:
                for d in docs:
                    split += at // seq != (at + tokens[d]) // seq
                    at += tokens[d] + 1
        b, world, drop, offset = case["batch_size"], case["world"], case["drop_last"], case["offset"]
        left = len(seqs) - offset
        batches = []
        for m in range(num_batches(left, b, world, drop)):
            cut = [batch_range(left, m, b, world, r, drop) for r in range(world)]
            batches.append([[s + offset, e + offset] for s, e in cut])
        out["cases"].append({
            "name": case["name"],
            "window_starts": starts,
            "num_sequences": len(seqs),
            "tokens": sum(n for pieces, _ in seqs for _, _, n, _ in pieces),
            "split": split,
            "sequences": [[pad] + [x for p in pieces for x in (p[0], p[1], p[2], int(p[3]))]
                          for pieces, pad in seqs],
            "positions": [positions(s) for s in seqs[:case.get("positions_of", 0)]],
            "batches": batches,
        })
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
