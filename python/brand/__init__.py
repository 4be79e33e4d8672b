"""Brand: shuffled batches of a chunked dataset from a Brand gateway.

The core (:class:`Client`, :func:`decode_tar`, :func:`format_mix` for a
mixture of datasets) uses only the standard library. :mod:`brand.torch`
adds :class:`brand.torch.BrandDataset`, a
``torch.utils.data.IterableDataset`` for DataLoader and DDP training.
"""

from ._mix import format_mix
from ._tar import TarError, decode_tar, split_key
from .client import BrandConnectionError, BrandError, Client, IndexChangedError, __version__, tune_malloc

__all__ = [
    "BrandConnectionError",
    "BrandError",
    "Client",
    "IndexChangedError",
    "TarError",
    "decode_tar",
    "format_mix",
    "split_key",
    "tune_malloc",
    "__version__",
]
