"""The Python client's side of integration/partition_test.go: the ranks of
a synchronous job, each a brand.Client of the whole peer list, read an
epoch step by step, as the test says when.

Usage: partition_client.py SPEC, SPEC a JSON file of the job
({"peers": [...], "dataset": ..., "epoch": ..., "world": ...,
"batch_size": ..., "seed": ..., "window": ...}).

Each line on stdin is a step to read: every rank reads its batch of it at
once, one thread a rank, and one JSON line on stdout answers it:
{"step": m, "ranks": [[[key, sha256(jpg), sha256(cls)], ...], ...],
"nodes": [the node that served each rank], "error": text or null}. The
script ends at the end of stdin. The clients are made at the start and
kept: each learns its own deadline from the answers it sees, as a
trainer's does. Once they are made, before the first step, it writes
{"ready": true}: the test times a step from when it asks for it, not
from the interpreter's start and imports (a second on a loaded machine).
"""

import hashlib
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import brand


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    world = spec["world"]
    clients = []
    for r in range(world):
        job = brand.Job(dataset=spec["dataset"], batch_size=spec["batch_size"], seed=spec["seed"],
                        window=spec["window"], world=world, rank=r)
        clients.append(brand.Client("", brand.Options(job=job, connection=brand.Connection(peers=spec["peers"]))))

    def read(r: int, m: int):
        c = clients[r]
        before = dict(c.served)
        b = c.batch(spec["epoch"], m)
        node = next((u for u, n in c.served.items() if n != before.get(u, 0)), None)
        return [[s["__key__"], hashlib.sha256(s["jpg"]).hexdigest(), hashlib.sha256(s["cls"]).hexdigest()]
                for s in b], node

    print(json.dumps({"ready": True}), flush=True)
    with ThreadPoolExecutor(world) as pool:
        for line in sys.stdin:
            m = int(line)
            out = {"step": m, "ranks": [], "nodes": [], "error": None}
            try:
                for samples, node in pool.map(lambda r: read(r, m), range(world)):
                    out["ranks"].append(samples)
                    out["nodes"].append(node)
            except Exception as e:  # reported to the test, which fails
                out["error"] = f"{type(e).__name__}: {e}"
            print(json.dumps(out), flush=True)
    for c in clients:
        c.close()


if __name__ == "__main__":
    main()
