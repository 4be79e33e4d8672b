"""Brand: shuffled batches of a chunked dataset from a Brand gateway.

Read a job with the dataset of its kind, each yielding one type:
``brand.Samples`` (:class:`~brand.torch.SampleBatch`), ``brand.Tensors``
and ``brand.GPUTensors`` (:class:`~brand.torch.TensorBatch`), ``brand.Sequences``
(:class:`~brand.torch.SequenceBatch`), ``brand.Clips``
(:class:`~brand.torch.ClipBatch`), ``brand.LeRobot``
(:class:`~brand.torch.WindowBatch`), ``brand.Buckets`` (:class:`~brand.torch.BucketBatch`): :mod:`brand.torch`'s, which
``brand`` imports (and torch with it) when one is first named.

The core (:class:`Client`, configured by :class:`Options`: the :class:`Job`
read, the :class:`Connection` to the gateways; :func:`decode_tar`;
:func:`format_mix` for a mixture of datasets) uses only the standard
library. :mod:`brand.edits` changes a named job while it trains (its
exclusion list, append record, stored schedule, importance feedback).
:mod:`brand.tasks` reads a task job (docs/tasks.md): prompts leased to
generators, their rewards fed back, the trainer's steps.
:mod:`brand.torch` adds :class:`brand.torch.BrandDataset`, a
``torch.utils.data.IterableDataset`` for DataLoader and DDP training, which
takes the same options.
"""

from ._clips import clip_arrays
from ._compat import Refused
from ._malloc import tune_malloc
from ._mix import format_mix
from ._options import Connection, Importance, Job, Options
from ._sequences import sequence_arrays
from ._tar import TarError, decode_tar, split_key
from ._version import __version__
from ._http import EditRefused
from .client import (Batch, BrandConnectionError, BrandError, Client, IndexChangedError, MembersUnknownError,
                     ScheduleConflictError)
from . import edits, tasks
from .tasks import LeaseExpired, TaskJob, TaskRefused, TasksDone

__all__ = [
    "Batch",
    "BrandConnectionError",
    "BrandError",
    "Client",
    "Connection",
    "EditRefused",
    "Importance",
    "IndexChangedError",
    "Job",
    "LeaseExpired",
    "MembersUnknownError",
    "Options",
    "Refused",
    "ScheduleConflictError",
    "TarError",
    "TaskJob",
    "TaskRefused",
    "TasksDone",
    "clip_arrays",
    "decode_tar",
    "edits",
    "format_mix",
    "sequence_arrays",
    "split_key",
    "tasks",
    "tune_malloc",
    "__version__",
]

# The entries are brand.torch's: named here, imported (and torch with them)
# on first use, so that the rest of the package needs no torch.
_TORCH_ENTRIES = ("Samples", "Tensors", "GPUTensors", "Sequences", "Clips", "LeRobot", "Buckets")


def __getattr__(name: str) -> object:
    if name in _TORCH_ENTRIES:
        from . import torch as _torch  # noqa: PLC0415

        return getattr(_torch, name)
    raise AttributeError(f"module 'brand' has no attribute {name!r}")


def __dir__() -> "list[str]":
    return sorted(list(globals()) + list(_TORCH_ENTRIES))
