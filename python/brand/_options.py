"""A client's options as one typed value: the job it reads, how it reaches
the gateways, and how it behaves.

:class:`brand.Client` and :class:`brand.torch.BrandDataset` take the same
:class:`Options`, grouped as the Go client's ``client.Options`` is:

- :class:`Job`: what is read, the parameters that with an epoch and a batch
  number fix a batch's bytes (Go's ``api.Job``), and :class:`Importance`,
  an importance-sampled job's name, snapshot and hot chunks.
- :class:`Connection`: how requests reach the gateways (timeouts, retries,
  the token and CA file, a cluster's peers and failover).
- :class:`Options`: the two, and the client's own behaviour (batches read
  ahead, malloc tuning).

Every rule is checked when a value is made (a frozen dataclass's
``__post_init__``), so a mistake raises ``ValueError`` where the option is
written rather than a 400 at the first request, or in every DataLoader
worker. Each value's own rules (its type, range, name or format) are
stated here; which parameters and features of a job go together is the
gateway's table (:mod:`brand._compat`, compat.json), which the query
parameters a job sends are checked against. The values are frozen:
:func:`dataclasses.replace` makes a changed copy and checks it again.
:func:`job_query` is the one encoder of a job into the query parameters
the gateway reads (Go's ``api.Job.Values``).

The flat keywords of the package's first releases, ``Client(url,
batch_size=64, seed=7, token=...)``, still work: :func:`resolve` maps each
onto its group's field.

Imports: this module is below :mod:`brand._http` (a session is made from a
:class:`Connection`) and uses only :mod:`brand._compat`, :mod:`brand._mix`
and :mod:`brand._route`.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import math
import numbers
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, TypeVar

from . import _compat
from ._mix import MixSpec, format_mix, mix_components
from ._route import parse_peers

__all__ = ["Connection", "Importance", "Job", "Options", "check_rank", "job_query", "resolve", "valid_job"]

#: The largest job weight a gateway takes (``weight=``).
MAX_WEIGHT = 100
# A job name as the gateway reads it (importance.ValidJobName): it names a
# folder of the store, hence no '/' and not '.' or '..'.
_JOB_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
# A pipeline's name as the gateway reads it (transform.ValidName).
_PIPELINE = re.compile(r"[a-z0-9._-]{1,64}")


def valid_job(name: str) -> bool:
    """Whether ``name`` is a valid job name: 1 to 128 ASCII letters, digits,
    ``.``, ``_`` or ``-``, and not ``.`` or ``..`` (it names a folder of the
    store)."""
    return isinstance(name, str) and _JOB_NAME.fullmatch(name) is not None and name not in (".", "..")


def check_job_name(name: str) -> None:
    """Raises ``ValueError`` unless :func:`valid_job`."""
    if not valid_job(name):
        raise ValueError(
            f"brand: job name {name!r}: want 1 to 128 of A-Z, a-z, 0-9, '.', '_', '-' (not '.' or '..')"
        )


def check_rank(world: int, rank: int) -> None:
    """Raises ``ValueError`` unless ``world >= 1`` and ``0 <= rank < world``."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"brand: rank {rank} out of range [0, {world}) for world size {world}")


def _integer_at_least(name: str, v: Any, least: int) -> None:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < least:
        raise ValueError(f"brand: {name} {v!r} must be an integer >= {least}")


def _seconds(name: str, v: Any, positive: bool = False) -> None:
    real = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
    if not real or v < 0 or positive and v == 0:
        raise ValueError(f"brand: {name} {v!r} must be a finite number of seconds {'> 0' if positive else '>= 0'}")


# A clip bucket job's base clip space: one clip a video (step= the most,
# Go's api.MaxClipStep), of its shortest bucket's frames; the clip
# presets' shortest (Go's bucket.Preset).
_MAX_CLIP_STEP = 1 << 30
_CLIP_PRESETS = {"video-480": 17, "video-720": 33}


def _clip_bucket_frames(buckets: Optional[str]) -> Optional[int]:
    """The shortest bucket's frames of the clip bucket lists of a buckets=
    value (Go's api.Buckets.ClipOf): a list (a clip preset, or HxWxT
    items), a bucketed mixture's sources' lists (``NAME:LIST;...``), each
    stage's (``STEP@...|STEP@...``); None for lists of images alone or a
    value that does not parse (the gateway says why)."""
    if not isinstance(buckets, str):
        return None
    ts = []
    for stage in buckets.split("|"):
        stage = stage.split("@", 1)[1] if "@" in stage else stage
        lists = [x.split(":", 1)[1] if ":" in x else x for x in stage.split(";")] if ":" in stage else [stage]
        for lst in lists:
            if lst in _CLIP_PRESETS:
                ts.append(_CLIP_PRESETS[lst])
                continue
            for item in lst.split(","):
                parts = item.strip().split("x")
                if len(parts) == 3 and parts[2].isdigit():
                    ts.append(int(parts[2]))
    return min(ts) if ts else None


def _set(obj: Any, name: str, value: Any) -> None:
    """Stores a normalised field of a frozen dataclass in its __post_init__."""
    object.__setattr__(obj, name, value)


_SCHEDULE_STEP = re.compile(r"[0-9]{1,16}(~[0-9]{1,16})?")
_PLAIN_WEIGHT = re.compile(r"[0-9]+(\.[0-9]*)?")


def check_schedule(text: str) -> str:
    """A mixture schedule as ``mix_schedule=`` takes it, checked for its
    shape (phases ``STEP:MIX`` or ``STEP~END:MIX`` separated by ``;``,
    each mixture ``name:weight,...`` with plain decimal weights, 0
    allowed); the gateway checks the rest (order, bounds, datasets) and
    answers 400 with what is wrong.

    Raises:
        ValueError: text that is no schedule, or of more than 1,024 phases.
    """
    if not isinstance(text, str) or not text:
        raise ValueError(f"brand: mix_schedule {text!r}: phases STEP:MIX separated by ';'")
    phases = text.split(";")
    if len(phases) > 1024:
        raise ValueError(f"brand: mix_schedule of {len(phases)} phases; at most 1024")
    for p in phases:
        step, _, mix = p.partition(":")
        if not _SCHEDULE_STEP.fullmatch(step) or not mix:
            raise ValueError(f"brand: mix_schedule phase {p!r}: STEP:MIX or STEP~END:MIX, such as 4000:web:0.3,code:0.7")
        for c in mix.split(","):
            name, _, w = c.rpartition(":")
            if not name or not _PLAIN_WEIGHT.fullmatch(w):
                raise ValueError(f"brand: mix_schedule phase {p!r}: component {c!r} is dataset:weight, "
                                 "a plain decimal >= 0")
    return text


