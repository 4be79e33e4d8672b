"""PyTorch integration: :class:`BrandDataset`, an ``IterableDataset``.

Importing this module imports :mod:`torch`; the rest of the package does not.

Sharding
--------
The gateway shuffles and cuts the epoch; the dataset only picks its cut. With
``W`` DDP ranks (from :mod:`torch.distributed` when it is initialised, else
the ``RANK`` and ``WORLD_SIZE`` environment variables, else 1) and ``K``
DataLoader workers per rank, the gateway is asked for a world of ``W * K``
server ranks, and worker ``w`` of DDP rank ``r`` reads server rank
``w * W + r``. Every sample of the epoch therefore reaches exactly one
worker of one rank.

Server rank ``w * W + r`` (not ``r * K + w``) is chosen so that the
DataLoader's round-robin over its workers makes every training step consume
a contiguous run of the epoch: step ``j`` (counting from 0) of every DDP rank
is worker ``j % K``'s batch ``j // K``, and over the ``W`` ranks those
batches are epoch positions ``[O + j*W*B, O + (j+1)*W*B)`` exactly, where
``B`` is ``batch_size`` and ``O`` the offset the epoch started from. That is
the same cut as ``K = 1``: the worker count never shows in the order of
steps, only in who fetched them.

Mixtures
--------
A job's ``mix="web:0.7,code:0.3"`` reads a mixture of the gateway's
datasets (the gateway's ``mix=``; see :class:`brand.Job`): each component
is an endless stream of passes over its dataset, and the gateway cuts the
mixture's epoch into *mixing blocks* of ``mix_block`` positions, each
holding every component ``i`` within one sample of ``mix_block * w_i``
(``w_i`` its weight over the weights' sum). Every sample carries
``"__dataset__"``, the dataset it came from.

The dataset asks for ``mix_block = B * W``: the batch size times the DDP
world, not times the workers. The gateway's world is ``W * K`` (its own
default block would be ``B * W * K``), but a trainer step over the ``W``
ranks is the epoch positions ``[O + j*W*B, O + (j+1)*W*B)`` (see above),
which with ``O`` a multiple of ``B * W`` (a fresh epoch, or a resume at the
same world size) is exactly block ``j + O/(B*W)``: every step of the run
holds each component within one sample of ``W * B * w_i``, whatever the
worker count.

The block is part of the order, as the seed is: :meth:`BrandDataset.state_dict`
records the mixture, its block and its epoch length, and
:meth:`BrandDataset.load_state_dict` keeps them when resuming at another
world size, so the rest of the run reads the order it started with,
exactly. Its steps then straddle blocks, so a step holds each component at
its share only on average: a step covering parts of two blocks takes part
of each block's shuffled slots. A dataset whose job gives ``mix_block`` or
``mix_samples`` must give the state's.

Clusters
--------
Given a cluster's peer list (the connection's ``peers``, the list every
``brand serve --peers`` was given) or ``discover``, each worker's client
sends its requests to the home node of its server rank, ``(w * W + r) * N
// (W * K)`` of the ``N`` nodes: that is where the cluster's locality-aware
assignment put that server rank's samples. When the home fails, the client fails over
to the next nodes in order and returns after ``home_retry`` seconds; a home
that accepts connections but does not answer (a stopped process) is
probed after ``probe_after`` seconds and left once its probe goes
unanswered too. Any node serves the same bytes, so the exactly-once rule
holds across failovers. With one worker per rank (``K = 1``) a rank's home
is the torchrun layout's, ``r * N // W``; with more, a rank's workers read
through the homes of their server ranks, which spread over the nodes.

Tensors
-------
With a job's ``transform="imagenet-train"`` (or ``imagenet-eval``, or a
pipeline the gateway's ``--transform-config`` defines) the gateway decodes
and augments every image, each random choice drawn from the sample's key
(docs/transform.md), and each image member arrives as a ``.npy`` member: a
sample is ``{"__key__": key, "npy": tensor, "cls": b"3"}`` with ``tensor``
a ``torch.uint8`` tensor of shape ``(3, H, W)`` (channels R, G, B; ``(H,
W, 3)`` for a pipeline with ``"layout": "hwc"``), 224×224 for the
built-ins. The tensor is built on the received batch's buffer without a
copy (:func:`npy_tensor`); every other member is ``bytes`` as without a
transform, and so is every member of a sample without an image.

:func:`collate_tensors`, the collate of :meth:`BrandDataset.loader` for a
job with a transform, stacks a step's images into one ``(N, 3, H, W)``
uint8 tensor and passes every other member through as a list. In a
DataLoader worker it stacks them into shared memory (as PyTorch's
``default_collate`` does), so the step reaches the trainer's process as a
file descriptor, not a pickled payload; a :class:`BrandLoader`'s workers
reuse those blocks once the trainer's process has let go of them, where
``default_collate`` makes a new one, whose pages the kernel must allocate,
for every step.

Measured with the trainer's processes on one core (``brand-bench
tensors``: 2 workers, batch 64, 224×224 tensors), the trainer's process
tree spends 0.13 ms of CPU an image, 0.12–0.21 with ``num_workers=0``,
against 2.7 ms decoding with torchvision. Of the ways to hand a step
from a worker, stacking it there into one shared block costs the
trainer's own process least (25–38 µs an image); receiving each batch
into one shared block and stacking in the trainer cost it 170 µs, and
letting PyTorch move each sample's tensor to shared memory 180. Normalise
on the accelerator: ``x.float().div_(255)``, then the mean and standard
deviation.

Resuming (exactly once)
-----------------------
The position of a checkpoint is counted in *steps the trainer received*:
after ``n`` steps on every rank, the samples consumed globally are exactly
the epoch positions ``[0, min(N, O + n*W*B))`` (``N`` is the epoch's sample
count), a prefix of the epoch. :meth:`BrandDataset.state_dict` records it
and :meth:`BrandDataset.load_state_dict` resumes there with the gateway's
``offset=``, in O(1), at any world size, worker count, or both. A mixture's
epoch is cut into positions exactly as one dataset's, so the same holds for
it.

The dataset object in the trainer's process cannot see what DataLoader
workers fetched (they may be batches ahead), so the count is taken where the
trainer receives data:

* ``ds.loader(num_workers=..., ...)`` returns a :class:`BrandLoader`, a
  ``DataLoader`` that counts the steps it hands out. It sets the
  DataLoader's ``batch_size`` so that a step is one batch of ``B`` samples
  (``None`` with ``batches=True``, ``B`` otherwise). Use it; then
  ``ds.state_dict()`` (or ``loader.state_dict()``) is exact.
* Iterating the dataset directly (or with ``num_workers=0``) counts the
  samples yielded: the position is ``O + (c // B) * W * B`` for ``c``
  samples, i.e. a checkpoint between steps of ``B`` samples is exact, and a
  checkpoint inside a step rounds down (that step is read again).
* With a plain ``DataLoader`` and workers, pass the number of steps the
  trainer took: ``ds.state_dict(steps=n)``.

DDP ranks advance in lockstep, so every rank computes the same state; save
rank 0's. Requirements for exactness: the DataLoader's default in-order
delivery (``in_order=True``), no ``persistent_workers`` (they would not see
:meth:`set_epoch`), and the same ``seed``, ``window`` and dataset (or
mixture) on resume (they fix the order; ``load_state_dict`` checks them).
The job's name and weight change no byte served: the state keeps the name,
which a dataset given none takes on resume, and not the weight, which the
resumed run gives anew.
"""

