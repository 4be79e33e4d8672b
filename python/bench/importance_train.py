#!/usr/bin/env python3
"""A real training run read through Brand: uniform against importance mode.

Generates a hard, imbalanced synthetic classification set offline
(synthetic.py: 16,384 training and 4,096 test samples, 64 float32 features,
10 classes), packs the training set with ``brand pack --no-shuffle`` into
256 chunks (so chunks follow the class folders), and trains the same small
MLP with PyTorch on the CPU, once per configuration, each against a fresh
``brand serve`` over the packed dataset (a local ``file://`` store):

``uniform``     the gateway's uniform chunk-then-sample shuffle;
``importance``  ``sampling=importance``: the per-sample losses of every
                batch are sent back (:func:`brand.importance.feedback`,
                binary, by sample ID), each epoch is sealed at its end
                (:func:`brand.importance.seal`), and the next epoch names
                the sealed version with ``hot`` = the cache's size in
                chunks. Epoch 0 is the uniform order.

with the cache at 10 % and 20 % of the dataset (next-use policy), and a
uniform run under ``--cache-policy lru`` at 10 %. Every run has the same
seed, model initialisation, optimiser and number of steps; only the order
of the samples differs. The test set never goes through the gateway.

Recorded per epoch: the gateway's chunk hit ratio (/stats
``epochs[].hit_ratio``: per batch, the chunks it touched that were already
cached), its chunk loads, the store bytes (the /metrics counter
``brand_backend_read_bytes_total``, its growth over the epoch), the
distinct chunks the epoch's batches came from, and test accuracy; plus
test accuracy and store bytes every ``--eval-every`` steps for the curves.
Writes ``--json`` and ``--png`` and prints a table and the issue's targets,
met or missed.

Run from the repository root::

    /usr/bin/python3 python/bench/importance_train.py --brand /tmp/brand

(scripts/importance-bench.sh builds the binary and runs this.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the brand package, uninstalled
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # servetest, the tests' gateway processes

import numpy as np  # noqa: E402
import torch  # noqa: E402

import brand  # noqa: E402
from brand import importance  # noqa: E402
import servetest  # noqa: E402
import synthetic  # noqa: E402

DATASET = "t"
# Targets of issue 14, evaluated as written; never tuned.
TARGET_LRU_FACTOR = 4.5
TARGET_BYTES_CUT = 0.40
TARGET_ACC_POINTS = 0.5

RUNS = [  # (name, mode, cache fraction, policy)
    ("uniform-lru-10", "uniform", 0.10, "lru"),
    ("uniform-10", "uniform", 0.10, "next-use"),
    ("importance-10", "importance", 0.10, "next-use"),
    ("uniform-20", "uniform", 0.20, "next-use"),
    ("importance-20", "importance", 0.20, "next-use"),
]


# -- the gateway ------------------------------------------------------------


class Serve(servetest.Serve):
    """``brand serve`` over one dataset on loopback, for one run."""

    def __init__(self, binary: str, store: str, cache_bytes: int, policy: str, window: int, log: str):
        super().__init__(binary, [
            "--dataset", f"{DATASET}=file://{store}", "--cache-size", str(cache_bytes), "--cache-policy", policy,
            "--cache-prefault=false", "--window", str(window), "--index-poll", "0",
        ], log)

    def get_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return json.loads(r.read())

    def store_bytes(self) -> int:
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("brand_backend_read_bytes_total "):
                    return int(float(line.split()[1]))
        raise RuntimeError("/metrics has no brand_backend_read_bytes_total")

    def epoch_stats(self, epoch: int) -> Dict[str, Any]:
        eps = [e for e in self.get_json("/stats")["epochs"] if e["dataset"] == DATASET and e["epoch"] == epoch]
        if len(eps) != 1:
            raise RuntimeError(f"/stats has {len(eps)} streams for epoch {epoch}, want 1: {eps}")
        return eps[0]


# -- the dataset ------------------------------------------------------------


def prepare(work: str, binary: str, seed: int, n_train: int, n_test: int, dim: int, chunk_size: str) -> Dict[str, Any]:
    """Generates, writes and packs the training set (once per work
    directory and parameters); returns the test set and the store."""
    xtr, ytr, xte, yte = synthetic.generate(n_train, n_test, dim, seed)
    tag = f"n{n_train}-d{dim}-s{seed}-c{chunk_size}"
    store = os.path.join(work, "store-" + tag)
    if not os.path.exists(os.path.join(store, "_brand", "manifest.json")):
        src = os.path.join(work, "src-" + tag)
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(store, ignore_errors=True)
        synthetic.write_tree(src, xtr, ytr, seed)
        subprocess.run([binary, "pack", "--src", src, "--dst", "file://" + store, "--chunk-size", chunk_size,
                        "--no-shuffle"], check=True, timeout=300, stdout=subprocess.DEVNULL)
        shutil.rmtree(src)
    with open(os.path.join(store, "_brand", "manifest.json")) as f:
        man = json.load(f)
    return {"store": store, "manifest": man, "x_test": xte, "y_test": yte, "classes": np.bincount(ytr).tolist()}


def sample_map(gw: Serve, batch_size: int) -> Dict[str, Tuple[int, str]]:
    """key -> (sample ID, chunk key), from the manifests of one uniform
    epoch (every sample once), on a seed no run uses."""
    q = {"dataset": DATASET, "seed": "999983", "batch_size": str(batch_size), "format": "json"}
    info = gw.get_json("/epoch/0?" + urllib.parse.urlencode(q))
    out: Dict[str, Tuple[int, str]] = {}
    for m in range(int(info["batches"])):
        man = gw.get_json(f"/epoch/0/batch/{m}/manifest?" + urllib.parse.urlencode(q))
        for s in man["samples"]:
            out[s["key"]] = (int(s["id"]), s["chunk"])
    return out


# -- training ---------------------------------------------------------------


def model(dim: int, classes: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(dim, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, classes),
    )


def accuracy(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((net(x).argmax(1) == y).float().mean()) * 100


def decode(batch: List[Dict[str, Any]], dim: int) -> Tuple[List[str], torch.Tensor, torch.Tensor]:
    keys = [s["__key__"] for s in batch]
    x = np.frombuffer(b"".join(s["x"] for s in batch), dtype="<f4").reshape(len(batch), dim)
    y = np.array([int(s["cls"]) for s in batch], dtype=np.int64)
    return keys, torch.from_numpy(x.copy()), torch.from_numpy(y)


def train(name: str, mode: str, frac: float, policy: str, seed: int, a: argparse.Namespace, data: Dict[str, Any],
          keymap: Dict[str, Tuple[int, str]], work: str) -> Dict[str, Any]:
    man = data["manifest"]
    total, chunks = int(man["total_bytes"]), int(man["chunks"])
    cache = int(total * frac)
    hot = max(0, cache * chunks // total - a.hot_reserve)  # whole chunks the cache holds
    gw = Serve(a.brand, data["store"], cache, policy, a.window, os.path.join(work, f"serve-{name}.log"))
    try:
        return _train(name, mode, frac, policy, cache, hot, seed, gw, a, data, keymap)
    finally:
        gw.stop()


def _train(name: str, mode: str, frac: float, policy: str, cache: int, hot: int, seed: int, gw: Serve,
           a: argparse.Namespace, data: Dict[str, Any], keymap: Dict[str, Tuple[int, str]]) -> Dict[str, Any]:
    torch.manual_seed(seed)
    xte = torch.from_numpy(data["x_test"])
    yte = torch.from_numpy(data["y_test"])
    net = model(a.dim, len(data["classes"]))
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    n = int(data["manifest"]["samples"])
    steps_per_epoch = math.ceil(n / a.batch_size)
    total_steps = steps_per_epoch * a.epochs
    # Cosine decay to 0 over the run: the final accuracy is the model's, not one noisy step's.
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total_steps) / total_steps)))
    job = f"bench-{name}-s{seed}"
    base = {"dataset": DATASET, "seed": str(seed), "batch_size": str(a.batch_size), "window": str(a.window),
            "world": "1", "rank": "0", "drop_last": "false"}
    client = brand.Client(gw.url, dataset=DATASET, ahead=0, timeout=60)
    pool = ThreadPoolExecutor(max_workers=2)
    version: Optional[str] = None
    start_bytes = gw.store_bytes()
    curve = [{"step": 0, "acc": accuracy(net, xte, yte), "store_bytes": 0}]
    epochs: List[Dict[str, Any]] = []
    prev_chunks: set = set()
    prev_top: Optional[set] = None
    step = 0
    t0 = time.monotonic()
    fb_seconds = 0.0
    for e in range(a.epochs):
        q = dict(base)
        if mode == "importance":
            q.update({"sampling": "importance", "job": job, "hot": str(hot)})
            if version is not None:
                q["importance"] = version
        _, body = client.get(f"/epoch/{e}", q)
        nb = int(json.loads(body)["batches"])
        if nb != steps_per_epoch:
            raise RuntimeError(f"{name}: epoch {e} has {nb} batches, want {steps_per_epoch}")
        e_bytes0 = gw.store_bytes()
        seen_chunks, seen_keys, draws, loss_sum = set(), set(), 0, 0.0
        pending = [pool.submit(client.batch, e, m, q) for m in range(min(2, nb))]
        for m in range(nb):
            batch = pending.pop(0).result()
            if m + 2 < nb:
                pending.append(pool.submit(client.batch, e, m + 2, q))
            keys, x, y = decode(batch, a.dim)
            losses = torch.nn.functional.cross_entropy(net(x), y, reduction="none")
            opt.zero_grad()
            losses.mean().backward()
            opt.step()
            sched.step()
            step += 1
            lv = losses.detach()
            loss_sum += float(lv.sum())
            draws += len(keys)
            for k in keys:
                seen_keys.add(k)
                seen_chunks.add(keymap[k][1])
            if mode == "importance":
                t = time.monotonic()
                importance.feedback(gw.url, job, e, ids=[keymap[k][0] for k in keys], losses=lv, dataset=DATASET)
                fb_seconds += time.monotonic() - t
            if step % a.eval_every == 0:
                curve.append({"step": step, "acc": accuracy(net, xte, yte), "store_bytes": gw.store_bytes() - start_bytes})
        if mode == "importance":
            t = time.monotonic()
            version = importance.seal(gw.url, job, e, prev=version, dataset=DATASET)
            # What the job's other ranks would do: wait for the sealed version.
            got = importance.version_for(gw.url, job, e, wait=10, dataset=DATASET)
            if got != version:
                raise RuntimeError(f"{name}: epoch {e} sealed as {version}, but the gateway names {got}")
            fb_seconds += time.monotonic() - t
        st = gw.epoch_stats(e)
        acc = accuracy(net, xte, yte)
        if curve[-1]["step"] != step:
            curve.append({"step": step, "acc": acc, "store_bytes": gw.store_bytes() - start_bytes})
        epochs.append({
            "epoch": e, "steps": step, "test_acc": acc, "train_loss": loss_sum / draws,
            "hit_ratio": st["hit_ratio"], "chunk_accesses": st["chunk_accesses"], "chunk_loads": st["chunk_loads"],
            "stats_backend_bytes": st["backend_bytes"], "store_bytes": gw.store_bytes() - e_bytes0,
            "chunks_read": len(seen_chunks), "chunks_read_before": len(seen_chunks & prev_chunks),
            "distinct_samples": len(seen_keys), "version": version,
        })
        if mode == "importance" and hot > 0:
            top = heaviest(data["store"], job, version, keymap, hot)
            # The hot set of epoch e+1 is `top`; what the cache kept through
            # epoch e was chosen by the previous snapshot's weights.
            epochs[-1]["hot_next"] = sorted(top)
            if prev_top is not None:
                epochs[-1]["hot_next_also_hot_now"] = len(top & prev_top)
            prev_top = top
        prev_chunks = seen_chunks
        ep = epochs[-1]
        print(f"  {name:15s} epoch {e}: acc {acc:5.2f}  loss {ep['train_loss']:.3f}  hit {ep['hit_ratio']:.3f}  "
              f"loads {ep['chunk_loads']:3d}/{ep['chunks_read']:3d} chunks  store {ep['store_bytes'] / 2**20:5.1f} MiB  "
              f"(of them {ep['chunks_read_before']} read the epoch before)  samples {ep['distinct_samples']}", flush=True)
    pool.shutdown()
    client.close()
    return {"name": name, "mode": mode, "cache_fraction": frac, "cache_bytes": cache, "policy": policy,
            "hot": hot if mode == "importance" else None, "epochs": epochs, "curve": curve,
            "final_acc": epochs[-1]["test_acc"], "seconds": time.monotonic() - t0, "feedback_seconds": fb_seconds}


def heaviest(store: str, job: str, version: str, keymap: Dict[str, Tuple[int, str]], hot: int) -> set:
    """The ``hot`` chunks (keys) of largest weight W_c under a snapshot read
    from the store (docs/importance.md §3, §4, §10): the hot set an epoch
    drawn from that snapshot reads first (before HOT_SHARE's cap)."""
    with open(os.path.join(store, "_brand", "importance", job, version + ".brandimp"), "rb") as f:
        b = f.read()
    o = 12  # magic, format version
    o += 2 + int.from_bytes(b[o:o + 2], "little")  # index ID
    o += 2 + int.from_bytes(b[o:o + 2], "little") + 8  # job, epoch
    n = int.from_bytes(b[o:o + 4], "little")
    scores = np.frombuffer(b, dtype="<f4", count=n, offset=o + 4).astype(np.float64)
    order = np.argsort(scores, kind="stable")
    ss = scores[order]
    # Runs of equal scores share their mean rank: a run over sorted
    # positions [a, b) weighs (2a + (b - a) + 1) / 2n, floored at 0.1.
    starts = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]])
    ends = np.r_[starts[1:], n]
    run_weight = np.maximum((2 * starts + (ends - starts) + 1) / (2 * n), 0.1)
    w = np.empty(n)
    w[order] = np.repeat(run_weight, ends - starts)
    chunk_of = {sid: ck for sid, ck in keymap.values()}
    keys = sorted(set(chunk_of.values()))
    idx = {k: i for i, k in enumerate(keys)}
    cw = np.bincount([idx[chunk_of[i]] for i in range(n)], weights=w, minlength=len(keys))
    top = sorted(range(len(keys)), key=lambda c: (-cw[c], c))[:hot]
    return {keys[c] for c in top}


