"""The trainer's side of brand-bench tokens: Python loaders of (B, seq)
int32 token tensors, each reporting its own CPU time (time.process_time:
every thread of this process) per token it hands the training loop.

  dataset  brand.torch.BrandDataset(seq=) iterated in this process
           (num_workers=0): its steps as they come.
  brand    brand.Client reading a token job (seq=) from the gateway; each
           batch's input_ids.npy and position_ids.npy members stacked into
           (B, seq) int32 tensors: what BrandDataset(seq=) will cost a
           trainer, before that class exists.
  views    the same batches' bodies (bytes) viewed in place as (B, seq)
           int32 arrays by this script (the members' layout is fixed by
           seq), no tar decoding and no copy.
  memmap   nanoGPT's get_batch: a numpy memmap of the token file (opened
           again every batch, as nanoGPT does), B random offsets,
           torch.stack of int64 slices, then int32. No documents, no
           position_ids: the simplest loader users write.
  pack     the same file's documents (from the .idx), shuffled, packed
           trainer-side: a buffer of documents, a document of seq or more
           cut into whole sequences and a remainder, the rest greedy
           best-fit (longest first, into the open sequence with least room
           that fits), input_ids and position_ids built with numpy, (B, seq)
           int32 tensors.

Prints one JSON object: tokens handed over, seconds, cpu_seconds, and for
pack the fill (non-pad tokens / tokens) and the documents it cut.
"""

import argparse
import bisect
import json
import sys
import time

import numpy as np
import torch

torch.set_num_threads(1)


def brand_loader(a):
    c = brand.Client(a.url, dataset=a.dataset, seed=a.seed, batch_size=a.batch_size, seq=a.seq, pack=a.pack,
                     tune_malloc=True)
    tokens = 0
    for batch in c.epoch(a.epoch):
        ids = torch.from_numpy(np.stack([np.frombuffer(s["input_ids.npy"], dtype="<i4", offset=128) for s in batch]))
        pos = torch.from_numpy(np.stack([np.frombuffer(s["position_ids.npy"], dtype="<i4", offset=128) for s in batch]))
        assert ids.shape == (len(batch), a.seq) and pos.shape == ids.shape
        tokens += ids.numel()
        if tokens >= a.tokens:
            break
    c.close()
    return {"tokens": tokens}


def dataset_loader(a):
    """brand.torch.BrandDataset(seq=) iterated in the trainer's process
    (num_workers=0): its steps, (B, seq) int32 views of each batch's
    buffer."""
    from brand.torch import BrandDataset

    ds = BrandDataset(a.url, brand.Options(job=brand.Job(dataset=a.dataset, seed=a.seed, batch_size=a.batch_size,
                                                         seq=a.seq, pack=a.pack), tune_malloc=True))
    ds.set_epoch(a.epoch)
    tokens = 0
    for step in ds:
        ids, pos = step["input_ids"], step["position_ids"]
        assert ids.dtype == torch.int32 and ids.shape[1] == a.seq and pos.shape == ids.shape
        tokens += ids.numel()
        if tokens >= a.tokens:
            break
    return {"tokens": tokens}