# -- job= for a job's name, deprecated ----------------------------------------


def renamed_job(keywords: Mapping[str, Any], who: str, stacklevel: int) -> Dict[str, Any]:
    """``keywords`` with ``job=``, the first releases' keyword for a job's
    name, as ``name=``, after a DeprecationWarning that points
    ``stacklevel`` frames above the caller of this function.

    Raises:
        TypeError: ``job=`` beside ``name=``.
    """
    kw = dict(keywords)
    v = kw.pop("job")
    if "name" in kw:
        raise TypeError(f"brand: {who} got both name= and job= (the deprecated spelling of name=)")
    warnings.warn(f"brand: {who}(job=...) is deprecated: the job's name is name= (brand.Job.name); "
                  "job means the brand.Job itself", DeprecationWarning, stacklevel=stacklevel + 1)
    kw["name"] = v
    return kw


_F = TypeVar("_F", bound=Callable[..., Any])


def takes_name(fn: _F) -> _F:
    """``fn``, whose parameter ``name`` is a job's name, also taking the
    first releases' ``job=`` for it, with a DeprecationWarning at the
    caller. A positional call is unchanged; ``job=`` beside a name, by
    keyword or by position, raises ``TypeError``."""
    at = list(inspect.signature(fn).parameters).index("name")
    who = fn.__qualname__.removesuffix(".__init__")
    module = fn.__module__.rpartition(".")[2]
    if not module.startswith("_"):  # brand.importance.feedback, brand.Importance
        who = f"{module}.{who}"

    @functools.wraps(fn)
    def call(*args: Any, **kw: Any) -> Any:
        if "job" in kw:
            if len(args) > at:
                raise TypeError(f"brand: {who} got both a name and job= (the deprecated spelling of name=)")
            kw = renamed_job(kw, who, stacklevel=2)
        return fn(*args, **kw)

    return call  # type: ignore[return-value]


@dataclass(frozen=True, init=False)
class Importance:
    """Importance sampling (``sampling=importance``, docs/importance.md):
    the epochs are drawn by the job's reported losses.

    Args:
        name: the job's name, under which its feedback is sent and sealed
            (the query's ``job=``); the :class:`Job`'s name, if it has one,
            must be the same. ``job=``, the first releases' keyword for it,
            still works, with a DeprecationWarning.
        version: the snapshot the epochs are drawn from (``importance=``),
            what :meth:`brand.Client.seal` returned for the previous epoch;
            ``None`` (the job's first epoch) reads the uniform order.
        hot: the heaviest chunks put first in an epoch (``hot=``), about the
            gateway's cache size in chunks; 0: not sent.
    """

    name: str
    version: Optional[str] = None
    hot: int = 0

    # Written out, not made by dataclass, only to take the deprecated job=.
    @takes_name
    def __init__(self, name: str, version: Optional[str] = None, hot: int = 0) -> None:
        _set(self, "name", name)
        _set(self, "version", version)
        _set(self, "hot", hot)
        self.__post_init__()

    def __post_init__(self) -> None:
        check_job_name(self.name)
        _integer_at_least("hot", self.hot, 0)

    @property
    def job(self) -> str:
        """Deprecated: the job's name is :attr:`name`."""
        warnings.warn("brand: Importance.job is deprecated: the job's name is Importance.name; "
                      "job means the brand.Job itself", DeprecationWarning, stacklevel=2)
        return self.name