from __future__ import annotations

import io
import math
import os
import warnings
from dataclasses import replace
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence

import numpy
import numpy.lib.format as _npy
import torch
import torch.distributed as _dist
from torch.utils.data import DataLoader, IterableDataset, default_collate, get_worker_info

from ._malloc import tune_malloc
from ._options import Options, check_rank, resolve
from ._tar import Sample
from .client import Batch, Client

__all__ = ["BrandDataset", "BrandLoader", "BrandSkipWarning", "collate_tensors", "ddp_world", "npy_tensor"]

_STATE_VERSION = 1
# The batch size of a dataset whose job gives none: it counts its position
# in batches, so it must know theirs (the gateway's default too).
_DEFAULT_BATCH_SIZE = 32


def ddp_world() -> "tuple[int, int]":
    """(world size, rank) of this process: :mod:`torch.distributed` when it is
    initialised, else ``WORLD_SIZE`` and ``RANK`` from the environment (as
    torchrun sets them), else (1, 0)."""
    if _dist.is_available() and _dist.is_initialized():
        return _dist.get_world_size(), _dist.get_rank()
    return int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))


# A .npy header's bytes -> (data offset, shape, fortran order, torch dtype,
# elements). A pipeline's tensors share a few headers, so each is parsed
# once, by numpy's own rules, rather than once an image.
_NpyHeader = "tuple[int, tuple, bool, torch.dtype, int]"
_npy_headers: Dict[bytes, _NpyHeader] = {}
_NPY_HEADERS_KEPT = 256


