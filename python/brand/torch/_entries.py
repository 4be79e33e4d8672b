"""The entries: one dataset a kind of job, each taking the few arguments
that kind needs and yielding one type (``_batches.py``).

=====================  ====================  ==========================
entry                  reads                 yields, each step
=====================  ====================  ==========================
:class:`Samples`       samples as stored     :class:`SampleBatch`
:class:`Tensors`       images, transformed   :class:`TensorBatch`
:class:`GPUTensors`    JPEGs cut for the     :class:`TensorBatch`
                       trainer's decoder     (finished on the device)
:class:`Sequences`     token sequences       :class:`SequenceBatch`
:class:`Clips`         a tree of videos      :class:`ClipBatch`
:class:`LeRobot`       LeRobot windows       :class:`WindowBatch`
:class:`Buckets`       images by shape       :class:`BucketBatch`
=====================  ====================  ==========================

Each is a :class:`BrandDataset` of ``batches=True`` whose collate makes
its type in the DataLoader worker: ``len()``, ``set_epoch``,
``state_dict``/``load_state_dict``, :meth:`~BrandDataset.loader` and
persistent workers are the dataset's, unchanged. Every other field of a
:class:`brand.Job` or :class:`brand.Connection` is taken by keyword
(``world=``, ``name=``, ``mix=``, ``token=``, ``peers=``), as
:class:`BrandDataset` takes them; one that makes another kind of job
(``seq=`` given to :class:`Samples`) is refused with the entry to use,
and the pairs the gateway's table refuses (``compat.json``) are refused
when the entry is made, before any request, naming the pair.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional

from torch.utils.data import get_worker_info

from .. import _compat
from .._options import resolve
from ._batches import clip_batch, sample_batch, sequence_batch, tensor_batch, window_batch
from ._dataset import BrandDataset
from ._gpu import cut_batch, finish
from ._loader import BrandLoader

__all__ = ["Clips", "GPUTensors", "LeRobot", "Samples", "Sequences", "Tensors"]

# The keywords that make each kind of job, and the entry that reads it.
_KIND_OF = {
    "transform": "Tensors",  # or GPUTensors: both take it
    "seq": "Sequences", "pack": "Sequences", "pad": "Sequences", "eos": "Sequences", "vision": "Sequences",
    "clip": "Clips", "stride": "Clips", "fps": "Clips", "step": "Clips", "clip_start": "Clips",
    "delta_timestamps": "LeRobot", "frames": "LeRobot",
    "buckets": "Buckets", "budget": "Buckets", "budget_tokens": "Buckets", "vae": "Buckets", "patch": "Buckets",
    "vae_t": "Buckets", "max_upscale": "Buckets", "small": "Buckets", "crop": "Buckets", "flip": "Buckets", "resume": "Buckets",
}
# The keywords of another kind an entry takes too: a clip bucket job's
# clips are drawn with a clip job's stride, rate, start and layout.
_ALSO = {"Buckets": {"stride", "fps", "clip_start", "clip_layout"}}
# The Job fields an entry takes under a name of its own.
_RENAMED = {"Sequences": {"seq": "seq_len"}, "Clips": {"clip": "clip_len", "clip_layout": "layout"},
            "LeRobot": {"clip_layout": "layout"}}


def _options(who: str, fields: Dict[str, Any], more: Dict[str, Any]) -> Any:
    """The options of entry ``who`` (its class name): its own ``fields``
    and the keywords ``more``, checked by the gateway's table first — a
    refusal is the table's, in the words the gateway answers it with
    (:class:`brand._compat.Refused`) — then by the entry: a keyword of
    another kind of job the table takes is that entry's to read."""
    for k in more:
        own = _RENAMED.get(who, {}).get(k)
        if own is not None:
            raise TypeError(f"brand.{who}: give {k}= as {own}=")
    options = resolve(None, {**fields, **more}, f"brand.{who}")
    for k in more:
        kind = "Clips or brand.LeRobot" if k in ("clip_layout", "gop_window") else _KIND_OF.get(k)
        also = k in _ALSO.get(who, ()) or kind == "Tensors" and who == "GPUTensors"
        if kind is not None and kind != who and not also:
            raise TypeError(f"brand.{who} does not take {k}=: it makes another kind of job, read by brand.{kind}")
    return options