@dataclass(frozen=True)
class Job:
    """The training job a client reads: with an epoch and a batch number,
    these fix a batch's bytes, so any gateway serves any rank the same
    batch. Fields left ``None`` take the gateway's defaults; ``seed`` and
    ``drop_last`` have fixed ones, so that a program's data order never
    depends on a server flag.

    Args:
        dataset: the dataset's name (``/datasets``); ``None``: the
            gateway's default.
        seed: the shuffle seed, any unsigned 64-bit integer.
        batch_size: samples per rank per batch. ``None``: the gateway's
            default for a :class:`brand.Client`, 32 for a
            :class:`~brand.torch.BrandDataset`, which counts in it.
        window: the shuffle window, in chunks.
        world: the number of ranks reading the epoch together. ``None``:
            one (a client), or the DDP world (a BrandDataset, which detects
            it).
        rank: this reader's rank, in ``[0, world)``. ``None``: 0, or the DDP
            rank.
        drop_last: drop the epoch's partial final global batch, so that
            every rank takes the same number of full steps.
        offset: samples of the epoch already consumed over all ranks; batch
            0 starts at that epoch position. A client's way to resume; a
            BrandDataset resumes with ``load_state_dict`` instead.
        locality: ``False`` asks a cluster for the plain cut of every global
            batch (``locality=false``) instead of giving each rank the
            samples its home node holds first. A single gateway ignores it.
        name: the job's name (1 to 128 of ``A-Z a-z 0-9 . _ -``, not
            ``.`` or ``..``; sent as the query's ``job=``). The gateway
            follows each named job as a stream of its own in its cache,
            even when another job reads the same order; it changes no byte
            served. Give every rank of a run the same name. ``None``: an
            unnamed job, known by its order, or by its importance job's
            name.
        weight: the job's share of a contended cache relative to other jobs
            (``weight=``, a number in ``(0, 100]``; the gateway's default is
            1). It changes no byte served.
        importance: sample by importance (:class:`Importance`) instead of
            the uniform shuffle.
        index: the version of the dataset's index to read (``index=``, the
            ``Brand-Index`` header's ID); ``None``: the version the first
            answer names. A mixture's is one version per component,
            comma-separated, which the client checks its answers against.
        members: the cluster membership version every epoch's global
            batches are assigned to ranks under (``members=``, the
            ``Brand-Members`` header's version); ``None``: each epoch the
            version its first answer names (see :attr:`Client.members`).
        mix: read a mixture of the gateway's datasets instead of
            ``dataset`` (``mix=``): ``"web:0.7,code:0.3"``, a dict
            ``{"web": 0.7, "code": 0.3}`` or (dataset, weight) pairs, in
            order (see :func:`brand.format_mix`), kept as the canonical
            text. Each component is read as an endless stream of passes
            over its dataset, each pass in its own shuffled order, and every
            block of ``mix_block`` epoch positions holds each component
            within one sample of its share. Every sample carries
            ``"__dataset__"``, its component's dataset.
        mix_block: the mixing block K (``mix_block=``); ``None``: the
            gateway's default, ``batch_size * world`` of the request (a
            BrandDataset's: ``batch_size`` times the DDP world). K is part
            of the order: every rank, and a run resumed at another world
            size, must give the same K.
        mix_samples: the mixture epoch's length (``mix_samples=``), rounded
            up to a multiple of K by the gateway; ``None``: the components'
            sizes summed.
        mix_schedule: read a mixture whose weights change with the job's
            global step (``mix_schedule=``, docs/shuffle.md §11.9) instead
            of ``mix``: phases separated by ``;``, each ``STEP:MIX`` or a
            linear ramp ``STEP~END:MIX``, such as
            ``"0:web:0.7,code:0.3;4000~6000:web:0.3,code:0.7"``. A step is a
            global batch (a mixing block of ``mix_block``).
        schedule_version: read the schedule stored under the job's
            ``name`` (``PUT /jobs/NAME/schedule``; ``schedule=``) instead of
            ``dataset``, ``mix`` or ``mix_schedule``: ``"latest"``, or the
            version a checkpoint pinned (:attr:`brand.Client.schedule_version`).
            Each epoch is read under the version its plan names; after an
            edit the client goes on under the current version, which reads
            every step already read the same.
        transform: the gateway's pipeline the images go through
            (``transform=``, 1 to 64 of ``a-z 0-9 . _ -``, such as
            ``"imagenet-train"``): each JPEG or PNG member arrives as a
            ``.npy`` member holding its decoded, augmented uint8 tensor,
            drawn from the sample's key alone (docs/transform.md).
            ``None``: the bytes as stored.
        columns: the fields of a dataset served in place (Parquet, MDS,
            Megatron: the manifest's ``fields``) its samples carry
            (``columns=``), such as ``("image", "label")``: the gateway
            reads only those columns from the store. ``None``: every field.
            A tar dataset has none to select (the gateway answers 400).
        seq: pack a token dataset's documents into sequences of ``seq``
            tokens (``seq=``, 1 to 1,048,576): each sample is then one
            sequence with ``input_ids.npy`` and ``position_ids.npy``
            members (int32), and batch sizes and offsets count sequences
            (docs/http-api.md, "Token jobs"). ``None``: samples as stored.
            The query is sent; a dataset's tensors for token jobs are not
            built in this client yet.
        pack: with ``seq``: ``"bestfit"`` (the gateway's default) or
            ``"concat"``.
        pad: with ``seq``: the pad's token ID (the gateway's default 0).
        eos: with ``pack="concat"``: the EOS token ID put after every
            document.
        vision: with ``seq``: the vision rule of a job over image-text
            samples (``vision=``, such as
            ``"min:3136,max:1003520,patch:14,merge:2,image:151655"``;
            docs/http-api.md, "Image-text sequences"), sent as written:
            each image is resized and counted as vision tokens in its
            sequence. ``None``: a text token job.
        balance: give each rank of a global batch a share of its cost
            rather than of its positions (``balance=``, docs/shuffle.md
            §13): ``"attention"`` (the sum of the squares of a sequence's
            pieces' lengths) or ``"tokens"`` for a token job (``seq``),
            also ``"vision"`` (a sequence's vision tokens) for a vision job,
            ``"bytes"`` (a sample's stored bytes) for a job of samples of a
            dataset of tar chunks. Each rank keeps its count and the global
            batch its samples; only which rank takes which changes.
            ``None``: the plain cut.
        clip: serve a video dataset (a tree of MP4/MOV files indexed in
            place) as clips of ``clip`` frames (``clip=``, 1 to 4096): each
            sample is then one clip whose frames the gateway decodes, and
            batch sizes and offsets count clips (docs/http-api.md, "Video
            clips"). :class:`~brand.torch.BrandDataset` yields each batch
            as ``{"frames": (B, T, H, W, 3) uint8, "cls": ..., "json":
            ...}``.
        stride: with ``clip``: frames between a clip's frames (``stride=``).
        fps: with ``clip``: resample each video to this rate first, by its
            timestamps (``fps=``).
        step: with ``clip``: frames between the starts of a video's
            segments, one clip each (``step=``; the gateway's default: a
            clip's span, so clips do not overlap).
        clip_start: with ``clip``: ``"random"`` (a start drawn in the
            segment each epoch, the default) or ``"first"``.
        clip_layout: the frames' axes (``clip_layout=``): ``"thwc"`` (the
            default), ``"tchw"`` or ``"cthw"``.
        gop_window: with a clip job (``clip`` or a LeRobot job's windows):
            order each window's clips GOP then sample, the clips of this
            many keyframe groups shuffled together (``gop_window=``,
            docs/shuffle.md §17), so that the gateway decodes each GOP
            once and holds its frames briefly. Nearby frames of one video
            then share a batch: choose it as a shard shuffle's buffer is
            chosen. Part of the order: a state saved with it resumes only
            with it.
        delta_timestamps: over a LeRobot v3 dataset: its windows around each
            anchor row as LeRobot's ``delta_timestamps`` give them, a dict
            ``{"observation.images.top": [-0.1, 0], "action": [0, 0.1]}``
            of offsets in seconds (``delta_timestamps=``). Each sample is
            an anchor row: a camera's window its frames ``(T, H, W, 3)``,
            a column's its rows ``(T, ...)``.
        frames: over a LeRobot dataset: windows in frames rather than
            seconds (``frames=``), a dict as ``delta_timestamps``, or a
            list of offsets for every camera given no window.
        buckets: batch a dataset's images by shape (``buckets=``,
            docs/http-api.md "Shape buckets"): a preset (``"sdxl"``,
            ``"sdxl-768"``, ``"sdxl-512"``) or ``"HxW,HxW,..."``. Each image
            goes to the bucket of nearest aspect ratio, is resized to cover
            it and cropped to it on the gateway; every step is one bucket.
            Over a tree of videos, clip buckets: a preset (``"video-480"``,
            ``"video-720"``) or ``"HxWxT,..."``: one clip a video an epoch,
            of its bucket's frames (``stride``, ``fps`` and ``clip_start``
            apply; ``clip`` and ``step`` are set from the buckets).
            ``batch_size`` and ``offset`` do not apply: a bucket's batch
            size is the budget's, and a job resumes with ``resume``.
        budget: with ``buckets``: the pixels of a rank's batch of a step
            (``budget=``); or ``budget_tokens``, its latent tokens, an
            image of H×W being ceil(H/f)·ceil(W/f) for f = ``vae`` ×
            ``patch`` (defaults 8 and 2).
        budget_tokens, vae, patch: see ``budget``.
        vae_t: with ``buckets`` of clips and ``budget_tokens``: the video
            VAE's temporal factor (default 4): a clip of T frames is
            1 + ceil((T-1)/vae_t) latent frames.
        max_upscale: with ``buckets``: the most an image is scaled up to
            cover its bucket (default 2); ``small``: ``"skip"`` (the
            default: such images, and samples without an image, are left
            out and counted in /epoch/N) or ``"fail"``.
        small: see ``max_upscale``.
        crop: with ``buckets``: where an image is cropped to its bucket,
            ``"center"`` (the default) or ``"random"`` (offsets drawn from
            the sample's key).
        flip: with ``buckets``: the probability an image is flipped left to
            right, drawn from the sample's key (default 0).
        resume: with ``buckets``: the steps of the epoch taken so far, at
            the world sizes they were taken at: ``"4:120,3:40"``.
        run: serve the dataset's samples as runs of ``run`` consecutive
            records of a chunk (``run=``, 2 to 4096; docs/http-api.md
            "Runs"): ``batch_size``, ``offset`` and the epoch count runs,
            and a batch's samples come ``run`` at a time, each run's in
            order.

    Raises:
        ValueError: a value no gateway would take: a rank outside the
            world, a negative offset, an invalid name or weight, a name
            other than the importance job's, ``mix_block`` or
            ``mix_samples`` below 1, a mixture's ``index`` with another
            number of versions than components, a ``transform`` that is no
            pipeline's name, ``columns`` empty, repeated or holding an
            empty name or a comma, a ``balance`` that is not one of the
            four, a ``vision`` that is not a rule's text, a ``seq``,
            ``clip`` or window out of its bounds. Or parameters that do
            not go together, by the gateway's table of features
            (``compat.json``, published by the gateway's
            ``internal/job/features``; docs/http-api.md, "Features and how they
            combine"), with its message: two sources (``dataset``, ``mix``,
            ``mix_schedule``, ``schedule_version``), a parameter that
            shapes a feature the job does not have (``pack`` without
            ``seq``, ``stride`` without a clip job, ``mix_block`` without a
            mixture), a refused pair of features (a mixture with
            ``importance``, ``seq`` with ``importance``, ``transform`` or
            ``columns``, a clip job with ``seq``, ``columns``,
            ``importance``, a mixture or ``balance``, a ``balance`` that
            does not weigh the job's unit), or a rule of the table beyond
            pairs (a vision mixture with ``balance``, ``eos`` without
            ``pack="concat"``, a vision job with ``pack="concat"``, a tree
            of videos' ``stride``, ``fps``, ``step`` or ``clip_start`` with
            a LeRobot job's windows, ``schedule_version`` without
            ``name``). The table is every rule of the kind: this client
            holds none of its own.
    """

    dataset: Optional[str] = None
    seed: int = 0
    batch_size: Optional[int] = None
    window: Optional[int] = None
    world: Optional[int] = None
    rank: Optional[int] = None
    drop_last: bool = False
    offset: int = 0
    locality: bool = True
    name: Optional[str] = None
    weight: Optional[float] = None
    importance: Optional[Importance] = None
    index: Optional[str] = None
    members: Optional[str] = None
    mix: Optional[MixSpec] = None
    mix_block: Optional[int] = None
    mix_samples: Optional[int] = None
    mix_schedule: Optional[str] = None
    schedule_version: Optional[str] = None
    transform: Optional[str] = None
    columns: Optional[Tuple[str, ...]] = None
    seq: Optional[int] = None
    pack: Optional[str] = None
    pad: Optional[int] = None
    eos: Optional[int] = None
    vision: Optional[str] = None
    clip: Optional[int] = None
    stride: Optional[int] = None
    fps: Optional[float] = None
    step: Optional[int] = None
    clip_start: Optional[str] = None
    clip_layout: Optional[str] = None
    gop_window: Optional[int] = None
    delta_timestamps: Optional[Any] = None
    frames: Optional[Any] = None

    balance: Optional[str] = None
    buckets: Optional[str] = None
    budget: Optional[int] = None
    budget_tokens: Optional[int] = None
    vae: Optional[int] = None
    patch: Optional[int] = None
    vae_t: Optional[int] = None
    max_upscale: Optional[float] = None
    small: Optional[str] = None
    crop: Optional[str] = None
    flip: Optional[float] = None
    resume: Optional[str] = None
    run: Optional[int] = None

    def __post_init__(self) -> None:
        # Each parameter's own value first, normalised as it is sent...
        if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral) or not 0 <= self.seed < 1 << 64:
            # True would be sent as "True", which the gateway refuses.
            raise ValueError(f"brand: seed {self.seed!r} must be an unsigned 64-bit integer")
        self._check_tokens()
        self._check_clips()
        if self.run is not None:
            _integer_at_least("run", self.run, 2)
            if self.run > 4096:
                raise ValueError(f"brand: run {self.run} must be 2..4096")
        if self.balance is not None and self.balance not in ("attention", "tokens", "bytes", "vision"):
            raise ValueError(f"brand: balance {self.balance!r} must be 'attention', 'tokens', 'bytes' or 'vision'")
        if self.columns is not None:
            if isinstance(self.columns, str) or not all(isinstance(c, str) for c in self.columns):
                raise TypeError(f"brand: columns {self.columns!r}: a sequence of field names")
            cols = tuple(self.columns)
            if not cols or len(cols) > 256 or len(set(cols)) != len(cols) or \
                    any(not c or "," in c or len(c.encode()) > 256 for c in cols):
                raise ValueError(f"brand: columns {cols!r}: 1 to 256 distinct field names of 1 to 256 bytes, no commas")
            object.__setattr__(self, "columns", cols)
        if self.transform is not None and (not isinstance(self.transform, str) or not _PIPELINE.fullmatch(self.transform)):
            raise ValueError(f"brand: transform {self.transform!r}: a pipeline's name, 1 to 64 of a-z, 0-9, '.', '_', '-'")
        if self.world is not None:
            check_rank(self.world, 0 if self.rank is None else self.rank)
        elif self.rank is not None and self.rank < 0:
            raise ValueError(f"brand: rank {self.rank} must be >= 0")
        if self.offset < 0:
            raise ValueError(f"brand: offset {self.offset} must be >= 0")
        if self.name is not None:
            check_job_name(self.name)
        if self.importance is not None and not isinstance(self.importance, Importance):
            raise TypeError(f"brand: Job.importance is a brand.Importance(name, version, hot), not "
                            f"{type(self.importance).__name__}")
        if self.weight is not None:
            _set(self, "weight", _checked_weight(self.weight))
        self._check_mix()
        self._clip_buckets()
        # ...then whether they go together, by the gateway's table, from
        # the parameters the job sends (every rule of the kind is the
        # table's)...
        _compat.check(job_query(self))
        # ...and the client's own: of its two names, and of a mixture's
        # index, which is never sent.
        self._check_own()

    def _check_tokens(self) -> None:
        """The values of ``seq=`` and its companions."""
        if self.seq is not None:
            _integer_at_least("seq", self.seq, 1)
            if self.seq > 1 << 20:
                raise ValueError(f"brand: seq {self.seq} must be 1..1048576")
        if self.pack not in (None, "bestfit", "concat"):
            raise ValueError(f"brand: pack {self.pack!r} must be 'bestfit' or 'concat'")
        for name, v in (("pad", self.pad), ("eos", self.eos)):
            if v is not None:
                _integer_at_least(name, v, 0)
                if v > (1 << 31) - 1:
                    raise ValueError(f"brand: {name} {v} must be a token ID of int32")
        if self.vision is not None and (not isinstance(self.vision, str) or not self.vision):
            # The gateway reads the rule's parts (vision.ParseRule).
            raise ValueError(f"brand: vision {self.vision!r} must be a rule's text, such as "
                             "'size:448x448,patch:14,image:32000'")

    def _check_clips(self) -> None:
        """The values of ``clip=`` and its companions; the windows kept as
        the gateway's text."""
        for name in ("delta_timestamps", "frames"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, str):
                _set(self, name, format_windows(v, in_frames=name == "frames"))
        if self.clip is not None:
            _integer_at_least("clip", self.clip, 1)
            if self.clip > 4096:
                raise ValueError(f"brand: clip {self.clip} must be 1..4096")
        for name in ("stride", "step"):
            v = getattr(self, name)
            if v is not None:
                _integer_at_least(name, v, 1)
        if self.fps is not None and (isinstance(self.fps, bool) or not isinstance(self.fps, numbers.Real)
                                     or not 0 < self.fps <= 1000):
            raise ValueError(f"brand: fps {self.fps!r} must be a rate in (0, 1000]")
        if self.clip_start not in (None, "random", "first"):
            raise ValueError(f"brand: clip_start {self.clip_start!r} must be 'random' or 'first'")
        if self.clip_layout not in (None, "thwc", "tchw", "cthw"):
            raise ValueError(f"brand: clip_layout {self.clip_layout!r} must be 'thwc', 'tchw' or 'cthw'")
        if self.gop_window is not None:
            _integer_at_least("gop_window", self.gop_window, 1)
            if self.gop_window > 1 << 20:
                raise ValueError(f"brand: gop_window {self.gop_window} must be 1..{1 << 20}")

    def _clip_buckets(self) -> None:
        """A clip bucket job (``buckets`` of HxWxT) is a clip job of one
        clip a video, of the shortest bucket's frames, as the gateway
        derives it (Go's api.Buckets.ClipOf): ``clip`` and ``step`` are set
        here, so that the job sends what the gateway checks."""
        t = _clip_bucket_frames(self.buckets)
        if t is None:
            return
        if self.delta_timestamps is not None or self.frames is not None or self.clip is not None or self.step is not None:
            # Given by the job: the table's to refuse, in its words (as
            # the gateway does), or taken as given.
            return
        _set(self, "clip", t)
        _set(self, "step", _MAX_CLIP_STEP)

    @property
    def clips(self) -> bool:
        """Whether the job serves video clips (``clip``, or a LeRobot
        dataset's ``delta_timestamps`` or ``frames``)."""
        return self.clip is not None or self.delta_timestamps is not None or self.frames is not None

    def _check_mix(self) -> None:
        """The values of ``mix=``, ``mix_schedule=``, ``schedule=`` and the
        mixing block and length; the mixture kept as :func:`format_mix`
        writes it."""
        if self.mix is not None:
            _set(self, "mix", format_mix(self.mix))
        if self.mix_schedule is not None:
            _set(self, "mix_schedule", check_schedule(self.mix_schedule))
        if self.schedule_version is not None and (
                self.schedule_version != "latest" and not re.fullmatch(r"[0-9a-f]{16}", self.schedule_version)):
            raise ValueError(f"brand: schedule_version {self.schedule_version!r}: \"latest\" or a version "
                             "(16 hex digits)")
        for name, v in (("mix_block", self.mix_block), ("mix_samples", self.mix_samples)):
            if v is not None:
                _integer_at_least(name, v, 1)

    def _check_own(self) -> None:
        """The rules of the client's own fields, which the gateway never
        sees as such: a job's name given twice, and a mixture's index
        (checked once the table has taken the job)."""
        # With sampling=importance the gateway takes job= as the importance
        # job's name, so a job has one name.
        if self.importance is not None and self.name is not None and self.name != self.importance.name:
            raise ValueError(
                f"brand: job {self.name!r} and importance job {self.importance.name!r} differ: a job has one name, "
                "and with importance sampling it is the importance job's; give one of them, or the same"
            )
        # The client checks a mixture's answers against its index, one
        # version a component (it is not sent: a mixture reads each
        # component's current version).
        if self.mix is not None and self.index is not None:
            n = len(self.components)
            if len(self.index.split(",")) != n:
                raise ValueError(f"brand: index {self.index!r} of a mixture names one version per component ({n}), "
                                 "comma-separated")

    @property
    def mix_text(self) -> Optional[str]:
        """The mixture the gateway names a batch's (``Brand-Mix``): ``mix``,
        or a ``mix_schedule``'s first phase; ``None`` for one dataset or a
        stored schedule (its plans name it)."""
        if self.mix_schedule is not None:
            return self.mix_schedule.split(";", 1)[0].split(":", 1)[1]
        return None if self.mix is None else str(self.mix)

    @property
    def components(self) -> Tuple[str, ...]:
        """A mixture's datasets in order, numbered as the
        ``Brand-Mix-Components`` header numbers them; empty for one
        dataset."""
        if self.mix_schedule is not None:
            return tuple(c.rpartition(":")[0] for c in (self.mix_text or "").split(","))
        return tuple(name for name, _ in mix_components(self.mix)) if self.mix is not None else ()

    @property
    def sent_name(self) -> Optional[str]:
        """The job's name as the gateway is told it (``job=``): :attr:`name`,
        else the importance job's; ``None`` for an unnamed job."""
        if self.name is not None:
            return self.name
        return self.importance.name if self.importance is not None else None