def _npy_header(mv: memoryview) -> _NpyHeader:
    if len(mv) < 10 or bytes(mv[:6]) != b"\x93NUMPY":
        raise ValueError("brand: not a .npy array (no \\x93NUMPY magic)")
    major = mv[6]
    size = 2 if major == 1 else 4
    if len(mv) < 8 + size:
        raise ValueError("brand: a .npy array cut inside its header")
    end = 8 + size + int.from_bytes(mv[8 : 8 + size], "little")
    head = bytes(mv[:end])
    got = _npy_headers.get(head)
    if got is not None:
        return got
    fp = io.BytesIO(head)
    version = _npy.read_magic(fp)
    if version == (1, 0):
        shape, fortran, dtype = _npy.read_array_header_1_0(fp)
    else:
        shape, fortran, dtype = _npy.read_array_header_2_0(fp)
    if dtype.hasobject or not dtype.isnative and dtype.itemsize > 1:
        raise ValueError(f"brand: a .npy array of {dtype}: only native-endian numbers can be viewed in place")
    tdtype = torch.from_numpy(numpy.empty(0, dtype=dtype)).dtype
    got = (end, tuple(shape), bool(fortran), tdtype, math.prod(shape))
    if len(_npy_headers) >= _NPY_HEADERS_KEPT:
        _npy_headers.clear()
    _npy_headers[head] = got
    return got


def npy_tensor(buf: Any) -> torch.Tensor:
    """The array a ``.npy`` member holds (a :class:`brand.Client`'s
    ``memoryview`` of a transformed batch), as a tensor on the same memory:
    no copy. The header is read by ``numpy.lib.format``'s rules (versions
    1.0 to 3.0, any numeric dtype, C or Fortran order); a gateway's
    pipelines write uint8, C order, ``(3, H, W)`` or ``(H, W, 3)``.

    A read-only buffer (``bytes``) is copied first: PyTorch has no
    read-only tensors.

    Raises:
        ValueError: ``buf`` is not a ``.npy`` array this can view, or is
            shorter than its header says.
    """
    mv = memoryview(buf).cast("B")
    off, shape, fortran, dtype, count = _npy_header(mv)
    size = torch.empty(0, dtype=dtype).element_size() * count
    if len(mv) - off < size:
        raise ValueError(f"brand: a .npy array of shape {shape} needs {size} bytes, has {len(mv) - off}")
    if mv.readonly:
        mv = memoryview(bytearray(mv[: off + size]))
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    t = torch.frombuffer(mv, dtype=dtype, count=count, offset=off)
    if fortran:
        return t.view(shape[::-1]).permute(*reversed(range(len(shape))))
    return t.view(shape)


def collate_tensors(samples: Sequence[Any]) -> Any:
    """A DataLoader's ``collate_fn`` for samples with tensors (a job with a
    ``transform``): a list of sample dicts becomes one dict of columns,
    each key's tensors stacked into one tensor (``N`` of ``(3, H, W)``
    uint8 images: ``(N, 3, H, W)``) and every other value (``__key__``,
    ``cls``, ``__dataset__``, ...) a list, as it is. Tuples of equal length
    (a ``decode`` that returns ``(image, label)``) are collated column by
    column alike; a list of tensors is stacked.

    In a DataLoader worker the stack is made in shared memory, so that the
    step reaches the trainer's process without its pixels being pickled
    (``torch.utils.data.default_collate`` stacks so).

    Raises:
        ValueError: samples with other keys than the first's, or one key's
            tensors of different shapes (a pipeline without a crop to a
            fixed size: collate those as lists).
    """
    if not samples:
        return []
    first = samples[0]
    if isinstance(first, Mapping):
        keys = list(first.keys())
        for s in samples:
            if len(s) != len(keys) or any(k not in s for k in keys):
                raise ValueError(f"brand: collate_tensors: sample {s.get('__key__', '?')!r} has members "
                                 f"{sorted(s)}, the first {sorted(keys)}")
        return {k: _column(k, [s[k] for s in samples]) for k in keys}
    if isinstance(first, tuple):
        n = len(first)
        if any(len(s) != n for s in samples):
            raise ValueError("brand: collate_tensors: tuples of different lengths")
        return tuple(_column(str(i), [s[i] for s in samples]) for i in range(n))
    return _column("", list(samples))


def _column(name: str, values: List[Any]) -> Any:
    """One key's values: stacked if tensors, else the list."""
    first = values[0]
    if not isinstance(first, torch.Tensor):
        return values
    shape = first.shape
    for v in values:
        if not isinstance(v, torch.Tensor) or v.shape != shape:
            got = sorted({tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__ for x in values},
                         key=str)
            raise ValueError(f"brand: collate_tensors: {name!r} holds {got}; stacking needs one shape")
    if first.dtype == torch.uint8 and not first.is_cuda:
        info = get_worker_info()
        blocks = getattr(info.dataset, "_blocks", None) if info is not None else None
        if blocks is not None:
            out = blocks.take(len(values) * first.numel(), (len(values), *shape))
            if out is not None:
                return torch.stack(values, out=out)
    return default_collate(values)