class Samples(BrandDataset):
    """A job's samples as stored, ``batch_size`` a step, each step a
    :class:`SampleBatch` (keys, each member's values, a mixture's
    datasets).

    Args:
        url: the gateway (``"http://brand:8080"``).
        dataset: its name; ``None`` with ``mix=`` (a mixture) or the
            gateway's default dataset.
        batch_size: samples per rank per step.
        seed: the shuffle's seed: every epoch's order is a function of
            it, the dataset's version and the epoch.
        drop_last: drop the epoch's last, partial global step.
        decode: applied to each sample (its dict) in the worker before
            the step is made; returns the sample's dict.
        **more: any other field of :class:`brand.Job` or
            :class:`brand.Connection` by name (``world``, ``rank``:
            DDP's by default; ``name``, ``mix``, ``window``, ``token``,
            ``peers``, ``ahead``).

    Raises:
        ValueError: a value no gateway would take, or features the
            gateway's table refuses together (the pair and its message).
        TypeError: a keyword that makes another kind of job (the entry
            to use), or an unknown one.

    Example::

        ds = brand.Samples("http://brand:8080", "imagenet", batch_size=256)
        for epoch in range(epochs):
            ds.set_epoch(epoch)
            for b in ds.loader(num_workers=4):   # SampleBatch
                train(b.keys, b.fields["jpg"], b.fields["cls"])
    """

    def __init__(self, url: str, dataset: Optional[str] = None, *, batch_size: int = 256, seed: int = 0,
                 drop_last: bool = False, decode: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None,
                 **more: Any) -> None:
        opts = _options("Samples", {"dataset": dataset, "batch_size": batch_size, "seed": seed,
                                    "drop_last": drop_last}, more)
        super().__init__(url, opts, decode=decode, batches=True, collate=sample_batch, member_views=decode is None)


class Tensors(BrandDataset):
    """A job's images decoded and transformed by the gateway, each step a
    :class:`TensorBatch` (``images`` uint8 ``(B, 3, H, W)``, ``labels``
    int64, keys, other members).

    Args:
        url, dataset, batch_size, seed, drop_last, **more: as
            :class:`Samples`'.
        transform: the gateway's pipeline: ``"imagenet-train"`` (a random
            resized crop to 224 and a flip, drawn from each sample's key),
            ``"imagenet-eval"``, or one its ``--transform-config`` defines.

    Example::

        ds = brand.Tensors("http://brand:8080", "imagenet", transform="imagenet-train")
        for b in ds.loader(num_workers=2, pin_memory=True):
            x = b.images.to("cuda", non_blocking=True).float().div_(255)
            loss = criterion(model(x), b.labels.to("cuda"))
    """

    def __init__(self, url: str, dataset: Optional[str] = None, *, transform: str = "imagenet-train",
                 batch_size: int = 256, seed: int = 0, drop_last: bool = False, **more: Any) -> None:
        opts = _options("Tensors", {"dataset": dataset, "transform": transform, "batch_size": batch_size,
                                    "seed": seed, "drop_last": drop_last}, more)
        super().__init__(url, opts, batches=True, collate=tensor_batch)