# -- figures and targets ----------------------------------------------------


def summary(r: Dict[str, Any], first: int) -> Dict[str, float]:
    """Means over epochs first … last of a run."""
    eps = r["epochs"][first:]
    acc = sum(e["chunk_accesses"] for e in eps)
    loads = sum(e["chunk_loads"] for e in eps)
    read = sum(e["chunks_read"] for e in eps)
    return {
        "hit_ratio": 1 - loads / acc if acc else 0.0,
        "chunk_hit": 1 - loads / read if read else 0.0,
        "store_bytes": sum(e["store_bytes"] for e in eps) / len(eps),
        "chunks_read": read / len(eps),
        "loads": loads / len(eps),
    }


def targets(runs: Dict[str, Dict[str, Any]], first: int) -> List[Dict[str, Any]]:
    s = {k: summary(v, first) for k, v in runs.items()}
    out = []

    def add(what: str, got: float, want: float, ok: bool, detail: str) -> None:
        out.append({"target": what, "got": got, "want": want, "met": ok, "detail": detail})

    if {"importance-10", "uniform-lru-10", "uniform-10"} <= s.keys():
        for metric, label in (("hit_ratio", "/stats hit ratio"), ("chunk_hit", "chunk reads served by the cache")):
            imp, lru, sch = s["importance-10"][metric], s["uniform-lru-10"][metric], s["uniform-10"][metric]
            f = imp / lru if lru > 0 else math.inf
            add(f"{label}, 10 % cache: importance >= {TARGET_LRU_FACTOR}x LRU", f, TARGET_LRU_FACTOR, f >= TARGET_LRU_FACTOR,
                f"importance {imp:.3f}, uniform LRU {lru:.3f}: {f:.2f}x")
            add(f"{label}, 10 % cache: importance > next-use policy", imp - sch, 0.0, imp > sch,
                f"importance {imp:.3f}, uniform next-use {sch:.3f}")
    for pct in ("10", "20"):
        i, u = runs.get("importance-" + pct), runs.get("uniform-" + pct)
        if i is None or u is None:
            continue
        cut = 1 - s["importance-" + pct]["store_bytes"] / s["uniform-" + pct]["store_bytes"]
        add(f"store bytes per epoch, {pct} % cache: >= {TARGET_BYTES_CUT:.0%} below uniform", cut, TARGET_BYTES_CUT,
            cut >= TARGET_BYTES_CUT,
            f"importance {s['importance-' + pct]['store_bytes'] / 2**20:.2f} MiB, uniform "
            f"{s['uniform-' + pct]['store_bytes'] / 2**20:.2f} MiB: {cut:.1%} less")
        d = i["final_acc"] - u["final_acc"]
        add(f"final test accuracy, {pct} % cache: within {TARGET_ACC_POINTS} points of uniform or better", d,
            -TARGET_ACC_POINTS, d >= -TARGET_ACC_POINTS,
            f"importance {i['final_acc']:.2f} %, uniform {u['final_acc']:.2f} %: {d:+.2f} points")
    return out