def views_loader(a):
    """brand.Client's raw batch bodies viewed in place: a token batch's
    members have a fixed layout (docs/http-api.md, "Token jobs"), so
    input_ids and position_ids are (B, seq) strided views of the body,
    without decoding the tar or copying: what BrandDataset(seq=) can do."""
    import brand

    c = brand.Client(a.url, dataset=a.dataset, seed=a.seed, batch_size=a.batch_size, seq=a.seq, pack=a.pack,
                     tune_malloc=True)
    member = 512 + -(-(128 + 4 * a.seq) // 512) * 512
    tokens = 0
    for m in range(int(c.epoch_info(a.epoch)["batches"])):
        body = c.batch_bytes(a.epoch, m)
        n = (len(body) - 1024) // (2 * member)
        ids = torch.from_numpy(np.ndarray((n, a.seq), "<i4", body, 640, (2 * member, 4)))
        pos = torch.from_numpy(np.ndarray((n, a.seq), "<i4", body, member + 640, (2 * member, 4)))
        assert bool((pos[:, 0] == 0).all()), "position_ids must start at 0"
        tokens += ids.numel()
        if tokens >= a.tokens:
            break
    c.close()
    return {"tokens": tokens}


def memmap_loader(a):
    n = np.memmap(a.bin, dtype=a.dtype, mode="r").shape[0]
    g = torch.Generator().manual_seed(a.seed)
    tokens = 0
    while tokens < a.tokens:
        data = np.memmap(a.bin, dtype=a.dtype, mode="r")
        ix = torch.randint(n - a.seq, (a.batch_size,), generator=g)
        x = torch.stack([torch.from_numpy(data[i:i + a.seq].astype(np.int64)) for i in ix]).to(torch.int32)
        tokens += x.numel()
    return {"tokens": tokens}


def read_idx(path):
    """Sizes and byte pointers of a Megatron .idx (one sequence a document)."""
    with open(path, "rb") as f:
        b = f.read()
    assert b[:9] == b"MMIDIDX\x00\x00"
    s = int(np.frombuffer(b, "<u8", 1, 18)[0])
    sizes = np.frombuffer(b, "<i4", s, 34)
    pointers = np.frombuffer(b, "<i8", s, 34 + 4 * s)
    return sizes, pointers


def pack_loader(a):
    itemsize = np.dtype(a.dtype).itemsize
    sizes, pointers = read_idx(a.idx)
    data = np.memmap(a.bin, dtype=a.dtype, mode="r")
    order = np.random.default_rng(a.seed).permutation(len(sizes))
    seq, pad = a.seq, a.pad
    ready = []  # sequences (lists of (start, length) pieces) not yet batched
    tokens = nonpad = cut = 0
    at = 0
    while tokens < a.tokens and at < len(order):
        buf = order[at:at + a.buffer]
        at += len(buf)
        pieces = []
        for d in buf:
            start, n = int(pointers[d]) // itemsize, int(sizes[d])
            while n >= seq:
                ready.append([(start, seq)])
                start, n = start + seq, n - seq
                cut += 1
            if n:
                pieces.append((n, start))
        pieces.sort(reverse=True)
        rooms, bins = [], []  # rooms sorted ascending with their bins
        for n, start in pieces:
            k = bisect.bisect_left(rooms, (n, -1))
            if k == len(rooms):
                bins.append([(start, n)])
                room, b = seq - n, len(bins) - 1
            else:
                room, b = rooms.pop(k)
                bins[b].append((start, n))
                room -= n
            bisect.insort(rooms, (room, b))
        ready.extend(bins)
        while len(ready) >= a.batch_size:
            step, ready = ready[:a.batch_size], ready[a.batch_size:]
            ids = np.full((a.batch_size, seq), pad, dtype=np.int32)
            pos = np.empty((a.batch_size, seq), dtype=np.int32)
            for r, s in enumerate(step):
                j = 0
                for start, n in s:
                    ids[r, j:j + n] = data[start:start + n]
                    pos[r, j:j + n] = np.arange(n, dtype=np.int32)
                    j += n
                    nonpad += n
                pos[r, j:] = np.arange(seq - j, dtype=np.int32)
            x, p = torch.from_numpy(ids), torch.from_numpy(pos)
            tokens += x.numel()
            if tokens >= a.tokens:
                break
    return {"tokens": tokens, "fill": nonpad / max(tokens, 1), "long_cuts": cut}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["brand", "views", "dataset", "memmap", "pack"])
    p.add_argument("--url")
    p.add_argument("--dataset")
    p.add_argument("--pack", default="bestfit")
    p.add_argument("--epoch", type=int, default=0)
    p.add_argument("--bin")
    p.add_argument("--idx")
    p.add_argument("--dtype", default="int32")
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--tokens", type=int, required=True)
    p.add_argument("--buffer", type=int, default=10000)
    p.add_argument("--pad", type=int, default=0)
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args()
    if a.mode in ("brand", "views", "dataset"):
        global brand
        import brand  # before the clock: importing is not loading
    loader = {"brand": brand_loader, "views": views_loader, "dataset": dataset_loader, "memmap": memmap_loader, "pack": pack_loader}[a.mode]
    t0, c0 = time.perf_counter(), time.process_time()
    out = loader(a)
    out["seconds"] = time.perf_counter() - t0
    out["cpu_seconds"] = time.process_time() - c0
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
