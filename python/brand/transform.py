"""The seeded draws of Brand's transform pipelines, for reproducing them.

A gateway that applies a pipeline (``transform=imagenet-train``) draws each
random choice — a RandomResizedCrop's box, a RandomHorizontalFlip's coin —
from a stream seeded by the sample's key alone: the job's seed and the
sample's dataset (:func:`key_seed`), the epoch and the sample's ID
(docs/transform.md §4.1). This module is the reference of those draws,
written from that document with the standard library only: given an
image's size it says which box a sample was cropped to and whether it was
flipped, so a trainer can check or replay what the gateway did, and the
golden vectors in transform/testdata/draws.json pin both implementations.

For example ``imagenet_train_draws(key_seed(7, "imagenet"), epoch=0,
sample=42, width=500, height=375)`` is the box sample 42 of dataset
``imagenet``, a 500×375 photo, was cut to in epoch 0 of a job seeded 7, and
whether it was flipped (:func:`sample_key` gives the three numbers at once).

:func:`npy_array` reads a pipeline's ``.npy`` member without copying it.
"""

from __future__ import annotations

import math
from typing import List, NamedTuple, Sequence, Tuple

from ._npy import read_header

__all__ = [
    "Box",
    "Stream",
    "det_exp",
    "det_log",
    "flip",
    "imagenet_train_draws",
    "key_seed",
    "npy_array",
    "npy_header",
    "random_resized_crop_box",
    "sample_key",
    "stream",
]

_M64 = (1 << 64) - 1
_M128 = (1 << 128) - 1
_GOLDEN = 0x9E3779B97F4A7C15
#: The transform's stream domain: "brandtf" and a zero byte; the operator at
#: position k of a pipeline draws from DOMAIN_TRANSFORM + k.
DOMAIN_TRANSFORM = 0x6272616E64746600
#: The domain of a key's seed: "brandtk" and a zero byte.
DOMAIN_KEY = 0x6272616E64746B00
_MUL = 0x2360ED051FC65DA44385DF649FCCF645
_INC = 0x5851F42D4C957F2D14057B7EF767814F

#: torchvision's attempts before RandomResizedCrop's central fallback.
CROP_ATTEMPTS = 10


def _mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _stream_seeds(seed: int, epoch: int, domain: int, index: int) -> Tuple[int, int]:
    h = _mix64(domain)
    h = _mix64(h ^ seed)
    h = _mix64(h ^ epoch)
    h = _mix64(h ^ index)
    h = (h + _GOLDEN) & _M64
    s1 = _mix64(h)
    h = (h + _GOLDEN) & _M64
    return s1, _mix64(h)


class Stream:
    """PCG-DXSM (Go's math/rand/v2 PCG) with Lemire's bounded draws, as
    docs/shuffle.md §2–3 specify."""

    def __init__(self, seed1: int, seed2: int):
        self.state = (seed1 << 64) | seed2

    def uint64(self) -> int:
        self.state = (self.state * _MUL + _INC) & _M128
        hi, lo = self.state >> 64, self.state & _M64
        hi ^= hi >> 32
        hi = (hi * 0xDA942042E4DD58B5) & _M64
        hi ^= hi >> 48
        return (hi * (lo | 1)) & _M64

    def bounded(self, n: int) -> int:
        m = self.uint64() * n
        if m & _M64 < n:
            thresh = ((1 << 64) - n) % n
            while m & _M64 < thresh:
                m = self.uint64() * n
        return m >> 64

    def unit(self) -> float:
        """A uniform double in [0, 1): the top 53 bits times 2^-53."""
        return (self.uint64() >> 11) * (1.0 / 9007199254740992.0)


def stream(seed: int, epoch: int, sample: int, op: int) -> Stream:
    """The draws of the operator at position ``op`` of a pipeline, for one
    sample of one epoch of a job."""
    return Stream(*_stream_seeds(seed & _M64, epoch & _M64, DOMAIN_TRANSFORM + op, sample & _M64))


def _fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & _M64
    return h


def key_seed(job_seed: int, dataset: str) -> int:
    """The seed of a job's keys on one dataset: the first output of the
    stream seeded by ``(job_seed, 0, DOMAIN_KEY, fnv1a64(dataset))``, the
    dataset's name in UTF-8. Two datasets of a mixture, whose sample IDs
    both start at 0, thus draw differently for equal IDs."""
    return Stream(*_stream_seeds(job_seed & _M64, 0, DOMAIN_KEY, _fnv1a64(dataset.encode("utf-8")))).uint64()