def accuracy_spread(by_seed: Dict[int, Dict[str, Dict[str, Any]]]) -> Dict[str, Dict[str, float]]:
    """Final test accuracy of each run by seed, and of importance less
    uniform at the same cache."""
    out: Dict[str, Dict[str, float]] = {}
    for seed, runs in by_seed.items():
        for name, r in runs.items():
            out.setdefault(name, {})[str(seed)] = r["final_acc"]
        for pct in ("10", "20"):
            if "importance-" + pct in runs and "uniform-" + pct in runs:
                d = runs["importance-" + pct]["final_acc"] - runs["uniform-" + pct]["final_acc"]
                out.setdefault(f"importance-{pct} less uniform-{pct}", {})[str(seed)] = d
    return out


def spread_table(spread: Dict[str, Dict[str, float]]) -> str:
    seeds = list(next(iter(spread.values())).keys())
    lines = ["| run | " + " | ".join(f"seed {s}" for s in seeds) + " | mean |", "| --- |" + " --- |" * (len(seeds) + 1)]
    for name, v in spread.items():
        vals = [v[s] for s in seeds]
        lines.append(f"| {name} | " + " | ".join(f"{x:+.2f}" if "less" in name else f"{x:.2f}" for x in vals)
                     + f" | {sum(vals) / len(vals):{'+' if 'less' in name else ''}.2f} |")
    return "\n".join(lines)


