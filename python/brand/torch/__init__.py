"""PyTorch integration: :class:`BrandDataset`, an ``IterableDataset`` that a
gateway shuffles and cuts for every DDP rank and DataLoader worker, and
:class:`BrandLoader`, the ``DataLoader`` that counts the steps it hands out,
so that a checkpoint's data position is exact.

Importing this package imports :mod:`torch`; the rest of ``brand`` does not.
The guide (the cut, mixtures, clusters, tensors, resuming exactly once) is
python/README.md's "PyTorch" and the sections after it.

Its modules, each one job:

* ``_entries``: the entries, each the arguments its kind needs, checked
  by the gateway's table of features when made.
* ``_batches``: the type each entry yields, and the collate that makes it.
* ``_buckets``: :class:`Buckets`, a bucket job's entry (images batched by
  shape, each worker its own steps), :class:`BucketBatch` and
  :class:`ClipBucketBatch`.

* ``_dataset``: :class:`BrandDataset` (the cut of each worker of each rank,
  epochs, positions, ``state_dict``/``load_state_dict``), :func:`ddp_world`,
  :class:`BrandSkipWarning`.
* ``_loader``: :class:`BrandLoader`, which counts steps through the
  dataset's iteration methods (``begin_iteration``, ``step_received``, ``end_iteration``),
  hands its workers their shared blocks and frees them as the trainer lets
  go of them, and hands persistent workers each iteration's state.
* ``_sequences``: :func:`sequence_tensors`, a token job's batch as
  ``(B, seq)`` int32 tensors on its buffer.
* ``_clips``: :func:`clip_tensors`, a clip job's batch as ``(B, T, H, W,
  3)`` uint8 tensors (and a LeRobot dataset's columns) on its buffer.
* ``_tensors``: :func:`npy_tensor`, a ``.npy`` member as a tensor on the
  batch's buffer, and :func:`collate_tensors`, which stacks a step's images.
* ``_shm``: the shared-memory blocks a loader's workers stack steps into and
  reuse, the ``worker_init_fn`` that hands them to each worker, and the
  header a loader writes each iteration's state into for persistent workers.
"""

from ._batches import ClipBatch, SampleBatch, SequenceBatch, TensorBatch, WindowBatch
from ._buckets import BucketBatch, BucketLoader, Buckets, ClipBucketBatch
from ._clips import clip_tensors
from ._dataset import BrandDataset, BrandSkipWarning, ddp_world
from ._entries import Clips, GPUTensors, LeRobot, Samples, Sequences, Tensors
from ._gpu import CutBatch, cut_batch, finish
from ._loader import BrandLoader
from ._sequences import sequence_tensors
from ._tensors import collate_tensors, npy_tensor

__all__ = ["BucketBatch", "BucketLoader", "Buckets", "BrandDataset", "BrandLoader", "BrandSkipWarning", "ClipBatch",
           "ClipBucketBatch", "Clips", "CutBatch", "GPUTensors", "LeRobot", "SampleBatch",
           "Samples", "SequenceBatch", "Sequences", "TensorBatch", "Tensors", "WindowBatch", "clip_tensors",
           "collate_tensors", "cut_batch", "ddp_world", "finish", "npy_tensor", "sequence_tensors"]

# Named where users import them from, as before the package was split: in
# reprs, help() and pickles (a dataset sent to spawned workers).
for _public in (BucketBatch, BucketLoader, Buckets, BrandDataset, BrandLoader, BrandSkipWarning, ClipBatch,
                ClipBucketBatch, Clips, CutBatch, GPUTensors, LeRobot, SampleBatch, Samples, cut_batch, finish,
                SequenceBatch, Sequences, TensorBatch, Tensors, WindowBatch, clip_tensors, collate_tensors, ddp_world,
                npy_tensor, sequence_tensors):
    _public.__module__ = __name__
del _public