# -- shared-memory blocks, reused ----------------------------------------------
#
# A DataLoader worker hands each step to the trainer's process in shared
# memory; PyTorch's default_collate makes a new block for every step, and
# a new block's pages are allocated and zeroed by the kernel: 140 µs per
# 150 KB image on a small VM, several times the rest of a worker's work.
# So a BrandLoader's workers stack uint8 steps into blocks they keep and
# reuse once the trainer's process has let go of them. A block is reused
# only when a flag says so, and only the trainer's process clears the
# flag: when no tensor there refers to the block's memory any more (its
# storage's weak reference has expired, which views keep alive too). A
# step the loader never saw (a plain DataLoader, or pin_memory's copies)
# leaves its flag set: that block is never reused, and past the pool's
# size the worker makes new blocks as PyTorch does.

_BLOCK_MAGIC = b"BRANDBLK"
_BLOCK_HEAD = 64  # magic, slot number (4 bytes, little-endian), padding
_BLOCKS_PER_WORKER = 6


def _storage(t: torch.Tensor) -> Any:
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


class _Board:
    """Flags shared by a BrandLoader's process and its workers, one per
    block: 1 while the trainer's process may hold the block, 0 free.
    Made in the loader's process before the workers start, which then share
    it (inherited, or passed as shared memory when workers are spawned)."""

    def __init__(self, workers: int) -> None:
        self.flags = torch.zeros(max(1, workers) * _BLOCKS_PER_WORKER, dtype=torch.uint8).share_memory_()
        self.held: List["tuple[Any, int]"] = []  # (weak reference, slot) in the loader's process

    def received(self, item: Any) -> None:
        """In the loader's process: frees the blocks no tensor refers to any
        more, and notes those of ``item`` (a collated step)."""
        from torch.multiprocessing.reductions import StorageWeakRef

        kept = []
        for ref, slot in self.held:
            if ref.expired():
                self.flags[slot] = 0
            else:
                kept.append((ref, slot))
        self.held = kept
        values = item.values() if isinstance(item, Mapping) else item if isinstance(item, (tuple, list)) else ()
        for v in values:
            if isinstance(v, torch.Tensor) and v.dtype == torch.uint8 and v.storage_offset() == _BLOCK_HEAD:
                st = _storage(v)
                head = torch.empty(0, dtype=torch.uint8).set_(st, 0, (12,), (1,)).numpy().tobytes()
                slot = int.from_bytes(head[8:12], "little")
                if head[:8] == _BLOCK_MAGIC and slot < len(self.flags):
                    self.held.append((StorageWeakRef(st), slot))

    def __getstate__(self) -> Dict[str, Any]:
        # Spawned workers get the flags; what this process holds is its own.
        return {"flags": self.flags, "held": []}


class _Blocks:
    """A DataLoader worker's blocks: slots ``worker * _BLOCKS_PER_WORKER``
    on of the board."""

    def __init__(self, board: _Board, worker: int) -> None:
        self.board = board
        self.first = worker * _BLOCKS_PER_WORKER
        self.blocks: List[Optional[torch.Tensor]] = [None] * _BLOCKS_PER_WORKER  # each whole block, uint8

    def take(self, nbytes: int, shape: Sequence[int]) -> Optional[torch.Tensor]:
        """A uint8 tensor of ``shape`` (``nbytes`` elements) in a free
        block, which is marked held; ``None`` when every block is held."""
        flags = self.board.flags
        free = None
        for i, b in enumerate(self.blocks):
            if flags[self.first + i] != 0:
                continue
            if b is not None and b.numel() - _BLOCK_HEAD >= nbytes:
                free = i
                break
            if free is None:
                free = i
        if free is None:
            return None
        b = self.blocks[free]
        if b is None or b.numel() - _BLOCK_HEAD < nbytes:
            st = torch.UntypedStorage._new_shared(_BLOCK_HEAD + nbytes)
            b = torch.empty(0, dtype=torch.uint8).set_(st, 0, (_BLOCK_HEAD + nbytes,), (1,))
            b[:12] = torch.frombuffer(bytearray(_BLOCK_MAGIC + (self.first + free).to_bytes(4, "little")),
                                      dtype=torch.uint8)
            self.blocks[free] = b
        flags[self.first + free] = 1
        strides = [1] * len(shape)
        for k in range(len(shape) - 2, -1, -1):
            strides[k] = strides[k + 1] * shape[k + 1]
        return torch.empty(0, dtype=torch.uint8).set_(_storage(b), _BLOCK_HEAD, tuple(shape), tuple(strides))


def _tensors(batch: List[Sample]) -> None:
    """A transformed batch's .npy members (memoryviews of its buffer) as
    tensors on that buffer, in place."""
    for s in batch:
        for k, v in s.items():
            if type(v) is memoryview:
                s[k] = npy_tensor(v)


