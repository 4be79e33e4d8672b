"""Shared-memory blocks, reused.

A DataLoader worker hands each step to the trainer's process in shared
memory; PyTorch's default_collate makes a new block for every step, and a
new block's pages are allocated and zeroed by the kernel: 140 µs per 150 KB
image on a small VM, several times the rest of a worker's work. So a
BrandLoader's workers stack uint8 steps into blocks they keep and reuse once
the trainer's process has let go of them. A block is reused only when a flag
says so, and only the trainer's process clears the flag: when no tensor
there refers to the block's memory any more (its storage's weak reference
has expired, which views keep alive too). A step the loader never saw (a
plain DataLoader, or pin_memory's copies) leaves its flag set: that block is
never reused, and past the pool's size the worker makes new blocks as
PyTorch does.

The loader's process keeps a :class:`Board` for as long as the loader
lives and hands it to each iteration's workers as the argument of their init
(:class:`WorkerInit`, the DataLoader's ``worker_init_fn``); each worker
takes its own :class:`Blocks` of it, which
:func:`~brand.torch.collate_tensors` stacks into (:func:`worker_blocks`).
The dataset carries none of it.

Workers with ``persistent_workers=True`` live as long as the loader: each
keeps its blocks mapped from iteration to iteration, and the loader tells them, as
each iteration begins, which blocks its process still holds
(:class:`IterationHeader`): the rest are free again, whatever the iteration before
left in them (steps made ahead of a trainer that stopped early).

Workers without ``persistent_workers`` end with their iteration, and the next
iteration forks new ones: a block a worker made would go with it, and the next
iteration's workers would allocate new ones. So the board keeps the blocks
across iterations: the loader's process keeps a
mapping of each block it has received a step in (:meth:`Board.received`;
never touched there, so it costs no pages — but a ``brand.Samples``
block's, which its steps are read through: :func:`step_block`), and the
next iteration's workers
start with those blocks, inherited when forked, their descriptors passed
when spawned: the blocks' memory is allocated once a loader, not once a
iteration. At most ``workers × per_worker`` blocks, one a slot; a block
replaced in its slot (outgrown) is let go, and all of them with the
loader. Only the ``file_descriptor`` sharing strategy (Linux's default)
gives a block's descriptor: under ``file_system`` each iteration makes its
blocks anew.

A new worker still maps each block anew — a fork does not copy a shared
mapping's page tables — and on a VM each page's first fault in a process
is dear whether the page is new or kept (5.7 and 5.5 ms of CPU a MB on
the benchmark's VM, against 0.013 ms to write a page already mapped). So
a worker maps the part of a block it takes into its page tables in one
call (:func:`populate`, 2.2–2.5 ms a MB there) before a body is read
into it. Over an iteration, each block's first use in a worker costs that; a
iteration of many more steps than a worker has blocks amortizes it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
import pickle
import sys
import threading
import time
import warnings
import weakref
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence

import numpy
import torch

BLOCK_MAGIC = b"BRANDBLK"
BLOCK_HEAD = 64  # magic, slot number (4 bytes, little-endian), padding
BLOCKS_PER_WORKER = 6
BLOCK_SLACK = 16  # a block is made 1/16 larger than the step it is made for
ITERATION_HEADER_BYTES = 1 << 20  # an iteration's state, pickled; its pages are touched only as far as it goes
READ_TIMEOUT = 60.0  # seconds a worker waits for a write of the iteration's state under way


def storage(t: torch.Tensor) -> Any:
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


class Board:
    """Flags shared by a BrandLoader's process and its workers, one per
    block: 1 while the trainer's process may hold the block, 0 free; and
    the blocks themselves, kept by the loader's process across iterations.
    Made in the loader's process before the workers start, which then share
    it (inherited, or passed as shared memory when workers are spawned)."""

    def __init__(self, workers: int, per_worker: int = BLOCKS_PER_WORKER, persistent: bool = False) -> None:
        # per_worker covers the blocks a worker's steps can hold at once:
        # a clip job's batches are read into blocks too, so its client's
        # batches ahead hold some (BrandLoader sizes it).
        self.workers = max(1, workers)
        self.per_worker = max(1, per_worker)
        self.flags = torch.zeros(self.workers * self.per_worker, dtype=torch.uint8).share_memory_()
        self.held: List["tuple[Any, int]"] = []  # (weak reference, slot) in the loader's process
        # Per slot, the block last received in it: a whole-block uint8
        # tensor on a mapping of this process's own (never touched here,
        # but for brand.Samples steps, made over it: step_block), and the
        # identity (device, inode) of its shared-memory file (None for
        # one step_block was sent).
        self.blocks: List[Optional[torch.Tensor]] = [None] * len(self.flags)
        self.ids: List[Optional["tuple[int, int]"]] = [None] * len(self.flags)
        self.keeps = torch.multiprocessing.get_sharing_strategy() == "file_descriptor" and can_keep()
        #: With persistent workers, where the loader's process writes each
        #: iteration's state for them (they started with the dataset of the
        #: first iteration); ``None`` when an iteration's workers are forked for it.
        self.header: Optional[IterationHeader] = IterationHeader() if persistent else None
        #: Names this board in the loader's process to the steps that cross
        #: as (slot, spans) (:meth:`Blocks.crossing`, :func:`step_block`).
        self.token = os.urandom(8).hex()
        _boards[self.token] = self

    def fits(self, workers: int, per_worker: int) -> bool:
        """Whether this board has the slots of an iteration of ``workers``
        workers keeping ``per_worker`` blocks each."""
        return self.workers == max(1, workers) and self.per_worker == max(1, per_worker)

    def begin(self) -> None:
        """In the loader's process, before an iteration's workers start (those of
        the iteration before have ended): a block is free unless a tensor of
        this process still refers to it. A block the last iteration's workers
        took and this process never received was theirs alone."""
        self._expire()
        self.flags.zero_()
        for _, slot in self.held:
            self.flags[slot] = 1

    def held_slots(self) -> List[int]:
        """In the loader's process: the slots of the blocks a tensor of
        this process still refers to, the others' expired first."""
        self._expire()
        return sorted({slot for _, slot in self.held})

    def _expire(self) -> None:
        # A slot is free once every tensor on its block has been let go (a
        # step's members can reach one block through storages of their
        # own), and its flag is cleared once: a worker may take the block
        # the moment it is, and a second clearing, for another entry of
        # the same slot, handed the block it had just filled back as free,
        # to be filled again before the trainer read it (steps overwritten:
        # python/bench/blockrace.py, whose steps are noted by an entry a
        # column).
        kept = [(ref, slot) for ref, slot in self.held if not ref.expired()]
        alive = {slot for _, slot in kept}
        for slot in sorted({slot for _, slot in self.held} - alive):
            self.flags[slot] = 0
        self.held = kept

    def received(self, item: Any) -> None:
        """In the loader's process: frees the blocks no tensor refers to any
        more, and notes those of ``item`` (a collated step), keeping each
        block for the iterations after this one."""
        from torch.multiprocessing.reductions import StorageWeakRef

        self._expire()
        for v in _tensors_of(item):
            # A collated stack starts at the block's data; a clip step's
            # frames are a view further into the batch read there.
            if isinstance(v, torch.Tensor) and v.dtype == torch.uint8 and v.storage_offset() >= BLOCK_HEAD:
                st = storage(v)
                head = torch.empty(0, dtype=torch.uint8).set_(st, 0, (12,), (1,)).numpy().tobytes()
                slot = int.from_bytes(head[8:12], "little")
                if head[:8] == BLOCK_MAGIC and slot < len(self.flags):
                    self.held.append((StorageWeakRef(st), slot))
                    kept = self.blocks[slot]
                    if kept is None or kept.data_ptr() != st.data_ptr():  # else a step of step_block's, on it
                        self._keep(slot, st)

    def _keep(self, slot: int, st: Any) -> None:
        """Keeps the block ``st`` (received from a worker) as ``slot``'s,
        on a mapping of its own: one the received tensors share would
        never expire, and the block would never be free."""
        if not self.keeps:
            return
        fd, size = block_fd(st)
        info = os.fstat(fd)
        ident = (info.st_dev, info.st_ino)
        if self.ids[slot] == ident:
            return
        self.blocks[slot] = map_fd(fd, size)
        self.ids[slot] = ident

    def __getstate__(self) -> Dict[str, Any]:
        # Spawned workers get the flags and the blocks' descriptors (dup'd
        # into them as the process is made); what this process holds is its
        # own.
        from multiprocessing.reduction import DupFd

        fds = [None if b is None else (DupFd(block_fd(storage(b))[0]), b.numel()) for b in self.blocks]
        return {"workers": self.workers, "flags": self.flags, "per_worker": self.per_worker, "held": [],
                "fds": fds, "keeps": self.keeps, "header": self.header, "token": self.token}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        fds = state.pop("fds")
        self.__dict__.update(state)
        self.blocks, self.ids = [], [None] * len(self.flags)
        for f in fds:
            if f is None:
                self.blocks.append(None)
                continue
            df, size = f
            fd = df.detach()
            try:
                self.blocks.append(map_fd(fd, size))
            finally:
                os.close(fd)


