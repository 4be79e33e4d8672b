"""The dataset: an epoch of a gateway's dataset, shuffled and cut by the
gateway, each DataLoader worker of each DDP rank reading its own server rank
(python/README.md, "PyTorch", for the cut, the mixing block and resuming).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import replace
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

import torch.distributed as _dist
from torch.utils.data import IterableDataset, get_worker_info

from .. import _compat, edits
from .._malloc import tune_malloc
from .._options import Options, check_rank, job_query, resolve
from .._tar import Sample
from ..client import Batch, Client
from ._loader import BrandLoader
from ._clips import clip_tensors
from ._sequences import sequence_tensors
from ._shm import worker_blocks, worker_iteration
from ._tensors import to_tensors

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



class BrandDataset(IterableDataset):
    """An epoch of a Brand gateway's dataset, shuffled and sharded by the gateway.

    Yields samples (dicts in WebDataset's convention, ``{"__key__": key,
    "jpg": b"...", "cls": b"..."}``, each passed through ``decode`` if given),
    or, with ``batches=True``, one list per batch of ``batch_size`` samples
    (passed through ``collate`` if given); use ``DataLoader(ds,
    batch_size=None)`` for those, or :meth:`loader`, which does.

    A clip job (the job's ``clip``, ``clip=16``, over a tree of videos; or
    ``delta_timestamps`` over a LeRobot dataset) yields steps too: each
    batch of ``batch_size`` clips as ``{"frames": ..., "cls": ..., "json":
    ...}``, ``frames`` a ``torch.uint8`` tensor of shape ``(batch_size, T,
    H, W, 3)`` on the received buffer, without a copy (:func:`clip_tensors`;
    a LeRobot dataset's cameras and columns by their keys); positions and
    the state count clips.

    A token job (the job's ``seq``, ``seq=4096``; its ``pack``, ``pad`` and
    ``eos``) yields steps: each batch of ``batch_size`` sequences as
    ``{"input_ids": ..., "position_ids": ...}``, two ``torch.int32``
    tensors of shape ``(batch_size, seq)`` on the received buffer, without
    a copy (:func:`sequence_tensors`; passed through ``collate`` if given,
    ``decode`` refused); ``batch_size``, positions and the state count
    sequences (python/README.md, *Token jobs*).

    With the job's ``transform`` (``transform="imagenet-train"``) each image
    member is a ``torch.uint8`` tensor made by the gateway, on the received
    buffer (python/README.md, *Tensors*); collate them with
    :func:`collate_tensors`. A sample the gateway left out (its image could
    not be transformed, on a gateway run with ``--on-bad-image=skip``; or
    its chunk is damaged, with ``--on-damaged-chunk=skip``) is not yielded,
    and a warning names it; without skip mode such a batch raises
    :class:`brand.BrandError` (422) naming it.

    Every sample of the epoch is delivered exactly once over all DDP ranks
    and DataLoader workers (python/README.md, *Sharding and the exactly-once
    rule*, for the cut). A loader drives each iteration over an epoch through
    :meth:`begin_iteration`, :meth:`step_received` and :meth:`end_iteration`, and
    saves and restores the position with :meth:`state_dict` and
    :meth:`load_state_dict` (python/README.md, *Iterations and the state*).
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
            python/README.md, *Mixtures*), and its ``offset`` must be 0
            (resume with :meth:`load_state_dict`). Every worker's client reads with
            the same options, its own world, rank and offset, and the same
            ``name`` and ``weight``: the workers and ranks of a run are one
            job.
        decode: applied to each sample in the worker, e.g. to make tensors
            (with a ``transform``, to the sample with its tensors).
        batches: yield whole batches instead of samples (default: samples;
            a token or clip job yields steps, and refuses ``False``).
        collate: with ``batches=True``, applied to each batch's list of
            (decoded) samples, e.g. ``torch.utils.data.default_collate``.
        member_views: with ``batches=True`` and no ``decode``: each
            member reaches ``collate`` as a ``memoryview`` of the batch's
            buffer (the list's ``body``), not a ``bytes`` copy
            (``brand.Samples`` reads so).
        **keywords: the options' fields by the flat names of the first
            releases (``batch_size=64, seed=7, peers=...``), applied over
            ``options``, as :class:`brand.Client` takes them.

    Raises:
        ValueError: an option no gateway would take (checked here, in the
            trainer's process, rather than in the first worker that makes a
            client), a batch size below 1, an offset, ``collate``
            without ``batches``, or ``batches=False`` for a token or clip
            job.
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
        batches: Optional[bool] = None,
        collate: Optional[Callable[[List[Any]], Any]] = None,
        member_views: bool = False,
        **keywords: Any,
    ) -> None:
        super().__init__()
        opts = resolve(options, keywords, "BrandDataset")
        if type(self) is BrandDataset:
            warnings.warn(f"brand: BrandDataset() is deprecated: read this job with brand.{_entry_of(opts)}, "
                          "which takes its kind's arguments and yields one type (python/README.md)",
                          DeprecationWarning, stacklevel=2)
        job = opts.job
        if job.batch_size is None:
            job = replace(job, batch_size=_DEFAULT_BATCH_SIZE)
        if job.batch_size is None or job.batch_size < 1:
            raise ValueError(f"brand: batch_size {job.batch_size} must be >= 1")
        if job.offset:
            raise ValueError(f"brand: offset {job.offset}: a BrandDataset resumes an epoch with load_state_dict")
        if job.seq is not None:
            # A language model's step is B sequences: the dataset yields
            # steps, each one gateway batch as (B, seq) tensors.
            if decode is not None:
                raise ValueError("brand: decode does not apply to a token job (seq): its steps are tensors "
                                 "(give collate= to change them)")
            if batches is False:
                raise ValueError("brand: batches=False does not apply to a token job (seq): it yields steps of "
                                 "batch_size sequences (leave batches out)")
            batches = True
        if job.clips:
            # A video model's step is B clips: the dataset yields steps,
            # each one gateway batch as (B, T, H, W, 3) tensors.
            if decode is not None:
                raise ValueError("brand: decode does not apply to a clip job: its steps are tensors "
                                 "(give collate= to change them)")
            if batches is False:
                raise ValueError("brand: batches=False does not apply to a clip job: it yields steps of "
                                 "batch_size clips (leave batches out)")
            batches = True
        if collate is not None and not batches:
            raise ValueError("brand: collate applies to batches=True; with samples, give it to the DataLoader")
        if member_views and (not batches or decode is not None):
            raise ValueError("brand: member_views hands collate a batch's members as views of its buffer: it needs "
                             "batches=True and no decode")
        #: The options every worker's client reads with (its world, rank and
        #: offset aside): those given, the batch size filled in, and what
        #: :meth:`load_state_dict` (the job's name, a mixture's block and
        #: length) and :meth:`set_importance` (the version) set since.
        self.options: Options = replace(opts, job=job)
        self.url = url
        self.decode = decode
        self.batches = bool(batches)
        self.collate = collate
        #: Whether each batch's members reach ``collate`` as ``memoryview``
        #: objects of the batch's buffer, no copy (:meth:`brand.Client.member_views`).
        self.member_views = bool(member_views)
        if opts.tune_malloc:
            # The trainer's process unpickles every batch its workers send:
            # memory reused, not faulted in anew (see brand.tune_malloc).
            tune_malloc()
        self.epoch = 0
        # Resume point: (epoch, position) from load_state_dict.
        self._resume: Optional["tuple[int, int]"] = None
        # Progress of the current iteration, kept in the trainer's process.
        self._base = 0  # the offset the iteration started from
        self._units = 0  # steps (of batch_size samples per rank) received
        self._samples_seen = 0  # samples received, when iterated directly
        self._iteration_world = 1
        self._complete = False
        self._by_loader = False  # between begin_iteration and end_iteration
        self._epoch_samples: Dict[int, int] = {}
        # The samples of each worker's cut (_worker_samples), by what fixes them.
        self._lengths: Dict[Any, "tuple[int, ...]"] = {}
        #: The index version every client of this dataset reads: the job's
        #: ``index``, or the one the first epoch plan named (kept in
        #: :meth:`state_dict`). :meth:`loader` learns it in the trainer's
        #: process, before its workers start, so that they all read one
        #: version.
        self.index: Optional[str] = job.index
        #: The version of the job's stored schedule (``schedule_version``)
        #: read, as the latest plan named it; :meth:`state_dict` keeps it.
        self.schedule_version: Optional[str] = job.schedule_version
        # The membership version each epoch is pinned to on a cluster (the
        # Brand-Members of its plan): learnt in the trainer's process, as
        # the index is, so that every worker's client sends the same one;
        # None on a single gateway, or with the job's own members.
        self._members: Dict[int, Optional[str]] = {}
        # In a DataLoader worker: the client of its last iteration, closed as
        # the next begins (a persistent worker's iteration the trainer stopped
        # may still be reading ahead into its shared blocks).
        self._worker_client: Optional[Client] = None

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
            self._start_iteration(epoch)

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

    def _start_iteration(self, epoch: int) -> None:
        self.epoch = epoch
        self._base = self._offset(epoch)
        self._units = 0
        self._samples_seen = 0
        self._complete = False
        self._iteration_world = self._world()[0]

    @property
    def mix_block(self) -> Optional[int]:
        """The mixing block of the mixture (``None`` without one): the job's
        ``mix_block``, given or restored by :meth:`load_state_dict`, else
        ``batch_size`` times the DDP world (:func:`ddp_world` unless the
        job gives ``world``)."""
        job = self.options.job
        if job.mix is None and job.mix_schedule is None and job.schedule_version is None:
            return None
        if job.mix_block is not None:
            return job.mix_block
        return self.batch_size * self._world()[0]

    def _client(self, world: int, rank: int, offset: int, epoch: Optional[int] = None) -> Client:
        """The client of server rank ``rank`` of ``world``: this dataset's
        options, with that cut, ``offset``, the block and the index pinned,
        and the membership version pinned for ``epoch`` (the current one
        by default), if one was."""
        e = self.epoch if epoch is None else epoch
        job = replace(self.options.job, world=world, rank=rank, offset=offset, mix_block=self.mix_block,
                      index=self.index, members=self.options.job.members or self._members.get(e))
        if job.schedule_version is not None and self.schedule_version:
            job = replace(job, schedule_version=self.schedule_version)
        return Client(self.url, replace(self.options, job=job))

    def samples_in_epoch(self, epoch: Optional[int] = None) -> int:
        """The number of samples in ``epoch`` (all ranks), from the gateway."""
        e = self.epoch if epoch is None else epoch
        if e not in self._epoch_samples:
            with self._client(1, 0, 0, e) as c:
                self._epoch_samples[e] = int(c.epoch_info(e)["samples"])
                self.index = c.index
                if c.schedule_version:
                    self.schedule_version = c.schedule_version
                if self.options.job.members is None and e not in self._members:
                    self._members[e] = c.members
        return self._epoch_samples[e]

    def agree(self, epoch: Optional[int] = None) -> None:
        """Makes every DDP rank read ``epoch`` (the current one by default)
        under rank 0's index and membership versions: a collective call
        (:func:`torch.distributed.broadcast_object_list`) that every rank
        must make, which :meth:`loader`'s iterator makes at the start of
        each epoch when :mod:`torch.distributed` is initialised with more
        than one rank and the job leaves ``world`` to it.

        Each rank pins the versions its first epoch plan names. Ranks that
        start an epoch a moment apart can see different ones — a node
        joining or leaving the cluster in between changes which rank of a
        global step is given which sample, and a re-pack changes the
        order — and would then read some samples twice and others not at
        all. Rank 0's, sent to the others, rule that out."""
        e = self.epoch if epoch is None else epoch
        self.samples_in_epoch(e)
        mine = [self.index, self._members.get(e)]
        got = list(mine)
        _dist.broadcast_object_list(got, src=0)
        if got == mine:
            return
        self.index, self._members[e] = got[0], got[1]
        if got[0] != mine[0]:
            del self._epoch_samples[e]  # the plan of rank 0's index
            self.samples_in_epoch(e)

    def _ddp_agrees(self) -> bool:
        """Whether the loader's iterator calls :meth:`agree`: the DDP world
        is torch.distributed's, with more than one rank."""
        return (self.options.job.world is None and _dist.is_available() and _dist.is_initialized()
                and _dist.get_world_size() > 1)

    def position(self, steps: Optional[int] = None) -> int:
        """Samples of the current epoch consumed globally: ``min(N, O +
        steps * W * B)`` (python/README.md, *Sharding and the exactly-once
        rule*). ``steps`` defaults to the steps counted by :meth:`loader` or
        by direct iteration.

        ``N`` is the epoch's size as it is now. An append record or an
        exclusion list of a named job's order grows or shrinks the epoch
        it applies in while an iteration reads it, which a loader's workers see
        and this process does not: for a job that can have one (a named
        job the gateway's table lets take an edit), ``N`` is asked of the
        gateway again at each call (one ``GET /epoch/N``)."""
        n = self._samples_now()
        if steps is None:
            if self._complete:
                return n
            steps = self._units
        return min(n, self._base + steps * self._iteration_world * self.batch_size)

    def _samples_now(self) -> int:
        """The current epoch's samples: asked of the gateway again for a job
        whose order an edit can change (:meth:`position`), else those the
        iteration began with."""
        if self._editable():
            self._epoch_samples.pop(self.epoch, None)
        return self.samples_in_epoch()

    def _editable(self) -> bool:
        """Whether an edit can change the job's epochs while an iteration reads
        them: a named job the gateway's table lets take an exclusion or an
        append."""
        job = self.options.job
        return job.sent_name is not None and any(
            _compat.admits(job_query(job), edit) for edit in ("exclusion", "append"))

    # -- lengths ----------------------------------------------------------------

    def _worker_samples(self, workers: int, remaining: bool) -> "tuple[int, ...]":
        """The samples (a token job's sequences, a clip job's clips) each of
        ``workers`` DataLoader workers of this rank reads in an iteration over the
        current epoch: the ``rank_samples`` of the gateway's plan of each
        worker's cut, as its client asks for it. From the epoch's start, or
        with ``remaining`` from the position :meth:`load_state_dict`
        restored. Asked again at each call for a job an edit can change,
        else once."""
        world, rank = self._world()
        k = max(1, int(workers))
        offset = self._offset(self.epoch) if remaining else 0
        self.samples_in_epoch()  # pins the index and membership versions, as an iteration does
        key = (self.epoch, world, rank, k, offset, self.index, self._members.get(self.epoch),
               self.schedule_version, tuple(sorted(job_query(self.options.job).items())))
        if key in self._lengths and not self._editable():
            return self._lengths[key]
        got = []
        for wid in range(k):
            with self._client(world * k, wid * world + rank, offset) as c:
                got.append(int(c.epoch_info(self.epoch)["rank_samples"]))
        self._lengths[key] = tuple(got)
        return self._lengths[key]

    def steps(self, workers: int = 0, *, remaining: bool = False, partial: bool = True) -> int:
        """The steps (batches of ``batch_size`` samples, sequences or clips)
        this rank's iteration over the current epoch holds, read by ``workers``
        DataLoader workers (0: in this process, as 1): what
        :meth:`BrandLoader.__len__` reports.

        Counted from the gateway's plan of each worker's cut (``GET
        /epoch/N``: the samples each worker's client reads, its last batch
        short or empty when the epoch ends inside it), so it is exact at
        any world size, worker count and ``drop_last`` (a job's
        ``drop_last`` drops the partial batch of the world times the
        workers, so with workers a rank may hold fewer steps than without).
        The epoch as it is now: for a job an edit can change (a named job
        that may take an exclusion or an append), asked again at each
        call, so an edit made while an iteration reads the epoch is counted.

        Args:
            workers: the DataLoader's ``num_workers``.
            remaining: count from the position :meth:`load_state_dict`
                restored for this epoch (what the resumed iteration yields),
                not from the epoch's start (the default: a whole iteration, as
                PyTorch's ``len`` and the schedulers built on it count).
            partial: count a worker's last, short step (``False``: a
                ``DataLoader`` that batches samples with ``drop_last=True``
                drops it).

        A batch every sample of which a gateway in skip mode left out is
        not yielded, and is counted."""
        B = self.batch_size
        return sum(-(-n // B) if partial else n // B for n in self._worker_samples(workers, remaining))

    def __len__(self) -> int:
        """The items an iteration over the current epoch yields when iterated in
        one process, from the epoch's start (a resumed iteration yields those
        from its position: :meth:`steps` with ``remaining=True``): its
        steps with ``batches`` (and for token and clip jobs), else its
        samples, as a ``DataLoader`` that batches them expects. A loader's
        length, with its workers, is :meth:`BrandLoader.__len__`."""
        if self.batches:
            return self.steps()
        return sum(self._worker_samples(1, False))

    def state_dict(self, steps: Optional[int] = None) -> Dict[str, Any]:
        """The data position, to save with a checkpoint (rank 0's suffices):
        a dict of plain values.

        ``"version"`` (1), ``"epoch"``, ``"position"`` (the samples of the
        epoch consumed over all ranks, :meth:`position`), ``"samples"``
        (the epoch's), what fixes the order (``"seed"``, ``"window"``,
        ``"dataset"``; with a mixture: the mixture, its block and its epoch
        length, ``"mix"``, ``"mix_block"`` and ``"mix_samples"``, and
        ``"mix_schedule"`` and ``"schedule_version"``), ``"index"`` (the
        index version read), and the job's name (``"job"``:
        :attr:`brand.Job.sent_name`, the name or the importance job's,
        ``None`` for an unnamed job), so that a resumed run is the same job
        to the gateway. Not its ``weight``: a share of the cache against
        the jobs running at the time, given anew on resume. A token job's
        state holds its packing (``"seq"``, ``"pack"``, ``"eos"``), a clip
        job's its clips' parameters and their order (``"clip"``,
        ``"stride"``, ``"fps"``, ``"step"``, ``"clip_start"``,
        ``"delta_timestamps"``, ``"frames"``, ``"gop_window"``).

        The position counts the steps of the current iteration (see
        :meth:`begin_iteration`): those a loader reported, or those the
        dataset, iterated directly, yielded.

        Args:
            steps: steps the trainer received in this epoch on each rank; only
                needed with a plain ``DataLoader`` with workers, which this
                object cannot observe. :meth:`loader` counts them.
        """
        position = self.position(steps)  # the epoch's size asked, if an edit can change it
        return {
            "version": _STATE_VERSION,
            "epoch": self.epoch,
            "position": position,
            "samples": self.samples_in_epoch(),
            "seed": self.options.job.seed,
            "window": self.options.job.window,
            "dataset": self.options.job.dataset,
            "mix": self.mix,
            "mix_block": self.mix_block,
            "mix_samples": self.samples_in_epoch() if self.mix_block is not None else None,
            "mix_schedule": self.options.job.mix_schedule,
            "schedule_version": self.schedule_version,
            "index": self.index,
            "job": self.options.job.sent_name,
            **self._packing(),
        }

    def _packing(self) -> Dict[str, Any]:
        """A token job's packing, which fixes its sequences (its pad changes
        no position and is not part of it), or a clip job's parameters,
        which fix its clips (the layout, which arranges their frames, is
        not part of them); ``{}`` for other jobs, whose states hold none."""
        job = self.options.job
        if job.clips:
            return {k: getattr(job, k) for k in ("clip", "stride", "fps", "step", "clip_start", "delta_timestamps",
                                                 "frames", "gop_window")}
        if job.seq is None:
            return {}
        return {"seq": job.seq, "pack": job.pack or "bestfit", "eos": job.eos}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`'s ``state``: the next iteration over its
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
        for k, have in (("seed", job.seed), ("window", job.window), ("dataset", job.dataset), ("mix", self.mix),
                        ("mix_schedule", job.mix_schedule)):
            if state.get(k) != have:
                raise ValueError(
                    f"brand: state saved with {k}={state.get(k)!r} cannot resume a dataset with "
                    f"{k}={have!r}: the epoch order would differ"
                )
        # A token job's state must be resumed by one of the same packing,
        # and a state with a packing by a token job; a clip job's alike.
        for k, have in (self._packing() or {"seq": None, "clip": None, "delta_timestamps": None, "frames": None}).items():
            if state.get(k) != have:
                what = "sequences" if k in ("seq", "pack", "pad", "eos") else "clips"
                raise ValueError(
                    f"brand: state saved with {k}={state.get(k)!r} cannot resume a dataset with "
                    f"{k}={have!r}: the epoch's {what} would differ"
                )
        if self.mix_block is not None:
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
        # A stored schedule goes on under the version saved: every step
        # read is the same under the current one, which the gateway names
        # when an edit has changed a step the rest reads.
        if job.schedule_version is not None and state.get("schedule_version"):
            self.schedule_version = state["schedule_version"]
        self._resume = (int(state["epoch"]), int(state["position"]))
        self._epoch_samples[int(state["epoch"])] = int(state["samples"])
        self._start_iteration(int(state["epoch"]))

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

    def _finish_iteration(self) -> None:
        self._complete = True
        if self._resume is not None and self._resume[0] == self.epoch:
            self._resume = None  # a second iteration over the epoch is a whole one

    # -- iterations ---------------------------------------------------------------
    #
    # An iteration is one run of a loader over the current epoch: from its start, or
    # from the position load_state_dict restored, to its end or to where
    # the trainer stops. The dataset counts the steps the trainer received
    # in the iteration (in its own process), which is what position() and
    # state_dict() report. Iterated directly, it counts them itself; under
    # a loader with workers it cannot see them, so the loader says when an
    # iteration begins, each step it hands over and when the iteration ends.

    def begin_iteration(self) -> None:
        """Begin an iteration over the current epoch that a loader drives and
        counts (:class:`BrandLoader` calls it at the start of each
        iteration; a loader of one's own does the same, in the trainer's
        process, before its workers start).

        Resets the count to 0 steps past the epoch's start, or past the
        position :meth:`load_state_dict` restored for this epoch, and pins
        the index and membership versions every worker reads (from the
        epoch's plan; with a :mod:`torch.distributed` world of more than
        one rank and no ``world`` in the job, rank 0's, by :meth:`agree`,
        a collective call every rank makes). Until :meth:`end_iteration`, the
        dataset's own iteration in this process (a loader without workers)
        counts nothing: the loader's :meth:`step_received` calls do."""
        self._start_iteration(self.epoch)
        if self._ddp_agrees():
            self.agree()
        else:
            self.samples_in_epoch()
        self._by_loader = True

    def iteration_state(self) -> Dict[str, Any]:
        """What the workers of a loader that keeps them from iteration to iteration
        (``persistent_workers=True``) need to read the iteration
        :meth:`begin_iteration` began, which the dataset they hold (the copy
        they started with) does not know: the epoch, the position a
        :meth:`load_state_dict` restored, the options (a restored job
        name, mixing block and length, an importance version) and the
        index and membership versions pinned. Plain values and
        :class:`brand.Options`, to pickle; a :class:`BrandLoader` hands it
        to its persistent workers, whose iteration reads it."""
        return {"epoch": self.epoch, "resume": self._resume, "options": self.options, "index": self.index,
                "schedule_version": self.schedule_version, "members": self._members.get(self.epoch)}

    def _take_iteration_state(self, state: Dict[str, Any]) -> None:
        """In a persistent worker: the iteration's state (:meth:`iteration_state`)."""
        self.epoch = int(state["epoch"])
        self._resume = state["resume"]
        self.options = state["options"]
        self.index = state["index"]
        self.schedule_version = state["schedule_version"]
        self._members = {self.epoch: state["members"]}

    def step_received(self) -> None:
        """Count one step handed to the trainer in the iteration
        :meth:`begin_iteration` began: one item of the loader, ``batch_size``
        samples per rank (fewer at the epoch's end). :meth:`state_dict`
        then reports the position after it."""
        self._units += 1

    def end_iteration(self, finished: bool) -> None:
        """End the iteration :meth:`begin_iteration` began. ``finished``: the loader
        handed over the epoch's last step, so that the position is the
        whole epoch and a later iteration over it reads it whole again (not from
        a restored position); ``False`` when the trainer stopped early
        (the position stays at the steps counted)."""
        if finished:
            self._finish_iteration()
        self._by_loader = False

    # The first releases' names, from when an iteration was called a pass
    # (the word is a mixture component's epoch, in Go's client and the HTTP
    # API as here).

    def begin_pass(self) -> None:
        """Deprecated: :meth:`begin_iteration`."""
        _renamed("begin_pass", "begin_iteration")
        self.begin_iteration()

    def end_pass(self, finished: bool) -> None:
        """Deprecated: :meth:`end_iteration`."""
        _renamed("end_pass", "end_iteration")
        self.end_iteration(finished)

    def pass_state(self) -> Dict[str, Any]:
        """Deprecated: :meth:`iteration_state`."""
        _renamed("pass_state", "iteration_state")
        return self.iteration_state()

    # -- iteration --------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        if info is not None:
            # A worker's iteration before this one, if the trainer stopped it,
            # reads no more (into shared blocks, which the iteration's state
            # below may free); a persistent worker's dataset is the copy
            # it started with, and the loader says which iteration this is.
            if self._worker_client is not None:
                self._worker_client.close()
                self._worker_client = None
            state = worker_iteration()
            if state is not None:
                self._take_iteration_state(state)
        world, rank = self._world()
        workers, wid = (info.num_workers, info.id) if info is not None else (1, 0)
        in_trainer = info is None and not self._by_loader
        offset = self._offset(self.epoch)
        if in_trainer:
            self._start_iteration(self.epoch)
            if self._ddp_agrees():
                self.agree()
        client = self._client(world * workers, wid * world + rank, offset)
        if info is not None:
            self._worker_client = client
        B = self.batch_size
        seq = self.options.job.seq is not None
        clips = self.options.job.clips
        blocks = worker_blocks() if info is not None else None
        if self.member_views:
            client.member_views(True)
        if (clips or self.member_views) and blocks is not None:
            # A clip step's frames are views of its batch's buffer: read
            # into the worker's shared blocks, they reach the trainer's
            # process without a copy (PyTorch copies a tensor in private
            # memory into a new shared block for every step: about 45 ms
            # of the training node's CPU a 320x240 clip of 16 frames).
            client.read_batches_into(blocks.body)
        try:
            plan = client.epoch_info(self.epoch)
            rank_samples = int(plan["rank_samples"])
            # The epoch's size as its batches report it: an edit of the
            # job's order (an append record, an exclusion list) grows or
            # shrinks it from a step this iteration may read.
            laid_out = int(plan["samples"])
            if in_trainer and self.index is None:
                self.index = client.index  # the version this iteration reads, which its state names
            for batch in client.epoch(self.epoch, plan):
                if in_trainer and batch.epoch_samples is not None and batch.epoch_samples != laid_out:
                    # This rank's share of the epoch as it is now: the plan
                    # asked again from the iteration's offset.
                    laid_out = batch.epoch_samples
                    plan = client.epoch_info(self.epoch)
                    rank_samples = int(plan["rank_samples"])
                    self._epoch_samples[self.epoch] = int(plan["samples"])
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
                    if blocks is not None:
                        blocks.let_go(getattr(batch, "body", None))  # read into a block, handed on to no one
                    continue  # an empty final slice; nothing follows it
                if seq:
                    if in_trainer:
                        self._units += 1
                    step = sequence_tensors(batch)
                    del batch  # the step's tensors hold the buffer
                    yield self.collate(step) if self.collate is not None else step
                    continue
                if clips:
                    if in_trainer:
                        self._units += 1
                    step = clip_tensors(batch)
                    del batch  # the step's tensors hold the buffer
                    yield self.collate(step) if self.collate is not None else step
                    continue
                if batch.transform is not None:
                    to_tensors(batch)
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
                self._finish_iteration()
        finally:
            client.close()

    def edits(self) -> "edits.Editor":
        """The :class:`brand.edits.Editor` of this dataset's job: its
        exclusion list, append record, stored schedule and importance
        feedback, with steps counted in this dataset's world (the DDP
        world unless the job gives one) and the index version it reads.
        A schedule version it makes is the one this dataset's workers read
        on under, and its :meth:`state_dict` records. Edit on one rank
        (rank 0): every rank reads the edit."""
        world, _ = self._world()
        job = replace(self.options.job, world=world, rank=0, index=self.index)
        return edits.Editor(self.url, replace(self.options, job=job), on_schedule=self._schedule_made)

    def _schedule_made(self, version: str) -> None:
        self.schedule_version = version

    def edit_schedule(self, schedule: str, from_step: Union[int, str] = "next") -> Dict[str, Any]:
        """Deprecated: ``ds.edits().edit_schedule(schedule, from_step)``
        (:meth:`brand.edits.Editor.edit_schedule`, which answers a typed
        :class:`brand.edits.Schedule`); this answers the gateway's JSON,
        a dict.

        Raises:
            brand.ScheduleConflictError: ``from_step`` was read, or another
                edit was made meanwhile.
        """
        warnings.warn("brand: BrandDataset.edit_schedule is deprecated: use ds.edits().edit_schedule (brand.edits)",
                      DeprecationWarning, stacklevel=2)
        if self.options.job.schedule_version is None:
            raise ValueError("brand: edit_schedule edits the schedule stored under the job's name, which a dataset "
                             "reads with schedule_version=\"latest\"")
        with self.edits() as ed:
            return ed._edit_schedule(schedule, from_step)

    def loader(self, **kwargs: Any) -> "BrandLoader":
        """A :class:`BrandLoader` over this dataset: a ``DataLoader`` whose
        steps are batches of ``batch_size`` samples, counted for
        :meth:`state_dict`. Takes ``DataLoader``'s arguments (``num_workers``,
        ``collate_fn``, ``pin_memory``, ...); a job with a ``transform``
        collates with :func:`collate_tensors` unless told otherwise."""
        return BrandLoader(self, **kwargs)


def _renamed(old: str, new: str) -> None:
    warnings.warn(f"brand: BrandDataset.{old} is deprecated: it is {new} (a pass is a mixture component's epoch)",
                  DeprecationWarning, stacklevel=3)


def _entry_of(opts: Options) -> str:
    """The entry that reads the job of ``opts`` (``brand.torch._entries``)."""
    job = opts.job
    if job.seq is not None:
        return "Sequences"
    if job.clip is not None:
        return "Clips"
    if job.clips:
        return "LeRobot"
    if job.transform is not None:
        return "Tensors"
    return "Samples"


def _warn_missing(batch: Batch) -> None:
    keys = ", ".join(batch.missing_keys[:8]) + (", ..." if len(batch.missing_keys) > 8 else "")
    warnings.warn(f"brand: the gateway left out {batch.missing} sample(s) of a batch: {keys}", BrandSkipWarning,
                  stacklevel=3)


class BrandSkipWarning(UserWarning):
    """Samples a gateway in skip mode left out of a batch (their keys in the
    message; :attr:`brand.Batch.missing_keys` for a :class:`brand.Client`)."""