class GPUTensors(BrandDataset):
    """A job's JPEGs cut by the gateway to each sample's crop
    (``transform="imagenet-train-gpu"``, a gateway built with the
    ``brand_turbojpeg`` tag) and finished on the trainer's device: each
    step the :class:`TensorBatch` :class:`Tensors` gives for
    ``imagenet-train`` — the same boxes, flips, labels and keys, the
    pixels within docs/transform.md §13's bound — with ``images`` on
    ``device``. The workers gather each step's cut JPEGs into one buffer;
    the trainer's process decodes them in one call
    (``torchvision.io.decode_jpeg(..., device="cuda")`` where torch ≥ 2
    and CUDA are present, torchvision's CPU decoder otherwise), crops,
    resizes (bilinear, antialiased) and flips (:func:`brand.torch.finish`).

    Args:
        url, dataset, batch_size, seed, drop_last, **more: as
            :class:`Samples`'.
        transform: a gateway pipeline of ``"output": "gpu_jpeg"``.
        device: where the images are decoded and finished (``None``: CUDA
            where there is one, else the CPU).

    Example::

        ds = brand.GPUTensors("http://brand:8080", "imagenet", device="cuda")
        for b in ds.loader(num_workers=2):      # b.images already on the GPU
            loss = criterion(model(b.images.float().div_(255)), b.labels.cuda())
    """

    def __init__(self, url: str, dataset: Optional[str] = None, *, transform: str = "imagenet-train-gpu",
                 batch_size: int = 256, seed: int = 0, drop_last: bool = False, device: Any = None,
                 **more: Any) -> None:
        opts = _options("GPUTensors", {"dataset": dataset, "transform": transform, "batch_size": batch_size,
                                       "seed": seed, "drop_last": drop_last}, more)
        super().__init__(url, opts, batches=True, collate=cut_batch)
        self.device = device

    def __iter__(self) -> Iterator[Any]:
        # A worker hands its steps on cut; the trainer's process finishes
        # them (here, or in the loader when workers read).
        steps = super().__iter__()
        if get_worker_info() is not None:
            yield from steps
            return
        try:
            for step in steps:
                yield finish(step, self.device)
        finally:
            steps.close()  # the iteration's end, counted now, not when collected

    def loader(self, **kwargs: Any) -> "BrandLoader":
        """A :class:`BrandLoader` whose steps are finished in the
        trainer's process on ``device`` as they arrive."""
        return _FinishingLoader(self, **kwargs)


class _FinishingLoader(BrandLoader):
    """A BrandLoader of :class:`GPUTensors`: each step finished as it
    reaches the trainer's process."""

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        device = getattr(self.dataset, "device", None)
        steps = super().__iter__()
        try:
            for step in steps:
                yield finish(step, device)
        finally:
            steps.close()


class Sequences(BrandDataset):
    """A token dataset's documents packed into sequences of ``seq_len``
    tokens, each step a :class:`SequenceBatch` (``tokens`` and
    ``positions``, int32 ``(B, seq_len)``, on the received buffer).

    Args:
        url, dataset, seed, drop_last, **more: as :class:`Samples`'.
        seq_len: tokens a sequence.
        batch_size: sequences per rank per step.
        pack: ``"bestfit"`` (documents whole, best fit over each shuffle
            window; the gateway's default) or ``"concat"`` (documents
            and an EOS after each, cut every ``seq_len``).
        pad, eos: the pad's token ID (0) and, with ``"concat"``, the
            EOS's.
        vision: a vision job's rule (``vision=``) over a dataset of
            image-text samples: each step then also carries the
            sequences' ``loss_mask``, ``images``, ``image_spans`` and
            ``image_sizes`` (:class:`SequenceBatch`). With ``mix=`` (or
            ``mix_schedule=``) of an image-text dataset and text token
            datasets of its tokenizer, the rule is the image-text
            component's, and a text component's sequence has no image,
            no span and a ``loss_mask`` of 1 on every token before the
            pad.

    Example::

        ds = brand.Sequences("http://brand:8080", "web", seq_len=4096, batch_size=8)
        for b in ds.loader(num_workers=2):
            logits = model(b.tokens.long().cuda(), position_ids=b.positions.long().cuda())
    """

    def __init__(self, url: str, dataset: Optional[str] = None, *, seq_len: int = 4096, batch_size: int = 8,
                 seed: int = 0, drop_last: bool = False, pack: Optional[str] = None, pad: Optional[int] = None,
                 eos: Optional[int] = None, vision: Optional[str] = None, **more: Any) -> None:
        opts = _options("Sequences", {"dataset": dataset, "seq": seq_len, "batch_size": batch_size, "seed": seed,
                                      "drop_last": drop_last, "pack": pack, "pad": pad, "eos": eos, "vision": vision},
                        more)
        super().__init__(url, opts, batches=True, collate=sequence_batch)