#: The boards of this process's loaders by token, for the steps that name
#: one as they are unpickled (:func:`step_block`); weak, so a board goes
#: with its loader.
_boards: "weakref.WeakValueDictionary[str, Board]" = weakref.WeakValueDictionary()


def step_block(token: str, slot: int, carrier: Optional[torch.Tensor]) -> torch.Tensor:
    """In the loader's process, as a step that crossed as (slot, spans) is
    unpickled: the whole block of ``slot`` as a uint8 tensor on a storage
    of the step's own.

    A worker sends a block itself (``carrier``, which PyTorch passes as a
    descriptor, mapped here anew) only with its first step on it
    (:meth:`Blocks.crossing`); every later step names the slot alone, and
    the block is the one this process keeps for the slot. A worker's steps
    reach this process in the order it sent them, so the block a slot
    names is the last one sent for it. The step's storage is its own
    (``torch.frombuffer`` over the kept mapping) so that it expires when
    the step's tensors are let go, which frees the block
    (:meth:`Board.received`); the kept mapping itself never does."""
    board = _boards.get(token)
    if board is None:
        raise RuntimeError("brand: a brand.Samples step names a loader's shared block outside that loader's process "
                           "(a step of a BrandLoader's worker is unpickled where the loader is)")
    if carrier is not None:
        board.blocks[slot] = carrier
        board.ids[slot] = None
    kept = board.blocks[slot]
    if kept is None:
        raise RuntimeError(f"brand: a step names shared block {slot}, which no step has brought to this process")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # frombuffer's warning for a buffer it cannot resize
        return torch.frombuffer(kept.numpy(), dtype=torch.uint8)


