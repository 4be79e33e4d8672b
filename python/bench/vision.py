#!/usr/bin/env python3
"""The trainer's side of ``brand-bench vision``: an epoch of image-text
sequences handed to the training loop, two ways, each reporting its own
CPU time (``time.process_time``: every thread of this process; no
DataLoader workers, so there is no other process to count).

``brand``    ``brand.Sequences(vision=RULE)`` iterated in this process:
             each step's tokens, positions and loss mask ``(B, seq)`` and
             its images ``(3, h, w)`` uint8, as the gateway sends them.
``collate``  the collator teams write, on the trainer: WebDataset shards
             read from local disk (``tarfile``), each image decoded with
             PIL and resized bilinearly to the rule's size (Qwen2-VL's
             smart resize), the text tokenized with the same SentencePiece
             model (python3-sentencepiece) piece by piece between
             ``<image>`` placeholders, each placeholder expanded to
             ``start``, ``image`` × the image's vision tokens, ``end``; the
             samples packed greedily, best fit decreasing over a buffer of
             ``--buffer`` samples (at most ``--images`` images a sequence),
             into ``(B, seq)`` int32 tokens and positions, a uint8 loss
             mask (1 on a caption's text and the assistant's turns) and
             ``(3, h, w)`` uint8 image tensors.

Prints one JSON object: ``samples``, ``sequences``, ``images``,
``nonpad_tokens``, ``seconds`` and ``cpu_seconds`` (imports, the model's
load and the connection's setup excluded). The harness checks the
collator's tokens and images against the gateway's epoch: the same work.

    python3 python/bench/vision.py collate --shards DIR --model tokenize/testdata/golden-bpe.model \\
        --seq 2048 --batch-size 2 --min-pixels 3136 --max-pixels 200704 --patch 14 --merge 2 \\
        --image-id 1000 --start-id 1001 --end-id 1002 --pad 1003
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys
import tarfile
import time
from typing import Any, Dict, List, Tuple

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
torch.set_num_threads(1)

PLACEHOLDER = "<image>"


def brand_loader(a: argparse.Namespace) -> Dict[str, Any]:
    import brand

    ds = brand.Sequences(a.url, a.dataset, seq_len=a.seq, batch_size=a.batch_size, seed=7, vision=a.rule, pad=a.pad,
                         window=a.window)
    ds.set_epoch(a.epoch)
    sequences = images = nonpad = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    for b in ds:
        assert b.tokens.dtype == torch.int32 and b.tokens.shape[1] == a.seq and b.loss_mask.shape == b.tokens.shape
        sequences += b.tokens.shape[0]
        nonpad += int((b.tokens != a.pad).sum())
        for ims, spans in zip(b.images, b.image_spans):
            assert len(ims) == spans.shape[0]
            images += len(ims)
    return {"sequences": sequences, "images": images, "nonpad_tokens": nonpad,
            "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - cpu0}


def smart_resize(w: int, h: int, a: argparse.Namespace) -> Tuple[int, int]:
    """Qwen2-VL's smart_resize (transformers' image_processing_qwen2_vl):
    each side a multiple of patch × merge within [min, max] pixels."""
    f = a.patch * a.merge
    hb, wb = max(f, round(h / f) * f), max(f, round(w / f) * f)
    if hb * wb > a.max_pixels:
        beta = math.sqrt(h * w / a.max_pixels)
        hb, wb = max(f, math.floor(h / beta / f) * f), max(f, math.floor(w / beta / f) * f)
    elif hb * wb < a.min_pixels:
        beta = math.sqrt(a.min_pixels / (h * w))
        hb, wb = math.ceil(h * beta / f) * f, math.ceil(w * beta / f) * f
    return wb, hb


def shard_samples(path: str):
    """A WebDataset shard's samples: (key, {ext: bytes}) in order."""
    key, members = None, {}
    with tarfile.open(path, "r") as tf:
        for m in tf:
            if not m.isfile():
                continue
            base = os.path.basename(m.name)
            k, ext = m.name[:len(m.name) - len(base)] + base.split(".", 1)[0], base.split(".", 1)[1]
            if k != key and key is not None:
                yield key, members
                members = {}
            key = k
            members[ext] = tf.extractfile(m).read()
    if key is not None:
        yield key, members