def _checked_weight(weight: Any) -> float:
    """``weight`` as a float, checked as the gateway checks ``weight=``."""
    # NaN and the infinities fail the comparison too.
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not 0 < weight <= MAX_WEIGHT:
        raise ValueError(
            f"brand: weight {weight!r} must be a number in (0, {MAX_WEIGHT}]: the job's share of a "
            "contended cache relative to other jobs (1 when not given)"
        )
    return float(weight)


@dataclass(frozen=True)
class Connection:
    """How a client's requests reach the gateways.

    Args:
        timeout: socket timeout, in seconds, of each request.
        max_retries: retries of one request after its first attempt, on
            502/503/504 answers and connection errors.
        backoff: seconds before the first retry; doubles with each retry,
            jittered. A gateway's ``Retry-After`` is honoured instead.
        max_backoff: cap on every wait between attempts, ``Retry-After``
            included.
        token: a bearer token sent with every request, for a gateway started
            with ``--auth-token-file``; never shown in errors or in this
            value's ``repr``.
        ca_file: a PEM file of certificate authorities to trust for an
            ``https`` gateway, beside the system's.
        peers: the gateways of a cluster in order, node ``k`` being
            ``peers[k]``: the list every node was given as ``brand serve
            --peers`` (a list, or one comma-separated string; StatefulSet
            patterns such as ``http://brand-{0..3}.brand.ns.svc:8080``
            included), kept as a tuple of URLs. Requests then go to the
            rank's home node, ``rank * N // world``, which caches its
            samples; an attempt that fails there as a retry would (refused
            or reset connection, timeout, 502/503/504) is made at once on
            the next node in order (``home+1, home+2, ...`` mod ``N``),
            within the same ``max_retries``, and the home is tried again
            after ``home_retry`` seconds. Every node serves the same bytes.
            With peers, the client's URL is not contacted and may be empty.
        discover: ask the client's URL for the cluster's peer list (``GET
            /cluster``) before the first request, then route as with
            ``peers``; an epoch that pins another membership version (a
            node joined or left) asks again. A single gateway, or one from
            before clusters, is used alone. Not with ``peers``.
        home_retry: seconds a node whose attempt failed is passed over.
        probe_after: with more than one node, seconds an attempt waits for a
            node's answer before asking the node's ``GET /healthz`` on a
            connection of its own (one second to answer). A node that
            answers is busy and waited for, probed again every
            ``probe_after`` seconds, up to ``timeout``; one that does not (a
            stopped process, a dead host) fails the attempt, which goes on at
            once to the next node, as a refused connection would.
            ``probe_after`` is a ceiling: the first probe comes after a
            deadline learnt from the client's answers (three times the 95th
            percentile of its recent attempts' time to a first byte, at
            least 0.1 s; 0.25 s until it has seen 16) and waits as long
            (0.25 to 1 s), so a node that stops mid-request costs a job's
            step a fraction of a second. As the node is first probed the
            request is hedged on the next node (the first answer is
            read, and a node whose probe then gets no answer is passed
            over). A body
            that sends no byte for the deadline (at least 0.25 s) fails
            over at once, unprobed: a node answers a batch only once it
            holds it whole, so its body stops only when the node or its
            connection has. ``None``:
            wait ``timeout`` without probing. A single gateway is never
            probed.
    """

    timeout: float = 120.0
    max_retries: int = 5
    backoff: float = 0.2
    max_backoff: float = 10.0
    token: Optional[str] = field(default=None, repr=False)
    ca_file: Optional[str] = None
    peers: Optional[Sequence[str]] = None
    discover: bool = False
    home_retry: float = 10.0
    probe_after: Optional[float] = 3.0

    def __post_init__(self) -> None:
        _seconds("timeout", self.timeout, positive=True)
        _integer_at_least("max_retries", self.max_retries, 0)
        _seconds("backoff", self.backoff)
        _seconds("max_backoff", self.max_backoff)
        _seconds("home_retry", self.home_retry)
        if self.probe_after is not None:
            try:
                _seconds("probe_after", self.probe_after, positive=True)
            except ValueError:
                raise ValueError(f"brand: probe_after {self.probe_after!r} must be > 0 seconds, "
                                 "or None never to probe") from None
        if self.peers and self.discover:
            raise ValueError("brand: peers and discover exclude each other: give the peer list or ask for it")
        _set(self, "peers", tuple(n.url for n in parse_peers(self.peers)) if self.peers else None)