class BrandDataset(IterableDataset):
    """An epoch of a Brand gateway's dataset, shuffled and sharded by the gateway.

    Yields samples (dicts in WebDataset's convention, ``{"__key__": key,
    "jpg": b"...", "cls": b"..."}``, each passed through ``decode`` if given),
    or, with ``batches=True``, one list per batch of ``batch_size`` samples
    (passed through ``collate`` if given); use ``DataLoader(ds,
    batch_size=None)`` for those, or :meth:`loader`, which does.

    With the job's ``transform`` (``transform="imagenet-train"``) each image
    member is a ``torch.uint8`` tensor made by the gateway, on the received
    buffer (see the module documentation's *Tensors*); collate them with
    :func:`collate_tensors`. A sample the gateway left out (its image could
    not be transformed, on a gateway run with ``--on-bad-image=skip``; or
    its chunk is damaged, with ``--on-damaged-chunk=skip``) is not yielded,
    and a warning names it; without skip mode such a batch raises
    :class:`brand.BrandError` (422) naming it.

    Every sample of the epoch is delivered exactly once over all DDP ranks
    and DataLoader workers (see the module documentation for the cut).
    With ``mix``, the samples of a mixture of datasets, each tagged with its
    dataset (``"__dataset__"``).
    Call :meth:`set_epoch` before each epoch, as with ``DistributedSampler``.

    Args:
        url: the gateway, e.g. ``"http://brand:8080"``; with
            ``connection.peers`` it may be empty.
        options: the job read, how the gateways are reached and how the
            clients behave (:class:`brand.Options`), as a
            :class:`brand.Client` takes them, with these differences: the
            job's ``batch_size`` left ``None`` is 32, its ``world`` and
            ``rank`` left ``None`` are the DDP world and rank
            (:func:`ddp_world`), its ``mix_block`` left ``None`` is
            ``batch_size`` times the DDP world (not times the DataLoader
            workers, so that every trainer step over the ranks is one block
            and holds each component within one sample of its share; see
            the module documentation), and its ``offset`` must be 0 (resume
            with :meth:`load_state_dict`). Every worker's client reads with
            the same options, its own world, rank and offset, and the same
            ``name`` and ``weight``: the workers and ranks of a run are one
            job.
        decode: applied to each sample in the worker, e.g. to make tensors
            (with a ``transform``, to the sample with its tensors).
        batches: yield whole batches instead of samples.
        collate: with ``batches=True``, applied to each batch's list of
            (decoded) samples, e.g. ``torch.utils.data.default_collate``.
        **keywords: the options' fields by the flat names of the first
            releases (``batch_size=64, seed=7, peers=...``), applied over
            ``options``, as :class:`brand.Client` takes them.

    Raises:
        ValueError: an option no gateway would take (checked here, in the
            trainer's process, rather than in the first worker that makes a
            client), a batch size below 1, an offset, or ``collate``
            without ``batches``.
        TypeError: an unknown keyword.

    Example::

        job = brand.Job(batch_size=64, seed=7)   # or mix="web:0.7,code:0.3"
        ds = BrandDataset("http://brand:8080", brand.Options(job=job), decode=decode)
        loader = ds.loader(num_workers=4)
        # or tensors made by the gateway, stacked by collate_tensors:
        # job = brand.Job(batch_size=64, seed=7, transform="imagenet-train")
        # for batch in ds.loader(): x = batch["npy"]   # uint8, (64, 3, 224, 224)
        for epoch in range(start_epoch, epochs):
            ds.set_epoch(epoch)
            for batch in loader:
                train(batch)
                if time_to_checkpoint():
                    save({"model": ..., "data": ds.state_dict()})
    """

    def __init__(
        self,
        url: str = "",
        options: Optional[Options] = None,
        *,
        decode: Optional[Callable[[Sample], Any]] = None,
        batches: bool = False,
        collate: Optional[Callable[[List[Any]], Any]] = None,
        **keywords: Any,
    ) -> None:
        super().__init__()
        opts = resolve(options, keywords, "BrandDataset")
        job = opts.job
        if job.batch_size is None:
            job = replace(job, batch_size=_DEFAULT_BATCH_SIZE)
        if job.batch_size is None or job.batch_size < 1:
            raise ValueError(f"brand: batch_size {job.batch_size} must be >= 1")
        if job.offset:
            raise ValueError(f"brand: offset {job.offset}: a BrandDataset resumes an epoch with load_state_dict")
        if collate is not None and not batches:
            raise ValueError("brand: collate applies to batches=True; with samples, give it to the DataLoader")
        #: The options every worker's client reads with (its world, rank and
        #: offset aside): those given, the batch size filled in, and what
        #: :meth:`load_state_dict` (the job's name, a mixture's block and
        #: length) and :meth:`set_importance` (the version) set since.
        self.options: Options = replace(opts, job=job)
        self.url = url
        self.decode = decode
        self.batches = batches
        self.collate = collate
        if opts.tune_malloc:
            # The trainer's process unpickles every batch its workers send:
            # memory reused, not faulted in anew (see brand.tune_malloc).
            tune_malloc()
        self.epoch = 0
        # Resume point: (epoch, position) from load_state_dict.
        self._resume: Optional["tuple[int, int]"] = None
        # Progress of the current pass, kept in the trainer's process.
        self._base = 0  # the offset the pass started from
        self._units = 0  # steps (of batch_size samples per rank) received
        self._samples_seen = 0  # samples received, when iterated directly
        self._pass_world = 1
        self._complete = False
        self._by_loader = False
        self._epoch_samples: Dict[int, int] = {}
        #: The index version every client of this dataset reads: the job's
        #: ``index``, or the one the first epoch plan named (kept in
        #: :meth:`state_dict`). :meth:`loader` learns it in the trainer's
        #: process, before its workers start, so that they all read one
        #: version.
        self.index: Optional[str] = job.index

    @property
    def batch_size(self) -> int:
        """Samples per rank per step: the job's batch size, 32 if it gave none."""
        b = self.options.job.batch_size
        assert b is not None  # filled in by __init__
        return b

    @property
    def mix(self) -> Optional[str]:
        """The mixture read, as :func:`brand.format_mix` writes it; ``None``
        for one dataset."""
        m = self.options.job.mix
        return None if m is None else str(m)

    @property
    def mix_samples(self) -> Optional[int]:
        """The mixture epoch's length as given (``None``: the gateway's
        default), or as restored by :meth:`load_state_dict`."""
        return self.options.job.mix_samples

    # -- epochs and positions -----------------------------------------------

    def _world(self) -> "tuple[int, int]":
        """The DDP (world, rank): the job's, else :func:`ddp_world`'s."""
        job = self.options.job
        w, r = ddp_world()
        world = job.world if job.world is not None else w
        rank = job.rank if job.rank is not None else (r if job.world is None else 0)
        check_rank(world, rank)
        return world, rank

    def _offset(self, epoch: int) -> int:
        if self._resume is not None and self._resume[0] == epoch:
            return self._resume[1]
        return 0

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` next (each epoch has its own order). An epoch
        restored by :meth:`load_state_dict` resumes where it stopped."""
        if epoch != self.epoch:
            self._start_pass(epoch)

    def set_importance(self, version: Optional[str]) -> None:
        """With an importance-sampled job: draw the epochs read from now on
        from snapshot ``version`` (what rank 0's :meth:`brand.Client.seal`
        returned, or every rank's :meth:`brand.Client.version_for`). Call it
        before :meth:`set_epoch`; DataLoader workers started afterwards read
        with it."""
        job = self.options.job
        if job.importance is None:
            raise ValueError("brand: set_importance needs a job sampled by importance (Job.importance, "
                             "importance_job=)")
        job = replace(job, importance=replace(job.importance, version=version))
        self.options = replace(self.options, job=job)

    def _start_pass(self, epoch: int) -> None:
        self.epoch = epoch
        self._base = self._offset(epoch)
        self._units = 0
        self._samples_seen = 0
        self._complete = False
        self._pass_world = self._world()[0]

    @property
    def mix_block(self) -> Optional[int]:
        """The mixing block of the mixture (``None`` without one): the job's
        ``mix_block``, given or restored by :meth:`load_state_dict`, else
        ``batch_size`` times the DDP world (:func:`ddp_world` unless the
        job gives ``world``)."""
        job = self.options.job
        if job.mix is None:
            return None
        if job.mix_block is not None:
            return job.mix_block
        return self.batch_size * self._world()[0]

    def _client(self, world: int, rank: int, offset: int) -> Client:
        """The client of server rank ``rank`` of ``world``: this dataset's
        options, with that cut, ``offset``, the block and the index pinned."""
        job = replace(self.options.job, world=world, rank=rank, offset=offset, mix_block=self.mix_block,
                      index=self.index)
        return Client(self.url, replace(self.options, job=job))

    def samples_in_epoch(self, epoch: Optional[int] = None) -> int:
        """The number of samples in ``epoch`` (all ranks), from the gateway."""
        e = self.epoch if epoch is None else epoch
        if e not in self._epoch_samples:
            with self._client(1, 0, 0) as c:
                self._epoch_samples[e] = int(c.epoch_info(e)["samples"])
                self.index = c.index
        return self._epoch_samples[e]

    def position(self, steps: Optional[int] = None) -> int:
        """Samples of the current epoch consumed globally: ``min(N, O +
        steps * W * B)`` (see the module documentation). ``steps`` defaults
        to the steps counted by :meth:`loader` or by direct iteration."""
        n = self.samples_in_epoch()
        if steps is None:
            if self._complete:
                return n
            steps = self._units
        return min(n, self._base + steps * self._pass_world * self.batch_size)

    def state_dict(self, steps: Optional[int] = None) -> Dict[str, Any]:
        """The data position, to save with a checkpoint (rank 0's suffices).

        Besides the position and what fixes the order (with a mixture: the
        mixture, its block and its epoch length, ``"mix"``, ``"mix_block"``
        and ``"mix_samples"``), the state keeps the job's name (``"job"``:
        :attr:`brand.Job.sent_name`, the name or the importance job's,
        ``None`` for an unnamed job), so that a resumed run is the same job
        to the gateway. Not its ``weight``: a share of the cache
        against the jobs running at the time, given anew on resume.

        Args:
            steps: steps the trainer received in this epoch on each rank; only
                needed with a plain ``DataLoader`` with workers, which this
                object cannot observe. :meth:`loader` counts them.
        """
        return {
            "version": _STATE_VERSION,
            "epoch": self.epoch,
            "position": self.position(steps),
            "samples": self.samples_in_epoch(),
            "seed": self.options.job.seed,
            "window": self.options.job.window,
            "dataset": self.options.job.dataset,
            "mix": self.mix,
            "mix_block": self.mix_block,
            "mix_samples": self.samples_in_epoch() if self.mix is not None else None,
            "index": self.index,
            "job": self.options.job.sent_name,
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`'s ``state``: the next pass over its
        epoch starts at its position, at any world size and worker count.

        A dataset whose job has no name (neither ``name`` nor
        ``importance``) takes the state's; one given a name keeps it: a name changes no
        byte served, so another one is no error.

        A mixture's block and epoch length are part of its order: a dataset
        that left ``mix_block`` or ``mix_samples`` to their defaults takes
        the state's (its block is no longer ``batch_size`` times this
        world's size when that changed), which its later states record.

        Raises:
            ValueError: the state was saved with another seed, window,
                dataset or mixture, or with another ``mix_block`` or
                ``mix_samples`` than this dataset was given, which give
                another order.
        """
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"brand: state version {state.get('version')!r}, want {_STATE_VERSION}")
        job = self.options.job
        for k, have in (("seed", job.seed), ("window", job.window), ("dataset", job.dataset), ("mix", self.mix)):
            if state.get(k) != have:
                raise ValueError(
                    f"brand: state saved with {k}={state.get(k)!r} cannot resume a dataset with "
                    f"{k}={have!r}: the epoch order would differ"
                )
        if self.mix is not None:
            job = replace(job, **self._mix_of_state(state))
        # The job keeps its name: one given to this dataset wins, as a
        # name changes no byte served.
        if job.sent_name is None and state.get("job") is not None:
            job = replace(job, name=state["job"])
        # Nothing changes before every check has passed (replace checks the name).
        self.options = replace(self.options, job=job)
        # The order of the saved position is the saved index version's: a
        # gateway that no longer holds it answers 409, and the client
        # raises IndexChangedError rather than read another order.
        if state.get("index"):
            self.index = state["index"]
        self._resume = (int(state["epoch"]), int(state["position"]))
        self._epoch_samples[int(state["epoch"])] = int(state["samples"])
        self._start_pass(int(state["epoch"]))

    def _mix_of_state(self, state: Dict[str, Any]) -> Dict[str, int]:
        """The mixing block and epoch length (``mix_block``, ``mix_samples``)
        a state resumes with, checked against those given to this dataset
        (the mixtures are equal)."""
        job = self.options.job
        block, length = int(state["mix_block"]), int(state["mix_samples"])
        if job.mix_block is not None and job.mix_block != block:
            raise ValueError(
                f"brand: state saved with mix_block={block} cannot resume a dataset with "
                f"mix_block={job.mix_block}: the epoch order would differ (leave mix_block unset to take the state's)"
            )
        # The gateway rounds an epoch's length up to whole blocks.
        if job.mix_samples is not None and -(-job.mix_samples // block) * block != length:
            raise ValueError(
                f"brand: state saved with an epoch of {length} samples (mix_samples) cannot resume a dataset with "
                f"mix_samples={job.mix_samples}: the epoch order would differ (leave mix_samples unset to take "
                "the state's)"
            )
        return {"mix_block": block, "mix_samples": length}

    def _finish_pass(self) -> None:
        self._complete = True
        if self._resume is not None and self._resume[0] == self.epoch:
            self._resume = None  # a second pass over the epoch is a whole one

    # -- iteration --------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        world, rank = self._world()
        info = get_worker_info()
        workers, wid = (info.num_workers, info.id) if info is not None else (1, 0)
        in_trainer = info is None and not self._by_loader
        board = getattr(self, "_board", None)
        if info is not None and board is not None:
            # collate_tensors finds them through the worker's dataset
            self._blocks = _Blocks(board, wid)
        offset = self._offset(self.epoch)
        if in_trainer:
            self._start_pass(self.epoch)
        client = self._client(world * workers, wid * world + rank, offset)
        B = self.batch_size
        try:
            plan = client.epoch_info(self.epoch)
            rank_samples = int(plan["rank_samples"])
            for batch in client.epoch(self.epoch, plan):
                if batch.missing:
                    _warn_missing(batch)
                    if in_trainer and not self.batches:
                        # The samples left out are consumed positions too.
                        self._samples_seen += batch.missing
                        self._units = self._samples_seen // B
                        self._complete = self._samples_seen >= rank_samples
                if not batch:
                    if in_trainer and self.batches and batch.missing:
                        self._units += 1  # a step all of whose samples were left out
                    continue  # an empty final slice; nothing follows it
                if batch.transform is not None:
                    _tensors(batch)
                if self.decode is not None:
                    batch = [self.decode(s) for s in batch]
                if self.batches:
                    if in_trainer:
                        self._units += 1
                    yield self.collate(batch) if self.collate is not None else batch
                    continue
                for s in batch:
                    if in_trainer:
                        self._samples_seen += 1
                        self._units = self._samples_seen // B
                        if self._samples_seen >= rank_samples:
                            self._complete = True
                    yield s
            if in_trainer:
                self._finish_pass()
        finally:
            client.close()

    def loader(self, **kwargs: Any) -> "BrandLoader":
        """A :class:`BrandLoader` over this dataset: a ``DataLoader`` whose
        steps are batches of ``batch_size`` samples, counted for
        :meth:`state_dict`. Takes ``DataLoader``'s arguments (``num_workers``,
        ``collate_fn``, ``pin_memory``, ...); a job with a ``transform``
        collates with :func:`collate_tensors` unless told otherwise."""
        return BrandLoader(self, **kwargs)


def _warn_missing(batch: Batch) -> None:
    keys = ", ".join(batch.missing_keys[:8]) + (", ..." if len(batch.missing_keys) > 8 else "")
    warnings.warn(f"brand: the gateway left out {batch.missing} sample(s) of a batch: {keys}", BrandSkipWarning,
                  stacklevel=3)


class BrandSkipWarning(UserWarning):
    """Samples a gateway in skip mode left out of a batch (their keys in the
    message; :attr:`brand.Batch.missing_keys` for a :class:`brand.Client`)."""


class BrandLoader(DataLoader):
    """A ``DataLoader`` over a :class:`BrandDataset` that counts the steps it
    hands to the trainer, so that the dataset's :meth:`~BrandDataset.state_dict`
    is exact with any number of workers. Build it with
    :meth:`BrandDataset.loader`."""

    def __init__(self, dataset: BrandDataset, **kwargs: Any) -> None:
        want = None if dataset.batches else dataset.batch_size
        if kwargs.setdefault("batch_size", want) != want:
            raise ValueError(
                f"brand: a BrandLoader step is one gateway batch: batch_size must be {want!r}, "
                f"got {kwargs['batch_size']!r}"
            )
        if kwargs.get("persistent_workers"):
            raise ValueError("brand: persistent_workers would not see set_epoch or load_state_dict")
        if not dataset.batches:
            kwargs.setdefault("drop_last", False)
            if dataset.options.job.transform is not None:
                kwargs.setdefault("collate_fn", collate_tensors)
        super().__init__(dataset, **kwargs)

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        ds: BrandDataset = self.dataset  # type: ignore[assignment]
        ds._start_pass(ds.epoch)
        ds.samples_in_epoch()  # learns the index version its workers read
        # With num_workers=0 the dataset runs in this process; it must not
        # count samples itself while this loader counts steps.
        ds._by_loader = True
        # Workers stack steps into shared blocks that this process frees
        # for reuse as it lets go of them (see _Blocks).
        board = _Board(self.num_workers) if self.num_workers > 0 else None
        ds._board = board
        try:
            for item in super().__iter__():
                ds._units += 1
                if board is not None:
                    board.received(item)
                yield item
            ds._finish_pass()
        finally:
            ds._by_loader = False
            ds._board = None

    def state_dict(self, steps: Optional[int] = None) -> Dict[str, Any]:
        """The dataset's :meth:`~BrandDataset.state_dict`."""
        return self.dataset.state_dict(steps)  # type: ignore[attr-defined]

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """The dataset's :meth:`~BrandDataset.load_state_dict`."""
        self.dataset.load_state_dict(state)  # type: ignore[attr-defined]