def expand(members: Dict[str, bytes], sp: Any, a: argparse.Namespace):
    """A sample's IDs, loss mask and images: its text tokenized between
    placeholders, each image decoded, resized and expanded."""
    from PIL import Image

    names = sorted((e for e in members if e.split(".")[-1] in ("jpg", "png")), key=lambda e: int(e.split(".")[0]) if "." in e else 0)
    images = []
    for e in names:
        im = Image.open(io.BytesIO(members[e])).convert("RGB")
        w, h = smart_resize(im.width, im.height, a)
        im = im.resize((w, h), Image.BILINEAR)
        images.append(torch.from_numpy(np.asarray(im)).permute(2, 0, 1).contiguous())
    if "txt" in members:
        turns = [(members["txt"].decode("utf-8"), 1)]
    else:
        conv = json.loads(members["json"])["conversations"]
        turns = [(t["value"], 1 if t["from"] in ("gpt", "assistant") else 0) for t in conv]
    ids: List[int] = []
    loss: List[int] = []
    nxt = [0]

    def image() -> None:
        im = images[nxt[0]]
        nxt[0] += 1
        n = (im.shape[1] // a.patch) * (im.shape[2] // a.patch) // (a.merge * a.merge)
        ids.extend([a.start_id] + [a.image_id] * n + [a.end_id])
        loss.extend([0] * (n + 2))

    if sum(t.count(PLACEHOLDER) for t, _ in turns) == 0:
        for _ in images:
            image()
    for text, on in turns:
        pieces = text.split(PLACEHOLDER)
        for i, p in enumerate(pieces):
            got = sp.encode(p)
            ids.extend(got)
            loss.extend([on] * len(got))
            if i < len(pieces) - 1:
                image()
    assert nxt[0] == len(images) or sum(t.count(PLACEHOLDER) for t, _ in turns) == 0
    return ids, loss, images


def collate_loader(a: argparse.Namespace) -> Dict[str, Any]:
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=a.model)
    shards = sorted(os.path.join(a.shards, f) for f in os.listdir(a.shards) if f.endswith(".tar"))
    out = {"samples": 0, "sequences": 0, "images": 0, "nonpad_tokens": 0, "too_long": 0}
    pending: List[Tuple[List[int], List[int], List[torch.Tensor]]] = []
    ready: List[Any] = []

    def emit(seq_items) -> None:
        """One sequence of its samples: tokens, positions, loss, images."""
        ids = np.full(a.seq, a.pad, dtype=np.int32)
        pos = np.zeros(a.seq, dtype=np.int32)
        loss = np.zeros(a.seq, dtype=np.uint8)
        images, spans, at = [], [], 0
        for s_ids, s_loss, s_images in seq_items:
            n = len(s_ids)
            ids[at:at + n] = s_ids
            loss[at:at + n] = s_loss
            pos[at:at + n] = np.arange(n, dtype=np.int32)
            images.extend(s_images)
            at += n
        pos[at:] = np.arange(a.seq - at, dtype=np.int32)
        out["nonpad_tokens"] += at
        out["images"] += len(images)
        ready.append((ids, pos, loss, images))
        if len(ready) == a.batch_size:
            step()

    def step() -> None:
        tokens = torch.from_numpy(np.stack([r[0] for r in ready]))
        positions = torch.from_numpy(np.stack([r[1] for r in ready]))
        loss = torch.from_numpy(np.stack([r[2] for r in ready]))
        assert tokens.shape == positions.shape == loss.shape
        out["sequences"] += len(ready)
        ready.clear()

    def pack() -> None:
        """Best fit decreasing over the buffer: longest first, into the
        open sequence with the least room that fits it and its images."""
        pending.sort(key=lambda s: -len(s[0]))
        bins: List[List[Any]] = []  # [room, images, items]
        for s in pending:
            n, k = len(s[0]), len(s[2])
            best = None
            for b in bins:
                if b[0] >= n and (a.images == 0 or b[1] + k <= a.images) and (best is None or b[0] < best[0]):
                    best = b
            if best is None:
                best = [a.seq, 0, []]
                bins.append(best)
            best[0] -= n
            best[1] += k
            best[2].append(s)
        for b in bins:
            emit(b[2])
        pending.clear()

    cpu0, t0 = time.process_time(), time.perf_counter()
    for path in shards:
        for _, members in shard_samples(path):
            ids, loss, images = expand(members, sp, a)
            out["samples"] += 1
            if len(ids) > a.seq or (a.images and len(images) > a.images):
                out["too_long"] += 1
                continue
            pending.append((ids, loss, images))
            if len(pending) == a.buffer:
                pack()
    pack()
    if ready:
        step()
    out.update(seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - cpu0)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["brand", "collate"])
    p.add_argument("--url")
    p.add_argument("--dataset", default="pairs")
    p.add_argument("--rule", help="brand: the vision= rule")
    p.add_argument("--window", type=int, default=4)
    p.add_argument("--epoch", type=int, default=1)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--pad", type=int, required=True)
    p.add_argument("--shards", help="collate: a directory of .tar shards")
    p.add_argument("--model", help="collate: the SentencePiece model")
    p.add_argument("--min-pixels", type=int, default=3136)
    p.add_argument("--max-pixels", type=int, default=200704)
    p.add_argument("--patch", type=int, default=14)
    p.add_argument("--merge", type=int, default=2)
    p.add_argument("--images", type=int, default=0, help="images a sequence at most, 0 no cap")
    p.add_argument("--image-id", type=int)
    p.add_argument("--start-id", type=int)
    p.add_argument("--end-id", type=int)
    p.add_argument("--buffer", type=int, default=1000)
    a = p.parse_args()
    res = brand_loader(a) if a.mode == "brand" else collate_loader(a)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
