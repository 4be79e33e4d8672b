"""A hard, imbalanced synthetic classification set, generated offline.

Used by importance_train.py. Every number comes from one seeded NumPy
generator, so a seed gives the same bytes on every machine with the same
NumPy.

Shape: ``dim``-dimensional float32 features, 10 classes with a long-tailed
class distribution (the most frequent class has 28 % of the samples, the
rarest 3 %). Each class is a mixture of three Gaussian clusters in a
16-dimensional latent space, mapped into feature space by a fixed random
two-layer tanh network, plus noise; so a linear model is not enough. The
last four (and rarest) classes are *hard*: their clusters lie close to
each other's and to those of class 1, so they overlap and stay confusable
however long a model trains. That is the situation importance sampling is
for: most samples become easy early, a minority stays hard.

On disk (``write_tree``) each sample is two files, ``cls/<class>/<id>.x``
(the features, float32 little-endian) and ``cls/<class>/<id>.cls`` (the
class as ASCII digits): the keys ``cls/<class>/<id>`` sort by class, so a
pack without shuffling puts each class in its own run of chunks.
"""

from __future__ import annotations

import os
from typing import Tuple

import numpy as np

CLASSES = 10
# The class distribution: long-tailed, summing to 1.
PRIORS = np.array([0.28, 0.20, 0.14, 0.10, 0.08, 0.06, 0.045, 0.035, 0.03, 0.03])
HARD = (6, 7, 8, 9)  # overlapping classes (and the rarest)
LATENT = 16
CLUSTERS = 3


def generate(n_train: int, n_test: int, dim: int, seed: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Returns (x_train, y_train, x_test, y_test): features float32 of shape
    (n, dim), labels int64. Train and test come from one distribution; the
    features are standardised with the training set's mean and deviation."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 1.6, size=(CLASSES, CLUSTERS, LATENT))
    # The hard classes sit near class 1's clusters and near each other.
    for k, c in enumerate(HARD):
        centers[c] = centers[1] + rng.normal(0.0, 0.55, size=(CLUSTERS, LATENT))
    spread = np.full(CLASSES, 1.0)
    spread[list(HARD)] = 0.8
    w1 = rng.normal(0.0, 1.0 / np.sqrt(LATENT), size=(LATENT, 48))
    w2 = rng.normal(0.0, 1.0 / np.sqrt(48), size=(48, dim))

    def draw(n: int) -> Tuple[np.ndarray, np.ndarray]:
        y = rng.choice(CLASSES, size=n, p=PRIORS)
        k = rng.integers(0, CLUSTERS, size=n)
        z = centers[y, k] + rng.normal(0.0, 1.0, size=(n, LATENT)) * spread[y, None]
        x = np.tanh(z @ w1) @ w2 + rng.normal(0.0, 0.15, size=(n, dim))
        return x, y.astype(np.int64)

    xtr, ytr = draw(n_train)
    xte, yte = draw(n_test)
    mu, sd = xtr.mean(axis=0), xtr.std(axis=0) + 1e-6
    return (((xtr - mu) / sd).astype(np.float32), ytr, ((xte - mu) / sd).astype(np.float32), yte)


def write_tree(root: str, x: np.ndarray, y: np.ndarray, seed: int) -> None:
    """Writes one sample per key under ``root/cls/<class>/<id>``. IDs are a
    seeded permutation of 0 … n-1 (zero-padded), so within a class the key
    order is not the generation order."""
    ids = np.random.default_rng(seed + 1).permutation(len(y))
    width = len(str(len(y) - 1))
    for c in range(CLASSES):
        os.makedirs(os.path.join(root, "cls", str(c)), exist_ok=True)
    for i in range(len(y)):
        stem = os.path.join(root, "cls", str(int(y[i])), f"{int(ids[i]):0{width}d}")
        with open(stem + ".x", "wb") as f:
            f.write(x[i].astype("<f4").tobytes())
        with open(stem + ".cls", "wb") as f:
            f.write(str(int(y[i])).encode())
