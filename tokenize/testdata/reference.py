#!/usr/bin/env python3
"""The reference side of package tokenize's tests: Google's SentencePiece
(Debian's python3-sentencepiece; scripts/ensure-sentencepiece.sh installs
it) trains the models the Go package is checked with and encodes the texts
it must encode identically. Standard library and sentencepiece only.

    reference.py train SPEC.json
        SPEC: {"corpus": PATH, "out": DIR,
               "models": [{"name": NAME, "options": {...}}, ...]}
        Trains DIR/NAME.model for each model, the options passed to
        SentencePieceTrainer.train as they are (one thread, so that a
        corpus always gives the same model).

    reference.py encode SPEC.json OUT.json
        SPEC: {"texts": PATH, "models": {NAME: MODEL_PATH, ...}}
        PATH holds one text a line, hex-encoded, so that any bytes (newlines,
        NUL, invalid UTF-8) can be a text. The texts are passed as bytes, as
        they are: the reference's own rule for invalid UTF-8 applies.
        OUT: {NAME: {"vocab": N, "unk": ID, "bos": ID, "eos": ID, "pad": ID,
                     "ids": [[ID, ...], ...]}, ...}

    reference.py golden GOLDEN.json
        Rewrites what GOLDEN.json says of each model (models relative to
        its directory): its fingerprint (the first 16 hex digits of its
        file's SHA-256), vocabulary size and special IDs, and the "ids" of
        every case, as the reference encodes its "hex" now.
"""

import hashlib
import json
import os
import sys

import sentencepiece as spm


def train(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    for m in spec["models"]:
        options = dict(m["options"])
        options.setdefault("num_threads", 1)
        options.setdefault("minloglevel", 2)
        spm.SentencePieceTrainer.train(
            input=spec["corpus"],
            model_prefix=os.path.join(spec["out"], m["name"]),
            **options,
        )


def info(sp):
    return {
        "vocab": sp.get_piece_size(),
        "unk": sp.unk_id(),
        "bos": sp.bos_id(),
        "eos": sp.eos_id(),
        "pad": sp.pad_id(),
    }


def encode(spec_path, out_path):
    with open(spec_path) as f:
        spec = json.load(f)
    with open(spec["texts"]) as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    texts = [bytes.fromhex(line) for line in lines]
    out = {}
    for name, path in spec["models"].items():
        sp = spm.SentencePieceProcessor(model_file=path)
        res = info(sp)
        res["ids"] = [sp.encode(t) for t in texts]
        out[name] = res
    with open(out_path, "w") as f:
        json.dump(out, f)


def golden(path):
    with open(path) as f:
        g = json.load(f)
    base = os.path.dirname(path)
    for m in g["models"]:
        model_path = os.path.join(base, m["file"])
        with open(model_path, "rb") as f:
            m["fingerprint"] = hashlib.sha256(f.read()).hexdigest()[:16]
        sp = spm.SentencePieceProcessor(model_file=model_path)
        m.update(info(sp))
        for c in m["cases"]:
            c["ids"] = sp.encode(bytes.fromhex(c["hex"]))
    # One case a line, so that a change reads as a diff of cases.
    with open(path, "w") as f:
        f.write('{"note": %s,\n "models": [' % json.dumps(g["note"]))
        for i, m in enumerate(g["models"]):
            head = {k: v for k, v in m.items() if k != "cases"}
            f.write("%s\n  %s,\n  \"cases\": [" % ("," if i else "", json.dumps(head, ensure_ascii=False)[:-1]))
            for j, c in enumerate(m["cases"]):
                f.write("%s\n   %s" % ("," if j else "", json.dumps(c, ensure_ascii=False)))
            f.write("]}")
        f.write("]}\n")


def main(argv):
    if len(argv) >= 2 and argv[1] == "train" and len(argv) == 3:
        train(argv[2])
    elif len(argv) >= 2 and argv[1] == "encode" and len(argv) == 4:
        encode(argv[2], argv[3])
    elif len(argv) >= 2 and argv[1] == "golden" and len(argv) == 3:
        golden(argv[2])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