@dataclass(frozen=True)
class Options:
    """Everything a :class:`brand.Client` or a
    :class:`~brand.torch.BrandDataset` is told, besides the gateway's URL.

    Args:
        job: the job read (:class:`Job`).
        connection: how the gateways are reached (:class:`Connection`).
        ahead: batches an epoch keeps requested beyond the one being
            consumed, each on its own thread and keep-alive connection; 0:
            one request at a time.
        tune_malloc: call :func:`brand.tune_malloc` (glibc only) when the
            client or dataset is made: reuse freed memory rather than fault
            in every batch's anew. Off by default: it sets malloc's
            thresholds for the whole process (the trainer's, with a
            BrandDataset), which is the program's choice to make.

    Example::

        opts = brand.Options(
            job=brand.Job(dataset="imagenet", batch_size=64, seed=7, world=4, rank=2),
            connection=brand.Connection(token=token, peers="http://brand-{0..3}.brand:8080"),
        )
        c = brand.Client("", opts)
        dataclasses.replace(opts, job=dataclasses.replace(opts.job, rank=3))   # another rank's
    """

    job: Job = field(default_factory=Job)
    connection: Connection = field(default_factory=Connection)
    ahead: int = 2
    tune_malloc: bool = False

    def __post_init__(self) -> None:
        for name, cls in (("job", Job), ("connection", Connection)):
            v = getattr(self, name)
            if not isinstance(v, cls):
                raise TypeError(f"brand: Options.{name} is a brand.{cls.__name__}, not {type(v).__name__}")
        _integer_at_least("ahead", self.ahead, 0)


