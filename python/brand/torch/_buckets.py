"""The entry of a bucket job: a dataset's images batched by shape
(docs/http-api.md, "Shape buckets"), each step one bucket.

Its worker sharding differs from the other entries': a bucket job's steps
are cut for the job's world size alone, and DataLoader worker ``w`` of
``k`` reads steps ``w, w + k, w + 2k, ...``, which a DataLoader hands on
in order. So the steps, and where an epoch stopped, do not depend on the
number of workers, and a run resumes at any world size and worker count
(:meth:`Buckets.load_state_dict`) with ``resume=`` legs: the steps taken
at each world size so far.
"""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

import numpy
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from .. import edits
from .._options import Options, check_rank
from ..client import Batch, Client
from ._dataset import ddp_world
from ._shm import Blocks, Board, WorkerInit, worker_blocks, worker_iteration
from ._tensors import npy_tensor

_STATE_VERSION = 1

# The job's fields a state must agree on to resume: they fix the epoch's
# order and its buckets.
_ORDER = ("seed", "window", "dataset", "mix", "mix_schedule", "buckets", "budget", "budget_tokens", "vae", "patch", "vae_t",
          "max_upscale", "small", "stride", "fps")
# (crop and flip change an image's pixels, not the steps, and clip_start
# a clip's frames: a state resumes a dataset of either. stride and fps set
# each video's frames, which its clip bucket is chosen by.)


class BucketShape(NamedTuple):
    """A bucket: every image of its steps is ``height`` × ``width``. A
    NamedTuple, so that a DataLoader's conversion keeps it one."""

    height: int
    width: int


class ClipBucketShape(NamedTuple):
    """A clip bucket: every clip of its steps is ``frames`` frames of
    ``height`` × ``width``."""

    height: int
    width: int
    frames: int


class BucketBatch(NamedTuple):
    """A step of :class:`brand.Buckets`: ``B`` images of one bucket.

    Attributes:
        images: ``torch.uint8`` ``(B, 3, H, W)``: each image resized to
            cover the bucket, cropped to it at the centre, flipped as drawn.
            A view of the batch as received: each image is contiguous, and
            the batch dimension strides over the archive's headers between
            them (``.contiguous()`` copies), as a clip step's frames do.
        bucket: the bucket, ``(H, W)`` (a :class:`BucketShape`).
        original_sizes: ``int64`` ``(B, 2)``: each image's displayed
            ``(height, width)`` (SDXL's ``original_size``).
        crops: ``int64`` ``(B, 2)``: the crop's ``(top, left)`` in the
            image resized to cover (SDXL's ``crop_coords_top_left``).
        flips: ``bool`` ``(B,)``: whether each image was flipped.
        keys: each sample's key.
        members: each other member of the samples (a caption ``txt``, a
            ``json``), by extension, a list of ``bytes`` in batch order.
        source: a bucketed mixture's step's source (its dataset's name),
            ``None`` for a job of one dataset.
    """

    images: torch.Tensor
    bucket: BucketShape
    original_sizes: torch.Tensor
    crops: torch.Tensor
    flips: torch.Tensor
    keys: List[str]
    members: Dict[str, List[Any]]
    source: Optional[str] = None


class ClipBucketBatch(NamedTuple):
    """A step of :class:`brand.Buckets` over a tree of videos (clip
    buckets, ``HxWxT``): ``B`` clips of one bucket.

    Attributes:
        frames: ``torch.uint8`` ``(B, T, H, W, 3)`` (or the job's
            ``clip_layout``): each clip's frames resized to cover the
            bucket, cropped to it at the centre, flipped as drawn, every
            frame of a clip alike.
        bucket: the bucket, ``(H, W, T)`` (a :class:`ClipBucketShape`).
        original_sizes: ``int64`` ``(B, 2)``: each video's ``(height,
            width)``.
        crops: ``int64`` ``(B, 2)``: the crop's ``(top, left)`` in the
            frames resized to cover.
        flips: ``bool`` ``(B,)``: whether each clip was flipped.
        keys: each clip's key (its video's, without the extension, and
            ``/seg000000``).
        members: the clips' other members, by extension (``json``: the
            video, frame numbers and timestamps; ``cls``: its label).
        source: a bucketed mixture's step's source (its dataset's name),
            ``None`` for a job of one dataset.
    """

    frames: torch.Tensor
    bucket: ClipBucketShape
    original_sizes: torch.Tensor
    crops: torch.Tensor
    flips: torch.Tensor
    keys: List[str]
    members: Dict[str, List[Any]]
    source: Optional[str] = None


