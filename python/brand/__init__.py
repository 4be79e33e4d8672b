"""Brand: shuffled batches of a chunked dataset from a Brand gateway.

The core (:class:`Client`, configured by :class:`Options`: the :class:`Job`
read, the :class:`Connection` to the gateways; :func:`decode_tar`;
:func:`format_mix` for a mixture of datasets) uses only the standard
library. :mod:`brand.torch` adds :class:`brand.torch.BrandDataset`, a
``torch.utils.data.IterableDataset`` for DataLoader and DDP training, which
takes the same options.
"""

from ._clips import clip_arrays
from ._malloc import tune_malloc
from ._mix import format_mix
from ._options import Connection, Importance, Job, Options
from ._sequences import sequence_arrays
from ._tar import TarError, decode_tar, split_key
from ._version import __version__
from .client import (Batch, BrandConnectionError, BrandError, Client, IndexChangedError, MembersUnknownError,
                     ScheduleConflictError)

__all__ = [
    "Batch",
    "BrandConnectionError",
    "BrandError",
    "Client",
    "Connection",
    "Importance",
    "IndexChangedError",
    "Job",
    "MembersUnknownError",
    "Options",
    "ScheduleConflictError",
    "TarError",
    "clip_arrays",
    "decode_tar",
    "format_mix",
    "sequence_arrays",
    "split_key",
    "tune_malloc",
    "__version__",
]