def job_query(job: Job, index: Optional[str] = None) -> Dict[str, str]:
    """The query parameters that ask a gateway for ``job``'s batches, plans
    and samples: every parameter a client sends of a job is written here.
    A :class:`Job` is checked against the gateway's table of features as
    these parameters name them (:mod:`brand._compat`), so that what is
    checked is what is sent: every field given is sent as given.

    ``index`` is the version read: a client's pin, which may be one it
    learned after ``job`` was made; ``None``: the job's. It is sent for one
    dataset only: a gateway refuses ``index=`` with ``mix=``, and a client
    checks a mixture's answers against its versions instead. Unset fields are left out so
    that the gateway's defaults apply; ``seed`` and ``drop_last`` are always
    sent, ``rank`` with ``world``, ``offset`` when not 0, ``locality`` only
    when off.
    """
    q: Dict[str, str] = {}
    if job.dataset is not None:
        q["dataset"] = job.dataset
    if job.schedule_version is not None:
        q["schedule"] = job.schedule_version
    if job.mix_schedule is not None:
        q["mix_schedule"] = job.mix_schedule
    if job.mix is not None:
        q["mix"] = str(job.mix)
    if job.mix_block is not None:
        q["mix_block"] = str(job.mix_block)
    if job.mix_samples is not None:
        q["mix_samples"] = str(job.mix_samples)
    q["seed"] = str(job.seed)
    if job.batch_size is not None:
        q["batch_size"] = str(job.batch_size)
    if job.window is not None:
        q["window"] = str(job.window)
    if job.world is not None:
        q["world"] = str(job.world)
        q["rank"] = str(job.rank or 0)
    q["drop_last"] = "true" if job.drop_last else "false"
    if job.offset:
        q["offset"] = str(job.offset)
    if not job.locality:
        q["locality"] = "false"
    if job.sent_name is not None:
        q["job"] = job.sent_name
    if job.importance is not None:
        q["sampling"] = "importance"
        if job.importance.version:
            q["importance"] = job.importance.version
        if job.importance.hot:
            q["hot"] = str(job.importance.hot)
    if job.weight is not None:
        q["weight"] = _format_weight(job.weight)
    if index is None:
        index = job.index
    if index and job.mix is None and job.mix_schedule is None and job.schedule_version is None:
        q["index"] = index
    if job.members is not None:
        q["members"] = job.members
    if job.transform is not None:
        q["transform"] = job.transform
    if job.columns is not None:
        q["columns"] = ",".join(job.columns)
    if job.seq is not None:
        q["seq"] = str(job.seq)
    if job.pack is not None:
        q["pack"] = job.pack
    if job.pad is not None:
        q["pad"] = str(job.pad)
    if job.eos is not None:
        q["eos"] = str(job.eos)
    if job.vision is not None:
        q["vision"] = job.vision
    if job.balance is not None:
        q["balance"] = job.balance
    for name in ("clip", "stride", "step", "clip_start", "clip_layout", "delta_timestamps", "frames", "gop_window"):
        v = getattr(job, name)
        if v is not None:
            q[name] = str(v)
    if job.fps is not None:
        q["fps"] = _format_weight(float(job.fps))
    for name in ("buckets", "budget", "budget_tokens", "vae", "patch", "vae_t", "small", "crop", "resume"):
        v = getattr(job, name)
        if v is not None:
            q[name] = str(v)
    for name in ("max_upscale", "flip"):
        v = getattr(job, name)
        if v is not None:
            q[name] = _format_weight(float(v))
    if job.run is not None:
        q["run"] = str(job.run)
    return q