def _empty(shape: Tuple[int, ...], blocks: Optional[Blocks] = None) -> torch.Tensor:
    """An uninitialised uint8 tensor of shape: in a worker of
    :meth:`Buckets.loader`, in one of its shared blocks, reused from step
    to step once the trainer lets go of a step (its pages mapped once);
    else private (a plain DataLoader's worker copies it into new shared
    memory to send it)."""
    n = 1
    for d in shape:
        n *= d
    if blocks is not None:
        t = blocks.take(n, shape)
        if t is not None:
            return t
    return torch.empty(shape, dtype=torch.uint8)


def _stacked(samples: List[Any], ext: str, blocks: Optional[Blocks]) -> Optional[torch.Tensor]:
    """The ``ext`` members of ``samples`` (``.npy`` views of one batch
    buffer, as the client hands them) as one ``(B, ...)`` tensor on that
    buffer, without a copy: the gateway writes a batch's samples alike
    (their members in one order, small ones such as ``cls`` padded to the
    tar's 512-byte blocks), so each image starts one stride after the one
    before. The batch dimension then strides over the tar's headers
    between the images (each image itself is contiguous), as a clip
    step's frames do. In a worker of :meth:`Buckets.loader` the buffer is
    one of its shared blocks (the body was read there), and the tensor
    reaches the trainer's process by reference. ``None`` when the images
    are not evenly spaced or not alike (members of varying length, such
    as captions longer than 512 bytes) or the buffer is read-only: then
    copied."""
    views = [npy_tensor(s[ext]) for s in samples]
    first = views[0]
    if not all(v.shape == first.shape and v.dtype == torch.uint8 and v.is_contiguous() for v in views):
        return None
    if any(memoryview(s[ext]).readonly for s in samples[:1]):
        return None
    n = first.numel()
    stride = views[1].data_ptr() - first.data_ptr() if len(views) > 1 else n
    if stride < n or any(v.data_ptr() != first.data_ptr() + i * stride for i, v in enumerate(views)):
        return None
    inner = first.stride()
    arr = numpy.lib.stride_tricks.as_strided(first.numpy(), (len(views), *first.shape), (stride, *inner))
    shared = blocks.tensor_of(arr) if blocks is not None else None
    if shared is not None:
        return shared
    return torch.from_numpy(arr)  # the client's buffer, which the tensor keeps


def bucket_batch(b: Batch, blocks: Optional[Blocks] = None, layout: Optional[str] = None) -> Any:
    """The :class:`BucketBatch` of a bucket job's batch as a
    :class:`brand.Client` decodes it, or the :class:`ClipBucketBatch` of
    a clip bucket job's (its samples' tensors are ``frames.npy``, in
    ``layout``, the job's ``clip_layout``)."""
    name = b.transform or ""
    h, w = (int(x) for x in name[len("bucket:"):].split(":")[0].split("x"))  # bucket:HxW[:crop=random][:flip=P]
    geo = [g.split(",") for g in (b.geometry or "").split(";") if g]
    if len(geo) != len(b):
        raise ValueError(f"brand.Buckets: {len(b)} samples, geometry of {len(geo)}")
    ext = None
    members: Dict[str, List[Any]] = {}
    for s in b:
        npy = [k for k in s if k.endswith("npy")]
        if len(npy) != 1 or (ext is not None and npy[0] != ext):
            raise ValueError(f"brand.Buckets: sample {s['__key__']} has image tensors {npy}")
        ext = npy[0]
        for k, v in s.items():
            if k != ext and not k.startswith("__"):
                members.setdefault(k, []).append(bytes(v))
    clip = ext == "frames.npy"
    # The step's images are views of the batch's buffer (in a worker of
    # Buckets.loader, a shared block the body was read into: no copy but
    # the socket's); a batch whose images are not evenly spaced there is
    # copied, an image at a time, into a tensor of its own (a block, if
    # one is free), and the body's block let go.
    out = _stacked(b, ext, blocks) if ext is not None else None
    if out is None:
        for i, s in enumerate(b):
            t = npy_tensor(s[ext])
            if out is None:
                out = _empty((len(b), *t.shape) if clip else (len(b), 3, h, w), blocks)
            out[i].copy_(t)
        if out is None:
            out = _empty((0, 3, h, w), blocks)
        if blocks is not None:
            blocks.let_go(getattr(b, "body", None))
    sizes: Any = [[int(g[1]), int(g[0])] for g in geo]
    crops: Any = [[int(g[3]), int(g[2])] for g in geo]
    flips: Any = [g[4] == "1" for g in geo]
    if blocks is None:
        sizes, crops, flips = _geometry(sizes, crops, flips)
    # else in a worker of Buckets.loader, whose process makes them
    # (_made): each tensor a worker sends is a shared-memory file of its
    # own, made there and its descriptor passed and mapped here, about
    # 0.1 ms of the training node's CPU each, three a step.
    keys = [s["__key__"] for s in b]
    source = b[0].get("__dataset__") if len(b) else None  # a bucketed mixture's step is of one source
    if clip:
        frames = out.shape[2] if layout == "cthw" else out.shape[1]
        return ClipBucketBatch(out, ClipBucketShape(h, w, int(frames)), sizes, crops, flips, keys, members, source)
    return BucketBatch(out, BucketShape(h, w), sizes, crops, flips, keys, members, source)