def sample_key(job_seed: int, dataset: str, epoch: int, sample: int) -> Tuple[int, int, int]:
    """The key ``(seed, epoch, sample)`` of sample ID ``sample`` of
    ``dataset`` in epoch ``epoch`` (for a mixture: the component's pass) of
    a job seeded ``job_seed``: what every draw function here takes. Nothing
    else enters it: not the world size, the rank, the batch, the offset or
    the node."""
    return key_seed(job_seed, dataset), epoch, sample


def det_log(x: float) -> float:
    """The natural logarithm as docs/transform.md §3 defines it: square
    roots down to [15/16, 17/16], then 2·atanh by a fixed series."""
    k = 0
    while x > 1.0625 or x < 0.9375:
        x = math.sqrt(x)
        k += 1
    z = (x - 1) / (x + 1)
    z2 = z * z
    s = 0.0
    for n in range(10, -1, -1):
        s = s * z2 + 1 / float(2 * n + 1)
    r = 2 * z * s
    for _ in range(k):
        r *= 2
    return r


def det_exp(x: float) -> float:
    """e^x as docs/transform.md §3 defines it: halve to |x| <= 1/16, a
    14-term Taylor series in Horner form, square back."""
    k = 0
    while x > 0.0625 or x < -0.0625:
        x /= 2
        k += 1
    s = 1.0
    for n in range(14, 0, -1):
        s = 1 + s * x / float(n)
    for _ in range(k):
        s *= s
    return s


class Box(NamedTuple):
    """A crop box: columns [x, x+w), rows [y, y+h) of the operator's input."""

    x: int
    y: int
    w: int
    h: int


def random_resized_crop_box(
    seed: int,
    epoch: int,
    sample: int,
    op: int,
    width: int,
    height: int,
    scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3.0 / 4.0, 4.0 / 3.0),
) -> Tuple[Box, int]:
    """The box a RandomResizedCrop at position ``op`` cuts from a
    ``width``×``height`` input, and the attempts it took (11: the
    fallback) — torchvision's get_params with Brand's draws."""
    s = stream(seed, epoch, sample, op)
    area = float(width) * float(height)
    lr0, lr1 = det_log(ratio[0]), det_log(ratio[1])
    for attempt in range(1, CROP_ATTEMPTS + 1):
        u1 = s.unit()
        u2 = s.unit()
        target = area * (scale[0] + (scale[1] - scale[0]) * u1)
        aspect = det_exp(lr0 + (lr1 - lr0) * u2)
        w = round(math.sqrt(target * aspect))  # half to even, as torchvision
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = s.bounded(height - h + 1)
            left = s.bounded(width - w + 1)
            return Box(left, top, w, h), attempt
    in_ratio = float(width) / float(height)
    w, h = width, height
    if in_ratio < ratio[0]:
        h = max(1, round(w / ratio[0]))
    elif in_ratio > ratio[1]:
        w = max(1, round(h * ratio[1]))
    return Box((width - w) // 2, (height - h) // 2, w, h), CROP_ATTEMPTS + 1


def flip(seed: int, epoch: int, sample: int, op: int, p: float = 0.5) -> bool:
    """Whether a RandomHorizontalFlip at position ``op`` flips the sample."""
    return stream(seed, epoch, sample, op).unit() < p


def imagenet_train_draws(seed: int, epoch: int, sample: int, width: int, height: int) -> Tuple[Box, bool]:
    """The built-in ``imagenet-train`` pipeline's draws for an image of
    ``width``×``height`` (as stored, or as EXIF orientation shows it when
    the pipeline applies it): its crop box and whether it is flipped."""
    box, _ = random_resized_crop_box(seed, epoch, sample, 0, width, height)
    return box, flip(seed, epoch, sample, 1)


def npy_header(buf) -> Tuple[int, List[int]]:
    """The data offset and shape of a pipeline's ``.npy`` member (uint8, C
    order), read without numpy.

    Raises:
        ValueError: not a ``.npy`` array, or not a C-order uint8 one.
    """
    h = read_header(buf)
    if h.descr != "|u1" or h.fortran:
        raise ValueError(f"brand: a .npy array of {h.descr!r}, fortran_order {h.fortran}: not a C-order uint8 array")
    return h.offset, list(h.shape)


def npy_array(buf):
    """A numpy array viewing ``buf``'s tensor in place (no copy): a
    ``torch.from_numpy`` of it shares the same memory. Needs numpy."""
    import numpy  # noqa: PLC0415 - optional, only for this function

    off, shape = npy_header(buf)
    return numpy.frombuffer(buf, dtype=numpy.uint8, offset=off).reshape(shape)