def format_windows(windows: Any, in_frames: bool = False) -> str:
    """A LeRobot job's windows as the gateway reads them
    (``delta_timestamps=``, ``frames=``): ``"KEY:O,O;KEY:O"`` from a dict
    of key to offsets, or ``"O,O"`` from a list of offsets (every camera
    given no window of its own; in frames, whole numbers).

    Raises:
        ValueError: no window, an empty one, a key holding ``:``, ``;``
            or ``,``, an offset that is not a number (or, in frames, not
            whole).
    """
    def offsets(key: str, vals: Any) -> str:
        vals = list(vals)
        if not vals or len(vals) > 4096:
            raise ValueError(f"brand: the window of {key!r} has {len(vals)} offsets (1 to 4096)")
        out = []
        for v in vals:
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or v != v or abs(v) == float("inf"):
                raise ValueError(f"brand: the window of {key!r}: offset {v!r} is not a number")
            if in_frames:
                if int(v) != v:
                    raise ValueError(f"brand: the window of {key!r}: {v!r} frames is not a whole number")
                out.append(str(int(v)))
            else:
                out.append(repr(float(v)) if not float(v).is_integer() else str(int(v)))
        return ",".join(out)

    if isinstance(windows, Mapping):
        if not windows:
            raise ValueError("brand: no window")
        parts = []
        for key, vals in windows.items():
            if not isinstance(key, str) or not key or any(c in key for c in ":;,"):
                raise ValueError(f"brand: a window's key {key!r}: 1 to 256 bytes, no ':', ';' or ','")
            parts.append(f"{key}:{offsets(key, vals)}")
        return ";".join(parts)
    return offsets("every camera", windows)


