"""readme_tokens.py runs the README's language-model loop ("Train a language
model from Megatron or Hugging Face token data") as it is written, but for
the gateway's address, and reports what its loader handed out. Run by
integration/readmetokens_test.go:

    PYTHONPATH=python python3 readme_tokens.py SNIPPET.py URL

Every step the loop's BrandLoader yields (a brand.Sequences step: a
SequenceBatch, its tokens the gateway's input_ids and its positions its
position_ids) is seen on its way: its tensors' dtype and shape, reported
by the gateway's names, and each row cut where position_ids restart at 0 into
segments, each reported as [first token, length, whether its tokens run
consecutively], by epoch; a segment of the pad (0, the default) is counted
apart, and one that is not a row's last is an error. After the loop, the
cu_seqlens the snippet derived for its last step are checked against the
positions where that step's position_ids are 0, and the end. One JSON line
of it all is printed.
"""

import collections
import json
import sys

import torch

import brand.torch as bt


def main():
    snippet, url = sys.argv[1:3]
    with open(snippet) as f:
        src = f.read()
    if "http://localhost:8080" not in src:
        sys.exit("the snippet names no http://localhost:8080")
    src = src.replace("http://localhost:8080", url)

    segments = collections.defaultdict(list)
    shapes = set()
    errors = []
    iterate = bt.BrandLoader.__iter__

    def watched(loader):
        for step in iterate(loader):
            if not isinstance(step, bt.SequenceBatch):
                sys.exit(f"the loop's loader yields {type(step).__name__}, not brand.Sequences' SequenceBatch")
            for k, t in (("input_ids", step.tokens), ("position_ids", step.positions)):
                shapes.add(f"{k} {t.dtype} {tuple(t.shape[1:])}")
            for ids, pos in zip(step.tokens.tolist(), step.positions.tolist()):
                starts = [i for i, p in enumerate(pos) if p == 0] + [len(pos)]
                if starts[0] != 0:
                    errors.append(f"a row whose position_ids start at {pos[0]}")
                for n, (a, b) in enumerate(zip(starts, starts[1:])):
                    seg = ids[a:b]
                    if all(t == 0 for t in seg):
                        if n != len(starts) - 2:
                            errors.append("pad before a document")
                        continue
                    run = seg == list(range(seg[0], seg[0] + len(seg)))
                    segments[loader.dataset.epoch].append([seg[0], len(seg), run])
            yield step

    bt.BrandLoader.__iter__ = watched
    ns = {"__name__": "__main__"}
    exec(compile(src, "README.md", "exec"), ns)
    pos = ns["pos"].flatten().cpu()
    want = [i for i, p in enumerate(pos.tolist()) if p == 0] + [pos.numel()]
    cu = ns["cu_seqlens"].cpu()
    if cu.dtype != torch.int32 or cu.tolist() != want:
        errors.append(f"cu_seqlens {cu.tolist()} ({cu.dtype}), the starts and the end {want}")
    print(json.dumps({"epochs": {str(e): s for e, s in segments.items()}, "shapes": sorted(shapes),
                      "errors": errors}))


if __name__ == "__main__":
    main()
