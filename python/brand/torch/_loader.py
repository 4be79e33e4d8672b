"""The loader: a DataLoader that counts the steps it hands to the trainer,
which is what makes a dataset's state exact with any number of workers."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Union

from torch.utils.data import DataLoader, Sampler
from torch.utils.data._utils.collate import default_convert

from ._batches import BATCH_TYPES
from ._gpu import CutBatch
from ._shm import BLOCKS_PER_WORKER, Board, WorkerInit
from ._tensors import collate_tensors

if TYPE_CHECKING:
    from ._dataset import BrandDataset


def convert_step(step: Any) -> Any:
    """What PyTorch's ``default_convert`` (a ``DataLoader``'s ``collate_fn``
    when it does not batch, as a BrandLoader of gateway batches does) makes
    of a step, without walking its JSON members: decoded JSON holds no
    array to convert, and walking a clip batch's (each clip's frame
    numbers, timestamps and PTS) was about a tenth of a worker's CPU a
    step. Every other member is converted as ``default_convert`` does."""
    if isinstance(step, (*BATCH_TYPES, CutBatch)):
        return step  # made in the worker of tensors and plain values: nothing to convert
    if not isinstance(step, dict):
        return default_convert(step)
    return {k: v if k == "json" or k.endswith(".json") else default_convert(v) for k, v in step.items()}


class BrandLoader(DataLoader):
    """A ``DataLoader`` over a :class:`BrandDataset` that counts the steps it
    hands to the trainer, so that the dataset's :meth:`~BrandDataset.state_dict`
    is exact with any number of workers. Build it with
    :meth:`BrandDataset.loader`.

    It uses the dataset's public API only: each iteration over an epoch
    (:meth:`~BrandDataset.begin_iteration`, :meth:`~BrandDataset.step_received`
    for each step, :meth:`~BrandDataset.end_iteration`), and the state is the
    dataset's. Its workers' shared blocks (``_shm.py``) reach them as the
    argument of their ``worker_init_fn``, not through the dataset; the
    loader keeps them from iteration to iteration (iterate one loader every epoch,
    rather than a new one each) and lets them go when it goes.

    With ``persistent_workers=True`` its workers live as long as it does
    rather than an iteration: no iteration forks, ends or maps its workers' blocks
    anew (on a small VM about 0.3 s of CPU an iteration to fork and end two
    workers, and 2.2–5.5 ms a MB of blocks to map). They keep the dataset
    they started with, so before each iteration the loader writes what the
    iteration reads — :meth:`~BrandDataset.iteration_state`: the epoch of
    :meth:`~BrandDataset.set_epoch`, the position of
    :meth:`~BrandDataset.load_state_dict`, the options and versions — where
    the workers read it as their iteration begins
    (``_shm.IterationHeader``). Anything else changed on the dataset after the
    first iteration (``decode``, ``collate``) is not seen, as with any
    persistent ``DataLoader``; and, as PyTorch's, one iteration runs at a time:
    a new iteration of the loader resets the one running."""

    def __init__(self, dataset: BrandDataset, **kwargs: Any) -> None:
        want = None if dataset.batches else dataset.batch_size
        if kwargs.setdefault("batch_size", want) != want:
            raise ValueError(
                f"brand: a BrandLoader step is one gateway batch: batch_size must be {want!r}, "
                f"got {kwargs['batch_size']!r}"
            )
        if not dataset.batches:
            kwargs.setdefault("drop_last", False)
            if dataset.options.job.transform is not None:
                kwargs.setdefault("collate_fn", collate_tensors)
        else:
            kwargs.setdefault("collate_fn", convert_step)
        super().__init__(dataset, **kwargs)
        # Trainers that find the epoch's setter on the loader's sampler
        # (PyTorch Lightning's _set_sampler_epoch, and loops written for a
        # DistributedSampler) reach the dataset's. An IterableDataset's
        # DataLoader takes no sampler as an argument; the one it makes
        # yields None forever, as this one does.
        object.__setattr__(self, "sampler", EpochSampler(dataset))
        # The workers' shared blocks, kept across iterations (see _shm.py), and
        # the DataLoader iterator of the iteration using them.
        self._board: Optional[Board] = None
        self._board_iteration: Optional["weakref.ReferenceType[Any]"] = None

    def set_epoch(self, epoch: int) -> None:
        """The dataset's :meth:`~BrandDataset.set_epoch`: read ``epoch``
        next (as ``loader.sampler.set_epoch``, where Lightning calls it)."""
        self.dataset.set_epoch(epoch)  # type: ignore[attr-defined]

    def __len__(self) -> int:
        """The steps this rank's iteration over the dataset's current epoch holds
        with this loader's workers (:meth:`BrandDataset.steps`): the whole
        epoch's, also when :meth:`load_state_dict` restored a position in
        it (PyTorch's convention, which schedulers and Lightning count
        on; the resumed iteration yields ``dataset.steps(num_workers,
        remaining=True)``), and the epoch as it is now after an exclusion
        or an append."""
        ds: BrandDataset = self.dataset  # type: ignore[assignment]
        return ds.steps(self.num_workers, partial=ds.batches or not self.drop_last)

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        ds: BrandDataset = self.dataset  # type: ignore[assignment]
        # Counts from the epoch's start or the restored position, and pins
        # the index and membership versions (on DDP, rank 0's) before the
        # workers start, so that they all read one.
        ds.begin_iteration()
        finished = False
        try:
            # Workers stack steps into shared blocks that this process
            # frees for reuse as it lets go of them (see _shm.py).
            board = self._board_for_iteration()
            if board is not None and board.header is not None:
                # Persistent workers: the iteration's state and the blocks this
                # process still holds, read by each worker as its iteration
                # begins (written before the reset below asks them to).
                board.header.write({"dataset": ds.iteration_state(), "held": board.held_slots()})
            steps = self._start(board)
            if board is not None and board is self._board and not self.persistent_workers:
                self._board_iteration = weakref.ref(steps)
            for item in steps:
                ds.step_received()
                if board is not None:
                    board.received(item)
                yield item
            finished = True
        finally:
            ds.end_iteration(finished)

    def _board_for_iteration(self) -> Optional[Board]:
        """The board of an iteration about to start: the loader's own, its blocks
        kept from the iterations before, unless an iteration still running (its
        DataLoader iterator alive: its workers may still write) has it;
        then a board of the iteration's own. With persistent workers, the one
        they started with, while they live."""
        if self.num_workers == 0:
            return None
        per = self.blocks_per_worker()
        if self.persistent_workers:
            if self._iterator is not None and self._board is not None:
                return self._board  # the workers run on: their flags are theirs to clear (worker_iteration)
            # The workers start with this iteration.
            if self._board is None or not self._board.fits(self.num_workers, per) or self._board.header is None:
                self._board = Board(self.num_workers, per, persistent=True)
            self._board.begin()
            return self._board
        running = self._board_iteration is not None and self._board_iteration() is not None
        if running:
            return Board(self.num_workers, per)
        if self._board is None or not self._board.fits(self.num_workers, per):
            self._board = Board(self.num_workers, per)
        self._board.begin()
        return self._board

    def _start(self, board: Optional[Board]) -> Iterator[Any]:
        """The DataLoader's iterator, its workers (started now, or with the
        first iteration when persistent) each handed its blocks of ``board`` by
        its ``worker_init_fn``, before the one this loader was given."""
        if board is None:
            return super().__iter__()
        given = self.worker_init_fn
        self.worker_init_fn = WorkerInit(board, given)
        try:
            # The iterator's workers, when it makes them (every iteration, or
            # the first with persistent workers), read worker_init_fn once.
            return super().__iter__()
        finally:
            self.worker_init_fn = given

    def blocks_per_worker(self) -> int:
        """The shared blocks each worker keeps: enough for every step it
        can have made and not yet seen freed — ``prefetch_factor`` made
        ahead, the step the trainer holds and the one before it (freed
        when the next arrives) — and, for a clip job, whose batches are
        read into blocks, its client's ``ahead`` batches and the one it is
        making; so too for ``brand.Samples`` (``member_views``), whose
        batches are read into blocks as well. A worker that finds none free
        copies the step as PyTorch does."""
        per = BLOCKS_PER_WORKER
        if self.dataset.options.job.clips or getattr(self.dataset, "member_views", False):  # type: ignore[attr-defined]
            ahead = self.dataset.options.ahead  # type: ignore[attr-defined]
            per = max(per, (self.prefetch_factor or 2) + ahead + 4)
        return per

    def read_ahead_steps(self) -> int:
        """How far past the step the trainer is on the job's loaders may have
        read, in steps: an edit of its stored schedule from ``"next"``
        (:meth:`edit_schedule`) takes effect at most this many steps later,
        and one from a step given as a number must leave at least this
        margin.

        Each of ``W`` workers keeps ``prefetch_factor`` steps made ahead
        for the trainer, its client ``ahead`` batches requested beyond the
        one it is making and that one in flight (:class:`brand.Options`),
        and each of its batches is ``W`` steps after its previous: ``W ×
        (prefetch_factor + ahead + 2)``; without workers, ``ahead + 2``.
        The gateway lays no step out before a request asks for it (it
        prefetches chunks, not steps), so it adds nothing. With DDP the
        ranks step together, each with its own loaders: the margin is the
        same."""
        ahead = self.dataset.options.ahead  # type: ignore[attr-defined]
        if self.num_workers == 0:
            return ahead + 2
        return self.num_workers * ((self.prefetch_factor or 2) + ahead + 2)

    def edits(self) -> Any:
        """The dataset's :meth:`~BrandDataset.edits`: the
        :class:`brand.edits.Editor` of its job."""
        return self.dataset.edits()  # type: ignore[attr-defined]

    def edit_schedule(self, schedule: str, from_step: Union[int, str] = "next") -> Dict[str, Any]:
        """Deprecated: ``loader.edits().edit_schedule(schedule, from_step)``
        (:meth:`brand.edits.Editor.edit_schedule`); this answers the
        gateway's JSON, a dict (``from_step``: the step the edit took
        effect from, at most :meth:`read_ahead_steps` after the trainer's)."""
        return self.dataset.edit_schedule(schedule, from_step)  # type: ignore[attr-defined]

    def state_dict(self, steps: Optional[int] = None) -> Dict[str, Any]:
        """The dataset's :meth:`~BrandDataset.state_dict`."""
        return self.dataset.state_dict(steps)  # type: ignore[attr-defined]

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """The dataset's :meth:`~BrandDataset.load_state_dict`."""
        self.dataset.load_state_dict(state)  # type: ignore[attr-defined]


class EpochSampler(Sampler):
    """A BrandLoader's sampler: as the one a DataLoader makes for an
    ``IterableDataset`` it yields ``None`` forever (the dataset chooses its
    samples), and its :meth:`set_epoch` is the dataset's, where trainers
    look for a sampler's (Lightning calls ``loader.sampler.set_epoch``
    before each epoch)."""

    def __init__(self, dataset: Any) -> None:
        super().__init__(None)
        self.dataset = dataset

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None

    def set_epoch(self, epoch: int) -> None:
        """The dataset's :meth:`~BrandDataset.set_epoch`."""
        self.dataset.set_epoch(epoch)