def _format_weight(w: float) -> str:
    """``w`` in the fewest characters that parse back to it: ``2``,
    ``0.5``, ``1e-05``."""
    return str(int(w)) if w.is_integer() else repr(w)


# -- the flat keywords --------------------------------------------------------

# Each flat keyword: the group that holds it now and the field's name
# there. A Job's fields keep their names, but for the importance triple,
# which is an Importance now. "job" means the Job (Options.job) and nothing
# else: the first releases' job= for the name is read as name=, with a
# DeprecationWarning (resolve).
_GROUPED = {"importance"}
_KEYWORDS: Dict[str, Tuple[str, str]] = {
    **{f.name: ("job", f.name) for f in dataclasses.fields(Job) if f.name not in _GROUPED},
    "importance_job": ("importance", "name"),
    "importance": ("importance", "version"),
    "hot": ("importance", "hot"),
    **{f.name: ("connection", f.name) for f in dataclasses.fields(Connection)},
    "ahead": ("options", "ahead"),
    "tune_malloc": ("options", "tune_malloc"),
}


def resolve(options: Optional[Options], keywords: Mapping[str, Any], who: str) -> Options:
    """``options`` (the defaults if ``None``) with the flat keywords applied
    over them: ``Client(url, batch_size=64, seed=7)`` is ``Client(url,
    Options(job=Job(batch_size=64, seed=7)))``. ``name=`` is the job's
    :attr:`Job.name`, and ``importance_job=``, ``importance=`` and ``hot=``
    make its :class:`Importance`. ``job=`` for the name (the first
    releases') is read as ``name=`` and warns (``DeprecationWarning``).

    Raises:
        TypeError: ``options`` that is not an :class:`Options` (a second
            positional argument of the first releases), an unknown
            keyword, ``job=`` given a :class:`Job` (give
            ``Options(job=...)``), or ``job=`` beside ``name=``.
        ValueError: what the groups' checks raise, or ``importance`` or
            ``hot`` without ``importance_job``.
    """
    if options is None:
        options = Options()
    elif not isinstance(options, Options):
        raise TypeError(f"brand: {who}(url, options): options is a brand.Options, not {type(options).__name__}; "
                        "give job parameters as brand.Options(job=brand.Job(...)) or by keyword (dataset=...)")
    if not keywords:
        return options
    if "job" in keywords:
        keywords = _deprecated_job(keywords, who)
    groups: Dict[str, Dict[str, Any]] = {"job": {}, "importance": {}, "connection": {}, "options": {}}
    for k, v in keywords.items():
        if k not in _KEYWORDS:
            near = difflib.get_close_matches(k, _KEYWORDS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise TypeError(f"brand: {who} got an unknown keyword {k!r}{hint}; its options are the fields of "
                            f"brand.Options, brand.Job and brand.Connection")
        group, name = _KEYWORDS[k]
        groups[group][name] = v
    job = options.job
    if groups["importance"]:
        groups["job"]["importance"] = _importance(job.importance, groups["importance"])
    if groups["job"]:
        job = dataclasses.replace(job, **groups["job"])
    conn = options.connection
    if groups["connection"]:
        conn = dataclasses.replace(conn, **groups["connection"])
    return dataclasses.replace(options, job=job, connection=conn, **groups["options"])


def _deprecated_job(keywords: Mapping[str, Any], who: str) -> Dict[str, Any]:
    """``keywords`` with the first releases' ``job=`` (the job's name) as
    ``name=``, after a DeprecationWarning."""
    if isinstance(keywords["job"], Job):
        raise TypeError(f"brand: {who}(job=...): a brand.Job is given as options=brand.Options(job=...); "
                        "the keywords are the fields of brand.Options, brand.Job and brand.Connection")
    # Points at the caller of Client(...) or BrandDataset(...): resolve,
    # then their __init__, then the caller.
    return renamed_job(keywords, who, stacklevel=4)


def _importance(have: Optional[Importance], given: Dict[str, Any]) -> Optional[Importance]:
    """The Importance that ``importance_job``, ``importance`` and ``hot``
    (``given``, by their Importance field names) make over ``have``: none
    when no importance job is named."""
    fields = {"name": None, "version": None, "hot": 0}
    if have is not None:
        fields.update(dataclasses.asdict(have))
    fields.update({k: v for k, v in given.items() if not (k == "hot" and v is None)})
    if fields["name"] is None:
        if fields["version"] is not None or fields["hot"]:
            raise ValueError("brand: importance and hot need importance_job")
        return None
    return Importance(**fields)