def table(runs: Dict[str, Dict[str, Any]]) -> str:
    lines = ["| run | cache | policy | hot | final test acc. | hit ratio (/stats), all epochs / epochs 1+ | "
             "chunk reads served by the cache, all / 1+ | chunks read / epoch, epochs 1+ | store MiB / epoch, all / 1+ |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k, r in runs.items():
        s0, s1 = summary(r, 0), summary(r, 1)
        lines.append(
            f"| {k} | {r['cache_fraction']:.0%} | {r['policy']} | {r['hot'] if r['hot'] is not None else '–'} | "
            f"{r['final_acc']:.2f} % | {s0['hit_ratio']:.3f} / {s1['hit_ratio']:.3f} | "
            f"{s0['chunk_hit']:.3f} / {s1['chunk_hit']:.3f} | "
            f"{s1['chunks_read']:.1f} | {s0['store_bytes'] / 2**20:.2f} / {s1['store_bytes'] / 2**20:.2f} |")
    return "\n".join(lines)


def chart(runs: Dict[str, Dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    style = {"uniform-lru-10": ("tab:gray", ":"), "uniform-10": ("tab:blue", "--"), "importance-10": ("tab:blue", "-"),
             "uniform-20": ("tab:orange", "--"), "importance-20": ("tab:orange", "-")}
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.6))
    for k, r in runs.items():
        c, ls = style.get(k, (None, "-"))
        steps = [p["step"] for p in r["curve"]]
        acc = [p["acc"] for p in r["curve"]]
        mib = [p["store_bytes"] / 2**20 for p in r["curve"]]
        ax[0].plot(steps, acc, color=c, ls=ls, label=k)
        ax[1].plot(mib, acc, color=c, ls=ls, label=k)
        ax[2].plot([e["epoch"] for e in r["epochs"]], [e["store_bytes"] / 2**20 for e in r["epochs"]],
                   color=c, ls=ls, marker="o", ms=3, label=k)
    ax[0].set(xlabel="training steps", ylabel="test accuracy (%)", title="accuracy against steps")
    ax[1].set(xlabel="bytes read from the store (MiB, cumulative)", ylabel="test accuracy (%)",
              title="accuracy against store bytes")
    ax[2].set(xlabel="epoch", ylabel="MiB read from the store", title="store bytes per epoch")
    ax[2].set_ylim(0, None)
    lo = min(p["acc"] for r in runs.values() for p in r["curve"][1:])
    for x in ax[:2]:
        x.set_ylim(max(0, lo - 2), 100)
    for x in ax:
        x.grid(alpha=0.3)
    ax[0].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- main -------------------------------------------------------------------


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--brand", required=True, help="the brand binary")
    p.add_argument("--work", default="", help="working directory (default: a temporary one, removed)")
    p.add_argument("--json", default="", help="write every figure here")
    p.add_argument("--png", default="", help="write the chart here")
    p.add_argument("--runs", default=",".join(r[0] for r in RUNS),
                   help="comma-separated runs: " + ", ".join(r[0] for r in RUNS))
    p.add_argument("--seeds", default="1,2,3",
                   help="training seeds (the shuffle's and the model's): the first one's runs give the targets "
                        "and the chart, the others the spread of the final accuracy")
    p.add_argument("--data-seed", type=int, default=1, help="seed of the generated dataset")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--window", type=int, default=4, help="shuffle window, in chunks")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--train", type=int, default=16384)
    p.add_argument("--test", type=int, default=4096)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--chunk-size", default="128KiB", help="brand pack --chunk-size (2 KiB a sample: 64 a chunk)")
    p.add_argument("--hot-reserve", type=int, default=0,
                   help="importance runs: hot = the cache's size in chunks less this many")
    p.add_argument("--eval-every", type=int, default=64, help="steps between test evaluations for the curves")
    a = p.parse_args()
    torch.set_num_threads(1)
    want = a.runs.split(",")
    unknown = set(want) - {r[0] for r in RUNS}
    if unknown:
        p.error(f"unknown runs {sorted(unknown)}")
    work = a.work or tempfile.mkdtemp(prefix="brand-imptrain-")
    os.makedirs(work, exist_ok=True)
    try:
        t0 = time.monotonic()
        data = prepare(work, a.brand, a.data_seed, a.train, a.test, a.dim, a.chunk_size)
        man = data["manifest"]
        print(f"dataset: {man['samples']} samples in {man['chunks']} chunks ({man['total_bytes'] / 2**20:.1f} MiB), "
              f"packed without shuffling; classes {data['classes']}", flush=True)
        gw = Serve(a.brand, data["store"], 64 << 20, "next-use", a.window, os.path.join(work, "serve-map.log"))
        try:
            keymap = sample_map(gw, 256)
        finally:
            gw.stop()
        seeds = [int(x) for x in a.seeds.split(",")]
        by_seed: Dict[int, Dict[str, Dict[str, Any]]] = {}
        for seed in seeds:
            print(f"seed {seed}:", flush=True)
            by_seed[seed] = {name: train(name, mode, frac, policy, seed, a, data, keymap, work)
                             for name, mode, frac, policy in RUNS if name in want}
        runs = by_seed[seeds[0]]
        print(f"\nseed {seeds[0]}:\n")
        print(table(runs))
        print()
        res = targets(runs, 0)
        for t in res:
            print(f"{'MET ' if t['met'] else 'MISS'}  {t['target']}: {t['detail']}")
        spread = accuracy_spread(by_seed)
        if len(seeds) > 1:
            print(f"\nfinal test accuracy over seeds {a.seeds}:\n")
            print(spread_table(spread))
        print(f"\n(whole benchmark: {time.monotonic() - t0:.0f} s)")
        out = {"params": {k: v for k, v in vars(a).items() if k not in ("brand", "work", "json", "png")},
               "dataset": {"samples": man["samples"], "chunks": man["chunks"], "bytes": man["total_bytes"],
                           "classes": data["classes"], "packed_shuffled": man["shuffled"]},
               "seed": seeds[0], "runs": runs, "targets": res, "targets_epochs_1_on": targets(runs, 1),
               "final_acc_by_seed": spread,
               "other_seeds": {str(k): {n: {"final_acc": r["final_acc"], "epochs": r["epochs"]} for n, r in v.items()}
                               for k, v in by_seed.items() if k != seeds[0]}}
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
                f.write("\n")
        if a.png:
            chart(runs, a.png)
        return 0
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
