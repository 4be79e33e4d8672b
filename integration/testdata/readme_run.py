"""readme_run.py runs one of the READMEs' Python examples as it is written,
but for the gateway's address, and reports what it did. Run by
integration/readmeexamples_test.go:

    python3 readme_run.py SNIPPET.py URL EPOCHS NAME...

SNIPPET.py is the README's block; every http://localhost:8080 in it is
URL. When torch is importable, every step a BrandLoader of the snippet
hands out is counted on its way, by epoch: steps, samples (the length of
the step's first member: an entry's NamedTuple's first field, or a dict
step's first key), and each sample's dataset where a step names it (a
mixture's: a SampleBatch's datasets, or "__dataset__"); and the samples
given to use(...), which the
READMEs write for what a trainer does with one. Only the loader's first
EPOCHS passes are
read (a loop of 90 epochs reads 2, the later passes empty): the READMEs'
loops train for as long as a real run, the test for as long as it proves
something. After the snippet, one JSON line: the counts, and each global
named by NAME, as JSON (a number, a string, a tensor's or an array's shape
and dtype, a dict's keys when it is not plain JSON).
"""

import collections
import json
import sys


def main():
    snippet, url, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    names = sys.argv[4:]
    with open(snippet) as f:
        src = f.read()
    if "http://localhost:8080" not in src:
        sys.exit("the snippet names no http://localhost:8080")
    src = src.replace("http://localhost:8080", url)

    counts = collections.defaultdict(lambda: {"steps": 0, "samples": 0, "datasets": collections.Counter()})
    try:
        import brand.torch as bt
    except ImportError:
        bt = None
    if bt is not None:
        iterate = bt.BrandLoader.__iter__
        passes = collections.Counter()

        def watched(loader):
            passes[id(loader)] += 1
            if passes[id(loader)] > epochs:
                return
            for step in iterate(loader):
                c = counts[loader.dataset.epoch]
                c["steps"] += 1
                first = step[next(iter(step))] if isinstance(step, dict) else step[0]
                c["samples"] += len(first)
                if isinstance(step, dict) and "__dataset__" in step:
                    c["datasets"].update(step["__dataset__"])
                elif getattr(step, "datasets", None) is not None:
                    c["datasets"].update(step.datasets)
                yield step

        bt.BrandLoader.__iter__ = watched
    # use(...) stands, in the READMEs, for what the trainer does with a
    # sample: here it counts them.
    used = [0]

    def use(*_):
        used[0] += 1

    ns = {"__name__": "__main__", "use": use}
    exec(compile(src, "README.md", "exec"), ns)

    def plain(v):
        # A tensor or an array: its shape and dtype, which the READMEs'
        # comments state, not its values.
        if hasattr(v, "shape") and hasattr(v, "dtype"):
            return {"shape": list(v.shape), "dtype": str(v.dtype)}
        try:
            json.dumps(v)
            return v
        except TypeError:
            return sorted(map(str, v)) if isinstance(v, dict) else repr(v)

    print(json.dumps({"epochs": {str(e): c for e, c in counts.items()}, "used": used[0],
                      "globals": {n: plain(ns.get(n)) for n in names}}))


if __name__ == "__main__":
    main()
