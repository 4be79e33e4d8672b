"""Runs python/brand/transform.py (the Python reference of the transform's
draws) on the cases of a JSON file shaped as draws.json and prints the
answers in the same shape; transform's TestPythonReference compares them
with Go's. Run with PYTHONPATH pointing at python/."""

import json
import struct
import sys

from brand import transform as tf


def bits(f):
    return "0x%016x" % struct.unpack("<Q", struct.pack("<d", f))[0]


def main(path):
    with open(path) as f:
        g = json.load(f)
    for c in g["log"]:
        c["bits"] = bits(tf.det_log(c["x"]))
    for c in g["exp"]:
        c["bits"] = bits(tf.det_exp(c["x"]))
    for c in g["crops"]:
        box, attempts = tf.random_resized_crop_box(
            c["seed"], c["epoch"], c["sample"], c["op"], c["width"], c["height"], c["scale"], c["ratio"]
        )
        c["box"], c["attempts"] = list(box), attempts
    for c in g["flips"]:
        c["flip"] = tf.flip(c["seed"], c["epoch"], c["sample"], c["op"], c["p"])
    for c in g["imagenet_train"]:
        box, flipped = tf.imagenet_train_draws(c["seed"], c["epoch"], c["sample"], c["width"], c["height"])
        c["box"], c["flip"] = list(box), flipped
    for c in g["sample_keys"]:
        seed, epoch, sample = tf.sample_key(c["job_seed"], c["dataset"], c["epoch"], c["sample"])
        c["key_seed"] = seed
        box, flipped = tf.imagenet_train_draws(seed, epoch, sample, 500, 375)
        c["box"], c["flip"] = list(box), flipped
    json.dump(g, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