class Clips(BrandDataset):
    """Clips of ``clip_len`` frames of a tree of videos, decoded by the
    gateway, each step a :class:`ClipBatch` (``frames`` uint8 ``(B, T, H,
    W, 3)``, ``labels`` int64, keys, each clip's source).

    Args:
        url, dataset, seed, drop_last, **more: as :class:`Samples`'.
        clip_len: frames a clip.
        batch_size: clips per rank per step.
        stride: frames between a clip's frames.
        fps: resample each video to this rate first (``None``: its own).
        layout: the frames' axes, ``"thwc"`` (the gateway's default),
            ``"tchw"`` or ``"cthw"``.

    Example::

        ds = brand.Clips("http://brand:8080", "kinetics", clip_len=16, batch_size=8)
        for b in ds.loader(num_workers=2):
            loss = criterion(model(b.frames.cuda()), b.labels.cuda())
    """

    def __init__(self, url: str, dataset: Optional[str] = None, *, clip_len: int = 16, batch_size: int = 8,
                 seed: int = 0, drop_last: bool = False, stride: Optional[int] = None, fps: Optional[float] = None,
                 layout: Optional[str] = None, **more: Any) -> None:
        opts = _options("Clips", {"dataset": dataset, "clip": clip_len, "batch_size": batch_size, "seed": seed,
                                  "drop_last": drop_last, "stride": stride, "fps": fps, "clip_layout": layout}, more)
        super().__init__(url, opts, batches=True, collate=clip_batch)


class LeRobot(BrandDataset):
    """Windows of a LeRobot v3 dataset around each anchor row, as
    LeRobot's ``delta_timestamps`` give them, each step a
    :class:`WindowBatch` (a tensor per camera and column by its feature
    name, keys, each window's rows and padding).

    Args:
        url, dataset, seed, drop_last, **more: as :class:`Samples`'.
        delta_timestamps: ``{"observation.images.top": [-0.1, 0],
            "action": [0, 0.1, 0.2]}``: offsets in seconds by feature.
        frames: the windows in frames instead (a dict as
            ``delta_timestamps``, or a list of offsets for every camera);
            give one of the two.
        batch_size: windows per rank per step.
        layout: the cameras' axes, ``"thwc"`` (the gateway's default),
            ``"tchw"`` (LeRobot's own) or ``"cthw"``.

    Example::

        ds = brand.LeRobot("http://brand:8080", "aloha", delta_timestamps={"observation.images.top": [-0.1, 0],
                                                                         "action": [0, 0.1]})
        for b in ds.loader(num_workers=2):
            policy.update(b.features["observation.images.top"], b.features["action"])
    """

    def __init__(self, url: str, dataset: Optional[str] = None, *, delta_timestamps: Optional[Any] = None,
                 frames: Optional[Any] = None, batch_size: int = 32, seed: int = 0, drop_last: bool = False,
                 layout: Optional[str] = None, **more: Any) -> None:
        if (delta_timestamps is None) == (frames is None):
            raise ValueError("brand.LeRobot: give delta_timestamps (offsets in seconds) or frames (in frames), "
                             "one of the two")
        opts = _options("LeRobot", {"dataset": dataset, "delta_timestamps": delta_timestamps, "frames": frames,
                                    "batch_size": batch_size, "seed": seed, "drop_last": drop_last,
                                    "clip_layout": layout}, more)
        super().__init__(url, opts, batches=True, collate=window_batch)


#: The entry of each kind, as :class:`BrandDataset`'s deprecation names it.
ENTRIES: List[type] = [Samples, Tensors, GPUTensors, Sequences, Clips, LeRobot]