def _values(item: Any) -> Any:
    return item.values() if isinstance(item, Mapping) else item if isinstance(item, (tuple, list)) else ()


def _tensors_of(item: Any) -> Iterator[Any]:
    """The values of a step (a dict, a list or a tuple, such as an
    entry's batch), those of the dicts among them (a
    :class:`WindowBatch`'s features), and the first tensor of each list
    there (a :class:`SampleBatch`'s columns, its members views of one
    block): where a worker's blocks can be."""
    for v in _values(item):
        if isinstance(v, Mapping):
            for w in v.values():
                if isinstance(w, list):
                    yield next((x for x in w if isinstance(x, torch.Tensor)), None)
                else:
                    yield w
        else:
            yield v


class Blocks:
    """A DataLoader worker's blocks: slots ``worker * board.per_worker``
    on of the board."""

    def __init__(self, board: Board, worker: int) -> None:
        self.board = board
        self.first = worker * board.per_worker
        # Each whole block, uint8: those the board kept from the iterations
        # before, their pages there already.
        self.blocks: List[Optional[torch.Tensor]] = list(board.blocks[self.first:self.first + board.per_worker])
        # Per block, the bytes of it this process has mapped in (populate).
        self.mapped: List[int] = [0] * board.per_worker
        # Per slot, the block this process has sent to the loader's process
        # (crossing): a step on it then crosses as its slot alone.
        self.sent: List[Optional[torch.Tensor]] = [None] * board.per_worker
        # The client's fetching threads take blocks for batch bodies while
        # the worker's own thread takes them for collated stacks.
        self.lock = threading.Lock()

    def free_unheld(self, held: Sequence[int]) -> None:
        """As a persistent worker's iteration begins: frees each of this
        worker's blocks but those of the slots ``held`` (the loader's
        process still refers to them). The others hold nothing the trainer
        will see: steps of the iteration before it never received (made ahead
        of a trainer that stopped, dropped by the DataLoader's reset) or
        let go of (freed by that process as it received the next, but a
        block it never received a step in is never freed there)."""
        keep = set(held)
        with self.lock:
            for i in range(self.board.per_worker):
                if self.first + i not in keep:
                    self.board.flags[self.first + i] = 0

    def take(self, nbytes: int, shape: Sequence[int]) -> Optional[torch.Tensor]:
        """A uint8 tensor of ``shape`` (``nbytes`` elements) in a free
        block, which is marked held; ``None`` when every block is held."""
        with self.lock:
            return self._take(nbytes, shape)

    def _take(self, nbytes: int, shape: Sequence[int]) -> Optional[torch.Tensor]:
        flags = self.board.flags
        free = None
        for i, b in enumerate(self.blocks):
            if flags[self.first + i] != 0:
                continue
            if b is not None and b.numel() - BLOCK_HEAD >= nbytes:
                free = i
                break
            if free is None:
                free = i
        if free is None:
            return None
        b = self.blocks[free]
        if b is None or b.numel() - BLOCK_HEAD < nbytes:
            # With room to spare: a step's bytes vary a little (a clip
            # batch's JSON members, a last smaller stack), and a block
            # outgrown is made anew, its pages with it.
            size = -(-(BLOCK_HEAD + nbytes + nbytes // BLOCK_SLACK) // 4096) * 4096
            b = new_block(size)
            b[:12] = torch.frombuffer(bytearray(BLOCK_MAGIC + (self.first + free).to_bytes(4, "little")),
                                      dtype=torch.uint8)
            self.blocks[free] = b
            self.mapped[free] = 0
        if self.mapped[free] < BLOCK_HEAD + nbytes:
            self.mapped[free] = BLOCK_HEAD + nbytes if populate(b, BLOCK_HEAD + nbytes) else b.numel()
        flags[self.first + free] = 1
        strides = [1] * len(shape)
        for k in range(len(shape) - 2, -1, -1):
            strides[k] = strides[k + 1] * shape[k + 1]
        return torch.empty(0, dtype=torch.uint8).set_(storage(b), BLOCK_HEAD, tuple(shape), tuple(strides))

    def crossing(self, body: torch.Tensor) -> Optional["tuple[str, int, Optional[torch.Tensor]]"]:
        """How a step on ``body`` (a tensor on one of this worker's blocks)
        crosses to the loader's process: its board's token, the block's
        slot, and the whole block the first time this process sends it,
        ``None`` after (:func:`step_block` unpickles them). Steps cross
        so, rather than by PyTorch's pickling of a storage, which passes a
        descriptor through a socket of this worker's and has the loader's
        process map it again, step after step. ``None`` if ``body`` is on
        none of them, or where this torch lacks the private call that
        passes a block (its public path copies the block each step)."""
        if not self.board.keeps:
            return None
        ptr = body.data_ptr()
        for i, b in enumerate(self.blocks):
            if b is not None and b.data_ptr() <= ptr < b.data_ptr() + b.numel():
                carrier = None
                if self.sent[i] is not b:
                    self.sent[i] = carrier = b
                return self.board.token, self.first + i, carrier
        return None

    def body(self, n: int) -> Optional[memoryview]:
        """A writable buffer of ``n`` bytes in a free block, marked held,
        for a batch's body to be read into (``brand.Client``'s
        ``read_batches_into``); ``None`` when every block is held."""
        t = self.take(n, (n,))
        return None if t is None else memoryview(t.numpy())

    def let_go(self, buf: Any) -> None:
        """Frees the block a body read into :meth:`body` lies in, when
        none of it is handed on (an empty batch): its flag would stay set
        until the next iteration, only the trainer's process clearing
        flags of blocks it received."""
        if buf is None or not memoryview(buf).nbytes:
            return
        ptr = numpy.frombuffer(buf, numpy.uint8).ctypes.data
        with self.lock:
            for i, b in enumerate(self.blocks):
                if b is not None and b.data_ptr() <= ptr < b.data_ptr() + b.numel():
                    self.board.flags[self.first + i] = 0
                    return

    def tensor_of(self, a: Any) -> Optional[torch.Tensor]:
        """The uint8 array ``a`` (a view of a batch read into :meth:`body`)
        as a tensor on its block's shared storage — which a worker hands
        to the trainer's process by reference, where a tensor made by
        ``torch.from_numpy`` is copied into a new block of its own for
        every step; ``None`` if ``a`` is not a uint8 view of a block."""
        if getattr(a, "dtype", None) != numpy.uint8 or a.size == 0:
            return None
        ptr = a.__array_interface__["data"][0]
        for b in self.blocks:
            if b is not None and b.data_ptr() <= ptr < b.data_ptr() + b.numel():
                return torch.empty(0, dtype=torch.uint8).set_(storage(b), ptr - b.data_ptr(), a.shape, a.strides)
        return None


class IterationHeader:
    """An iteration's state, written by a BrandLoader's process before each iteration
    and read by each of its persistent workers as its iteration of the
    iteration begins: a persistent worker keeps the dataset it was started with
    (PyTorch re-enters its ``__iter__`` each iteration, on that copy), so the
    epoch, a restored position and the versions pinned since reach it
    here. Shared memory: a sequence number (odd while a write is under
    way), the length, the pickled state.

    The loader writes before the DataLoader's reset asks the workers to
    begin the iteration (a queue between the processes orders the two); a
    worker reading while the loader writes — a generator of the iteration
    before, started late, whose steps the reset drops — reads again."""

    def __init__(self, size: int = ITERATION_HEADER_BYTES) -> None:
        self.buf = new_block(size)  # its pages allocated as written, not zeroed ahead (with torch's own call)
        # The sequence number and length start at 0: the public path's
        # block is a copy of torch.empty's memory, whatever it held, and an
        # odd number there made every write end odd, a worker waiting on
        # it for good (twice under scripts/test-python.sh).
        self.buf[:16].zero_()

    def _words(self) -> numpy.ndarray:
        return self.buf[:16].numpy().view(numpy.int64)

    def write(self, state: Any) -> None:
        """In the loader's process, between iterations: ``state`` for the
        workers' next iteration. Everything is made before the sequence
        number turns odd, and the collector is held off while it is: a
        finalizer run in between (a DataLoader iterator's, which waits on
        its workers) would leave the workers reading an odd number."""
        data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        if 16 + len(data) > self.buf.numel():
            raise ValueError(f"brand: an iteration's state of {len(data)} bytes is over the {self.buf.numel() - 16} "
                             "a persistent worker's header holds")
        w = self._words()
        body = self.buf[16:16 + len(data)].numpy()
        src = numpy.frombuffer(data, numpy.uint8)
        seq = int(w[0])
        collecting = gc.isenabled()
        gc.disable()
        try:
            w[0] = seq + 1
            w[1] = len(data)
            body[:] = src
            w[0] = seq + 2
        finally:
            if collecting:
                gc.enable()

    def read(self, timeout: float = READ_TIMEOUT) -> Any:
        """In a worker: the state last written, ``None`` before any.

        Raises:
            RuntimeError: a write stayed under way (its sequence number
                odd) for ``timeout`` seconds: the loader's process stopped
                in the middle of one, or the header is not one it writes.
                A write takes microseconds."""
        w = self._words()
        deadline = time.monotonic() + timeout
        while True:
            seq = int(w[0])
            if seq % 2 == 0:
                data = self.buf[16:16 + int(w[1])].numpy().tobytes()
                if int(w[0]) == seq:
                    return pickle.loads(data) if seq else None
            if time.monotonic() > deadline:
                raise RuntimeError(f"brand: a persistent worker waited {timeout:g} s for the loader's process to "
                                   f"finish writing the iteration's state (sequence {seq}): it stopped mid-write, or the header is not its")
            time.sleep(0.001)


# -- torch's private storage calls ---------------------------------------------
#
# Three calls of torch's storages are private: making a block in shared
# memory without touching its pages (UntypedStorage._new_shared), a
# storage's descriptor (_share_fd_cpu_) and a second mapping of one
# (UntypedStorage._new_shared_fd_cpu), by which the loader's process keeps
# its workers' blocks from one iteration to the next. Torch 1.13 and 2.x
# have them; a torch that does not is met here, and only here: each is
# looked up when used, and one that is missing warns once (a
# RuntimeWarning naming it and the torch) and the public path is taken:
# Tensor.share_memory_() for a block (it copies the new block's pages
# into shared memory once, a fault a page), and no blocks kept across
# iterations (each iteration's workers make theirs, as under the
# file_system sharing strategy; persistent workers keep theirs anyway).
# python/bench/handoff.py measures the two side by side.

#: Where the private calls are looked up: torch's UntypedStorage (a test
#: puts a class without them here, as a torch that lacks them would be).
UntypedStorage: Any = torch.UntypedStorage
_warned: set = set()


class PrivateTorchWarning(RuntimeWarning):
    """A private call of torch's that the shared blocks use is missing:
    the public path, measured slower (docs/benchmarks.md), is taken."""


def _private(name: str) -> Optional[Callable[..., Any]]:
    """torch's ``UntypedStorage.<name>``, or ``None`` after a warning (once
    a process) that this torch lacks it."""
    fn = getattr(UntypedStorage, name, None)
    if fn is None and name not in _warned:
        _warned.add(name)
        warnings.warn(f"brand: torch {torch.__version__} has no UntypedStorage.{name}: the loader's shared blocks "
                      "take the public path (Tensor.share_memory_(), blocks not kept across iterations)",
                      PrivateTorchWarning, stacklevel=3)
    return fn


def new_block(size: int) -> torch.Tensor:
    """A whole uint8 block of ``size`` bytes in shared memory (torch's
    kind, which a worker hands to the trainer's process by reference):
    its pages untouched, by torch's private call; else made private and
    moved there by the public ``share_memory_()``."""
    make = _private("_new_shared")
    if make is not None:
        return torch.empty(0, dtype=torch.uint8).set_(make(size), 0, (size,), (1,))
    return torch.empty(size, dtype=torch.uint8).share_memory_()


def can_keep() -> bool:
    """Whether this torch gives a shared block's descriptor and maps one
    anew (private calls both), so that a loader keeps its workers' blocks
    from one iteration to the next."""
    fd, mapped = _private("_share_fd_cpu_"), _private("_new_shared_fd_cpu")  # each warns if missing
    return fd is not None and mapped is not None


def block_fd(st: Any) -> "tuple[int, int]":
    """(descriptor, size) of shared storage ``st``: the one it keeps, not
    a copy. Only where :func:`can_keep`."""
    return st._share_fd_cpu_()


def map_fd(fd: int, size: int) -> torch.Tensor:
    """A whole uint8 block on a mapping of its own of ``fd`` (a duplicate
    of it is kept). Only where :func:`can_keep`."""
    st = UntypedStorage._new_shared_fd_cpu(fd, size)
    return torch.empty(0, dtype=torch.uint8).set_(st, 0, (size,), (1,))


_MADV_POPULATE_WRITE = 23  # Linux 5.14


def populate(b: torch.Tensor, n: int) -> bool:
    """Maps the first ``n`` bytes of block ``b`` into this process's page
    tables at once, writable (``madvise(MADV_POPULATE_WRITE)``), rather
    than one page fault at a time as a body is read into it: a worker
    forked for an iteration maps its blocks anew, even those whose pages the
    blocks kept across iterations already have, and faulting them in one page
    at a time cost 5.5 ms of CPU a MB on the benchmark's VM, 2.2 ms
    populated. Returns False where the kernel (before 5.14) or the C library
    has no such call: the pages then fault in as they are written."""
    libc = _libc()
    if libc is None:
        return False
    return libc.madvise(ctypes.c_void_p(b.data_ptr()), ctypes.c_size_t(n), _MADV_POPULATE_WRITE) == 0


@functools.lru_cache(maxsize=1)
def _libc() -> Optional[ctypes.CDLL]:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.madvise.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


# The blocks of the DataLoader worker this process is: set once, when the
# worker starts, by WorkerInit; None in every other process (the trainer's,
# a plain DataLoader's workers). A worker process's own state, kept as
# PyTorch keeps get_worker_info()'s: collate_tensors runs wherever a
# collate runs (the DataLoader's collate_fn, or a dataset's collate=) and
# is handed nothing but the samples.
_worker_blocks: Optional[Blocks] = None


def worker_blocks() -> Optional[Blocks]:
    """This DataLoader worker's blocks, if a BrandLoader started it."""
    return _worker_blocks


def worker_iteration() -> Optional[Any]:
    """In a persistent worker of a BrandLoader, as its iteration
    begins (after the iteration before has let go of its blocks: its client
    closed): the dataset's state the loader wrote for the iteration
    (:meth:`BrandDataset.iteration_state`), this worker's blocks the trainer's
    process no longer holds freed. ``None`` in any other process."""
    blocks = _worker_blocks
    if blocks is None or blocks.board.header is None:
        return None
    got = blocks.board.header.read()
    if got is None:
        return None
    blocks.free_unheld(got["held"])
    return got["dataset"]


class WorkerInit:
    """A BrandLoader's ``worker_init_fn`` for one iteration: gives each worker
    its :class:`Blocks` of the loader's ``board``, then calls the
    ``worker_init_fn`` the loader was given (``then``), if any. Pickled to
    spawned workers with the board's flags."""

    def __init__(self, board: Board, then: Optional[Callable[[int], None]]) -> None:
        self.board = board
        self.then = then

    def __call__(self, worker_id: int) -> None:
        global _worker_blocks
        _worker_blocks = Blocks(self.board, worker_id)
        if self.then is not None:
            self.then(worker_id)