class Buckets(IterableDataset):
    """A dataset's images batched by shape, for text-to-image training:
    each step one bucket, a :class:`BucketBatch`, its batch size set by
    the budget (docs/http-api.md, "Shape buckets"); or a tree of videos'
    clips, for text-to-video training, with clip buckets (``"HxWxT,..."``
    or ``"video-480"``, ``"video-720"``): each step a
    :class:`ClipBucketBatch`.

    Args:
        url: the gateway.
        dataset: the dataset (indexed with ``brand index --sizes``); or
            ``mix="photos:0.3,clips:0.7"`` (or ``mix_schedule=``): a
            bucketed mixture of image and video datasets, every step one
            bucket of one source, the sources' steps by their weights.
        buckets: a preset (``"sdxl"``, ``"sdxl-768"``, ``"sdxl-512"``) or
            ``"HxW,HxW,..."``; clip buckets, a preset (``"video-480"``,
            ``"video-720"``) or ``"HxWxT,..."`` (``stride=``, ``fps=``,
            ``clip_start=``, ``clip_layout=`` apply). A mixture's sources
            each their own: ``"photos:sdxl;clips:video-480"``. Stages:
            ``"0@LIST|20000@LIST"``, the buckets from each global step on.
        budget: the pixels of a rank's batch; or ``budget_tokens`` (with
            ``vae``, ``patch``): its latent tokens. Staged as ``buckets``
            is: ``"0@1048576|20000@4194304"``.
        max_upscale, small, crop, flip, seed, **more: as :class:`brand.Job`'s
            fields (``world=``, ``rank=``, ``name=``, ``token=``,
            ``peers=``).

    ``len()`` is the steps of the current epoch this rank yields from
    where it stands; :meth:`state_dict` and :meth:`load_state_dict` save
    and restore the position at any world size and worker count.
    :meth:`loader` is the DataLoader to read it with: its workers read
    each batch into shared blocks they reuse, whose images the step hands
    on where they lie (no copy of an image), it counts the steps
    it hands out (``state_dict()`` needs no ``steps``), and its persistent
    workers read the epoch and position of each iteration. A plain
    ``DataLoader(ds, batch_size=None)`` works too, at more CPU a step
    (each step's images in new shared memory), and its persistent workers
    keep the epoch they started with.

    Example::

        ds = brand.Buckets("http://brand:8080", "photos", buckets="sdxl", budget=4 << 20)
        loader = ds.loader(num_workers=2, persistent_workers=True)
        for epoch in range(10):
            ds.set_epoch(epoch)
            for b in loader:
                latents = vae.encode(b.images.cuda().float() / 127.5 - 1)
    """

    def __init__(self, url: str, dataset: Optional[str] = None, *, buckets: str = "sdxl",
                 budget: Optional[Any] = None, budget_tokens: Optional[Any] = None, seed: int = 0,
                 **more: Any) -> None:
        from ._entries import _options  # the entries' table check
        if "batch_size" in more or "offset" in more:
            raise TypeError("brand.Buckets: a bucket's batch size is its budget's (budget=, budget_tokens=), "
                            "and it resumes with load_state_dict")
        self.url = url
        self.options: Options = _options("Buckets", {"dataset": dataset, "buckets": buckets, "budget": budget,
                                                     "budget_tokens": budget_tokens, "seed": seed}, more)
        self.epoch = 0
        self._legs: List[Tuple[int, int]] = []  # the steps of self.epoch taken before this run's
        self._done = 0  # steps of this epoch yielded since the legs
        # A bucketed mixture's legs, and a staged job's, are its global
        # steps from its first, across epochs (a mixture's sources'
        # passes run on across them; a stage starts at a global step,
        # whatever world a run resumes at): _carried are the steps of this
        # run's epochs before self.epoch.
        job = self.options.job
        staged = any("@" in str(v) for v in (job.buckets, job.budget, job.budget_tokens) if v is not None)
        self._mixture = (job.mix is not None or job.mix_schedule is not None or job.schedule_version is not None
                         or staged)
        self._carried = 0

    # -- the job --------------------------------------------------------------

    def _world(self) -> Tuple[int, int]:
        job = self.options.job
        w, r = ddp_world()
        world = job.world if job.world is not None else w
        rank = job.rank if job.rank is not None else (r if job.world is None else 0)
        check_rank(world, rank)
        return world, rank

    def _client(self) -> Client:
        world, rank = self._world()
        resume = ",".join(f"{w}:{k}" for w, k in self._legs) or None
        job = replace(self.options.job, world=world, rank=rank, resume=resume)
        return Client(self.url, replace(self.options, job=job))

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` next, from its start (unless it is the
        epoch :meth:`load_state_dict` restored)."""
        if epoch != self.epoch:
            if self._mixture:
                # The legs run on: this run's steps so far are counted.
                self._carried += self._done
                self.epoch, self._done = epoch, 0
                return
            self.epoch, self._legs, self._done = epoch, [], 0

    def edits(self) -> "edits.Editor":
        """The :class:`brand.edits.Editor` of this dataset's job (a
        named job of one dataset): its exclusions and appends, each from
        a global step counted over whole epochs at this dataset's world
        from the job's first step (docs/http-api.md, *Edits of a bucket
        job*: the edit cuts its epoch at the step, the steps before
        unchanged), and a bucketed mixture's stored stages. Edit on one
        rank (rank 0): every rank reads the edit."""
        world, _ = self._world()
        return edits.Editor(self.url, replace(self.options, job=replace(self.options.job, world=world, rank=0)))

    def epoch_info(self) -> Dict[str, Any]:
        """``GET /epoch/N`` of the current epoch from where it stands:
        ``batches`` its steps, ``buckets`` each bucket's figures."""
        with self._client() as c:
            return c.epoch_info(self.epoch)

    def __len__(self) -> int:
        return int(self.epoch_info()["batches"])

    # -- iteration ------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        wid, k = (info.id, info.num_workers) if info is not None else (0, 1)
        if info is not None:
            st = worker_iteration()  # a persistent worker of loader(): this iteration's epoch and legs
            if st is not None:
                self.epoch, self._legs = st["epoch"], [tuple(x) for x in st["legs"]]
        blocks = worker_blocks()
        with self._client() as c:
            if blocks is not None:
                # Each batch's body read straight into a shared block: its
                # images are the step's, handed to the trainer's process by
                # reference (docs/benchmarks.md, "Shape buckets").
                c.read_batches_into(blocks.body)
            steps = int(c.epoch_info(self.epoch)["batches"])
            for m in range(wid, steps, k):
                b = bucket_batch(c.batch(self.epoch, m), blocks, self.options.job.clip_layout)
                if info is None:
                    self._done = m + 1
                yield b

    def loader(self, **kwargs: Any) -> "BucketLoader":
        """A :class:`BucketLoader` over this dataset, taking
        ``DataLoader``'s arguments (``num_workers``,
        ``persistent_workers``, ``prefetch_factor``); ``batch_size`` is
        ``None`` (a step is one bucket batch)."""
        return BucketLoader(self, **kwargs)

    def _iteration_state(self) -> Dict[str, Any]:
        return {"epoch": self.epoch, "legs": [list(x) for x in self._legs]}

    # -- state ----------------------------------------------------------------

    def state_dict(self, steps: Optional[int] = None) -> Dict[str, Any]:
        """The position, to save with a checkpoint (rank 0's suffices):
        the epoch and its legs, the steps taken at each world size (a
        bucketed mixture's: since its first step, across epochs).
        ``steps``: the steps this rank received in the epoch's current
        run, needed with DataLoader workers, which this object cannot
        observe (iterated directly, it counts them)."""
        done = self._done if steps is None else int(steps)
        if self._mixture:
            done += self._carried
        legs = list(self._legs) + ([(self._world()[0], done)] if done else [])
        job = self.options.job
        return {"version": _STATE_VERSION, "epoch": self.epoch, "legs": [list(x) for x in legs],
                **{k: getattr(job, k) for k in _ORDER}}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`'s ``state``: the next iteration
        reads the rest of its epoch, at this world size, each image once.

        Raises:
            ValueError: a state of another version, or saved with another
                order or other buckets (seed, window, dataset, buckets,
                budget, upscale rule), which give other steps."""
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"brand.Buckets: state version {state.get('version')!r}, want {_STATE_VERSION}")
        job = self.options.job
        for k in _ORDER:
            if state.get(k) != getattr(job, k):
                raise ValueError(f"brand.Buckets: state saved with {k}={state.get(k)!r} cannot resume a dataset "
                                 f"with {k}={getattr(job, k)!r}: the epoch's steps would differ")
        self.epoch = int(state["epoch"])
        self._legs = [(int(w), int(s)) for w, s in state["legs"]]
        self._done = self._carried = 0


def _geometry(sizes: Any, crops: Any, flips: Any) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (torch.tensor(sizes, dtype=torch.int64).reshape(-1, 2), torch.tensor(crops, dtype=torch.int64).reshape(-1, 2),
            torch.tensor(flips, dtype=torch.bool))


def _made(step: Any) -> Any:
    """A step from a worker of :meth:`Buckets.loader` with its sizes,
    crops and flips made tensors here."""
    if isinstance(step.flips, torch.Tensor):
        return step
    return step._replace(**dict(zip(("original_sizes", "crops", "flips"),
                                    _geometry(step.original_sizes, step.crops, step.flips))))


def _as_made(step: BucketBatch) -> BucketBatch:
    """A step as its worker made it (a DataLoader's conversion would make
    its tuples lists)."""
    return step


class BucketLoader(DataLoader):
    """The ``DataLoader`` of :meth:`Buckets.loader`: a step is one bucket
    batch; its workers read each batch into shared blocks
    (``_shm.Board``) that this process frees for reuse as the trainer lets
    go of them, so that no step maps new memory; it counts the steps it
    hands out for :meth:`Buckets.state_dict`; and persistent workers read
    each iteration's epoch and legs as it begins."""

    def __init__(self, dataset: Buckets, **kwargs: Any) -> None:
        if kwargs.setdefault("batch_size", None) is not None:
            raise ValueError("brand.Buckets.loader: a step is one bucket batch: batch_size must be None")
        kwargs.setdefault("collate_fn", _as_made)
        super().__init__(dataset, **kwargs)
        self._board: Optional[Board] = None
        self._board_iteration: Optional["weakref.ReferenceType[Any]"] = None

    def __iter__(self) -> Iterator[BucketBatch]:  # type: ignore[override]
        ds: Buckets = self.dataset  # type: ignore[assignment]
        if self.num_workers == 0:
            yield from super().__iter__()  # the dataset counts its own steps
            return
        ds._done = 0
        board = self._board_for_iteration()
        if board.header is not None:
            board.header.write({"dataset": ds._iteration_state(), "held": board.held_slots()})
        given = self.worker_init_fn
        self.worker_init_fn = WorkerInit(board, given)
        try:
            steps = super().__iter__()
        finally:
            self.worker_init_fn = given
        if board is self._board and not self.persistent_workers:
            self._board_iteration = weakref.ref(steps)
        for item in steps:
            ds._done += 1
            item = _made(item)
            board.received(item)
            yield item

    def edits(self) -> Any:
        """The dataset's :meth:`~Buckets.edits`."""
        return self.dataset.edits()  # type: ignore[attr-defined]

    def _board_for_iteration(self) -> Board:
        """The board of an iteration about to start, as BrandLoader's: its
        blocks kept from the iterations before unless an iteration still
        running has it; with persistent workers, the one they started with."""
        if self.persistent_workers:
            if self._iterator is not None and self._board is not None:
                return self._board
            if self._board is None or not self._board.fits(self.num_workers, 4) or self._board.header is None:
                self._board = Board(self.num_workers, 4, persistent=True)
            self._board.begin()
            return self._board
        if self._board_iteration is not None and self._board_iteration() is not None:
            return Board(self.num_workers, 4)
        if self._board is None or not self._board.fits(self.num_workers, 4):
            self._board = Board(self.num_workers, 4)
        self._board.begin()
        return self._board
