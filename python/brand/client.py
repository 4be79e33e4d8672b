"""The HTTP client of the Brand gateway (standard library only)."""

from __future__ import annotations

import collections
import json
import re
import sys
import threading
import urllib.parse
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Callable, Deque, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._malloc import tune_malloc
from ._http import (Answer, BrandConnectionError, BrandError, IndexChangedError, MembersUnknownError,
                    ScheduleConflictError, Session)
from ._options import Importance, Job, Options, job_query, resolve
from ._route import Router, parse_node, parse_peers
from ._route import home as _home_of
from ._tar import Sample, TarError, decode_tar
from ._version import __version__

__all__ = ["Batch", "BrandError", "BrandConnectionError", "Client", "IndexChangedError", "MembersUnknownError", "tune_malloc",
           "__version__"]


class Batch(List[Sample]):
    """A batch's samples, as a list, and what its headers say beyond them.

    Attributes:
        missing: samples the gateway left out (``Brand-Missing-Samples``):
            those of a chunk damaged at rest on a gateway run with
            ``--on-damaged-chunk=skip``, or whose image the job's pipeline
            could not transform on one run with ``--on-bad-image=skip``; 0
            for a whole batch. The list holds only the samples sent.
        missing_keys: their keys (``Brand-Missing-Keys``), as far as the
            header names them (it is cut past 2 KiB, so there may be fewer
            than ``missing``).
        transform: the pipeline the images went through
            (``Brand-Transform``); ``None`` for bytes as stored.
        body: a token job's (``seq``) or a transformed batch's buffer,
            which its ``.npy`` members view (``None`` otherwise):
            :func:`brand.sequence_arrays` and
            :func:`brand.torch.sequence_tensors` view a token batch's
            sequences on it.
        geometry: a bucket job's images' size and crop
            (``Brand-Bucket-Geometry``: ``W,H,LEFT,TOP,FLIP`` each,
            semicolon-separated); ``None`` for any other job. Its bucket
            is ``transform`` (``bucket:HxW``).
        epoch_samples: the samples of the epoch as the batch was laid out
            (``Brand-Epoch-Samples``): more or fewer than its plan said
            when an append record or an exclusion list of the job applies
            from a step before the batch's; ``None`` from a gateway that
            does not say.
    """

    missing: int = 0
    missing_keys: "tuple[str, ...]" = ()
    transform: Optional[str] = None
    body: Any = None
    epoch_samples: Optional[int] = None
    geometry: Optional[str] = None


class Client:
    """A client of a Brand gateway for one job (one rank of a training run).

    A batch is fully determined by the job, the epoch and the batch number,
    so ranks need no coordination: each asks for its share.

    Args:
        url: the gateway, e.g. ``"http://brand:8080"``; with
            ``connection.peers`` it is not contacted and may be empty.
        options: the job read, how the gateways are reached and how the
            client behaves (:class:`brand.Options`); ``None``: the defaults.
            A job's ``world`` and ``rank`` left ``None`` are 1 and 0.
        **keywords: the options' fields by the flat names of the first
            releases (``batch_size=64, seed=7, token=...``), applied over
            ``options``; ``name=`` is the job's name and ``importance_job``,
            ``importance`` and ``hot`` its :class:`brand.Importance`
            (``job=`` for the name is deprecated: a job is a
            :class:`brand.Job`).

    Raises:
        ValueError: an option no gateway would take (see :class:`brand.Job`
            and :class:`brand.Connection`), or a malformed URL.
        TypeError: an unknown keyword.

    Example::

        job = brand.Job(batch_size=64, world=4, rank=2, seed=7)
        with brand.Client("http://localhost:8080", brand.Options(job=job)) as c:
            for batch in c.epoch(0):
                for s in batch:
                    use(s["__key__"], s["jpg"], s["cls"])
    """

    def __init__(self, url: str = "", options: Optional[Options] = None, **keywords: Any) -> None:
        opts = resolve(options, keywords, "Client")
        # One reader unless told otherwise (checked again by replace).
        world = 1 if opts.job.world is None else opts.job.world
        rank = 0 if opts.job.rank is None else opts.job.rank
        job = replace(opts.job, world=world, rank=rank)
        #: The options this client reads with: those given, its job's world
        #: and rank filled in, and the importance version
        #: :meth:`set_importance` last set.
        self.options: Options = replace(opts, job=job)
        conn = opts.connection
        # Sorted as a cluster's membership sorts its members: a rank's home
        # is a position in that order.
        nodes = sorted(parse_peers(conn.peers), key=lambda n: n.url) if conn.peers else None
        if nodes and not url:
            url = nodes[0].url
        gw = parse_node(url, strict=False)
        self.url = url
        # The components' datasets, by their numbers in Brand-Mix-Components,
        # and the mixture Brand-Mix names (a stored schedule's: its plans').
        self._mix_names = job.components
        self._mix_text = job.mix_text
        #: The version of the job's stored schedule (``schedule_version``)
        #: this client reads: the one the latest epoch plan was laid out
        #: under, every batch of that epoch pinned to it, or after an edit
        #: the current one the gateway named (every step already read is
        #: the same under both). Save it with a checkpoint; ``None`` for a
        #: job without a stored schedule.
        self.schedule_version: Optional[str] = job.schedule_version
        #: The version of the dataset's index this client reads (the
        #: ``Brand-Index`` header's ID): the job's ``index``, else the one
        #: the first answer named. Every request names it, so a dataset
        #: re-packed under a running job never changes the order read: a
        #: gateway without that version answers 409, the client asks the
        #: other nodes, and raises :class:`IndexChangedError` when none
        #: holds it. Save it with a checkpoint to resume on it.
        #:
        #: With a mixture, the components' versions, comma-separated in the
        #: mixture's order (the ``Brand-Mix-Index`` header). A gateway
        #: cannot be asked for older versions of a mixture's components
        #: (it refuses ``index=`` with ``mix=``), so the client checks
        #: instead: an answer from other versions raises
        #: :class:`IndexChangedError` rather than continue in another order.
        self.index: Optional[str] = job.index
        # The cluster membership version each epoch is read under: (epoch,
        # version) of the latest epoch, pinned by its first answer (see
        # members).
        self._members: Optional["tuple[int, str]"] = None
        self._http = Session(conn)
        self._pool: Optional[ThreadPoolExecutor] = None
        self._lock = threading.Lock()
        self._bodies = _Bodies(opts.ahead + 3)
        # Where batch bodies read as views go first (read_batches_into).
        self._into: Optional[Callable[[int], Any]] = None
        self._views = False  # member_views
        # The router of the requests: the URL alone, the peers, or (with
        # discover) None until the cluster has answered.
        self._router: Optional[Router] = None
        # With discover: the membership version the router's layout lists,
        # and whether an epoch has pinned another one since (nodes joined
        # or left), so that the layout is asked for again.
        self._router_members: Optional[str] = None
        self._rediscover = False
        if nodes:
            self._router = Router(nodes, _home_of(rank, world, len(nodes)), conn.home_retry)
        elif not conn.discover:
            self._router = Router([gw], 0, conn.home_retry)
        self._gateway = gw
        if gw.https or any(n.https for n in nodes or ()):
            self._http.tls()  # a bad ca_file fails here, not at the first batch
        #: Answers received from each node (its URL), for a look at where a
        #: client's requests went.
        self.served: Dict[str, int] = {}
        if opts.tune_malloc:
            tune_malloc()

    # -- parameters -------------------------------------------------------

    def params(self) -> Dict[str, str]:
        """The job's query parameters, as sent with every request (a stored
        schedule's with the version pinned)."""
        job = self.options.job
        if job.schedule_version is not None and self.schedule_version:
            job = replace(job, schedule_version=self.schedule_version)
        return job_query(job, self.index)

    # -- edits and feedback, deprecated: brand.edits ------------------------

    def _editor(self, what: str) -> Any:
        """The :class:`brand.edits.Editor` sending through this client,
        after a DeprecationWarning naming ``what``'s place there."""
        from . import edits  # noqa: PLC0415 - edits is above the client

        warnings.warn(f"brand: Client.{what} is deprecated: use brand.edits.of(client).{what}, which answers a "
                      "typed record and raises brand.EditRefused", DeprecationWarning, stacklevel=3)
        return edits.Editor(client=self)

    def _importance(self) -> Importance:
        imp = self.options.job.importance
        if imp is None:
            raise ValueError("brand: this client's job samples uniformly: give it a Job.importance "
                             "(importance_job=) to report losses and seal")
        return imp

    def feedback(self, epoch: int, keys: Sequence[str], losses: Sequence[float]) -> int:
        """Deprecated: :meth:`brand.edits.Editor.feedback`."""
        return self._editor("feedback").feedback(epoch, keys, losses)

    def seal(self, epoch: int, prev: Optional[str] = None) -> str:
        """Deprecated: :meth:`brand.edits.Editor.seal`."""
        return self._editor("seal").seal(epoch, prev)

    def version_for(self, epoch: int, wait: float = 60.0) -> str:
        """Deprecated: :meth:`brand.edits.Editor.version_for`."""
        return self._editor("version_for").version_for(epoch, wait)

    def set_importance(self, version: Optional[str]) -> None:
        """Draw the following epochs from snapshot ``version`` (what
        :meth:`brand.edits.Editor.seal` or
        :meth:`~brand.edits.Editor.version_for` returned)."""
        job = self.options.job
        job = replace(job, importance=replace(self._importance(), version=version))
        self.options = replace(self.options, job=job)

    def schedule(self) -> Dict[str, Any]:
        """Deprecated: :meth:`brand.edits.Editor.schedule` (this answers
        the gateway's JSON, a dict)."""
        return self._editor("schedule")._schedule()

    def store_schedule(self, schedule: str) -> Dict[str, Any]:
        """Deprecated: :meth:`brand.edits.Editor.store_schedule` (this
        answers a dict)."""
        return self._editor("store_schedule")._store_schedule(schedule)

    def edit_schedule(self, schedule: str, from_step: Union[int, str] = "next",
                      base: Optional[str] = None) -> Dict[str, Any]:
        """Deprecated: :meth:`brand.edits.Editor.edit_schedule` (this
        answers a dict; a refusal raises :class:`ScheduleConflictError`,
        an :class:`brand.EditRefused`)."""
        return self._editor("edit_schedule")._edit_schedule(schedule, from_step, base)

    def exclude(self, keys: Sequence[str], from_step: int, previous: Optional[str] = None) -> Dict[str, Any]:
        """Deprecated: :meth:`brand.edits.Editor.exclude` (this answers a
        dict; a refusal raises :class:`brand.EditRefused`, a
        :class:`BrandError` of the gateway's status)."""
        return self._editor("exclude")._exclude(keys, from_step, previous)

    def exclusion(self) -> Dict[str, Any]:
        """Deprecated: :meth:`brand.edits.Editor.exclusion` (this answers a
        dict)."""
        return self._editor("exclusion")._exclusion()

    def append(self, from_step: int, index: str, previous: Optional[str] = None) -> Dict[str, Any]:
        """Deprecated: :meth:`brand.edits.Editor.append` (this answers a
        dict)."""
        return self._editor("append")._append(from_step, index, previous)

    def append_record(self) -> Dict[str, Any]:
        """Deprecated: :meth:`brand.edits.Editor.append_record` (this
        answers a dict)."""
        return self._editor("append_record")._append_record()

    # -- requests ---------------------------------------------------------

    def get(self, path: str, params: Optional[Mapping[str, str]] = None) -> "tuple[Mapping[str, str], bytes]":
        """GET ``path?params``, with retries; returns (headers, body) of a 2xx.

        With ``peers`` or ``discover``, the request goes to this rank's home
        node and fails over to the next nodes (see the class documentation).

        Raises:
            BrandError: a non-2xx answer (after retries for 502/503/504),
                with the gateway's message and status.
            BrandConnectionError: no answer after ``max_retries`` retries.
        """
        a = self._send("GET", path, params)
        return a.headers, a.body

    def _send(self, method: str, path: str, params: Optional[Mapping[str, str]] = None, body: Optional[bytes] = None,
              content_type: Optional[str] = None, accept: Optional[str] = None,
              into: Optional[Callable[[int], Any]] = None) -> Answer:
        """Every request of the client: through its router, counted in
        :attr:`served`. A request about an epoch names the membership
        version pinned for it (see :attr:`members`; a version no node knows
        any more is :class:`MembersUnknownError`); ``into`` as
        :meth:`brand._http.Session.send` takes it."""
        m = _EPOCH_PATH.match(path)
        epoch = int(m.group(1)) if m else None
        if epoch is not None:
            params = dict(params or {})
            pinned = params.get("members") or self._pinned_members(epoch)
            if pinned:
                params["members"] = pinned
        a = self._http.send(self._routes(), method, path, params, body, content_type, accept, into)
        with self._lock:
            self.served[a.node] = self.served.get(a.node, 0) + 1
            got = a.headers.get("Brand-Members")
            if epoch is not None and got and self.options.job.members is None and (
                    self._members is None or self._members[0] < epoch):
                self._members = (epoch, got)
                if self.options.connection.discover and self._router is not None and got != self._router_members:
                    self._rediscover = True
        self._learn_index(a.headers.get("Brand-Mix-Index" if self._mixed() else "Brand-Index"))
        return a

    def _mixed(self) -> bool:
        j = self.options.job
        return j.mix is not None or j.mix_schedule is not None or j.schedule_version is not None

    def _send_pinned(self, path: str, params: Mapping[str, str], into: Optional[Callable[[int], Any]] = None) -> Answer:
        """_send of a job request; for a stored schedule, on a 409 naming
        the current version (an edit since the one pinned, from a step the
        request reads), the request again under it, which the client pins."""
        try:
            return self._send("GET", path, params, into=into)
        except BrandError as e:
            if e.status != 409 or e.schedule_version is None or "schedule" not in params:
                raise
            self.schedule_version = e.schedule_version
            return self._send("GET", path, {**params, "schedule": e.schedule_version}, into=into)

    def _pinned_members(self, epoch: int) -> Optional[str]:
        with self._lock:
            if self._members is not None and self._members[0] == epoch:
                return self._members[1]
        return None

    @property
    def members(self) -> Optional[str]:
        """The cluster membership version this client pinned for the latest
        epoch it read (the ``Brand-Members`` header of that epoch's first
        answer); ``None`` before, and on a single gateway.

        On a cluster, which rank of a global batch receives which of its
        samples depends on the membership version it is laid out under
        (never which samples the batch holds). Every request of an epoch
        names the version its first answer named, so a node joining or
        leaving mid-epoch does not change the assignment under a job whose
        other ranks read the old one; each epoch pins afresh. A version no
        node knows any more (the gateways keep each in the datasets' stores,
        so only if they cannot write there and have all restarted since) is
        :class:`MembersUnknownError`: the epoch is never moved to another
        version by one rank alone. ``Job.members``, if set, is sent
        instead."""
        with self._lock:
            return None if self._members is None else self._members[1]

    def _learn_index(self, got: Optional[str]) -> None:
        """Record the index version an answer names (a mixture's: its
        components' versions, comma-separated): the first pins it; another
        one afterwards (an answer to a request sent before the pin, served
        after a repack; for a mixture, any answer after a component's
        repack) is :class:`IndexChangedError`."""
        if not got:
            return
        with self._lock:
            if self.index is None:
                self.index = got
                return
            pin = self.index
        if got != pin:
            raise IndexChangedError(f"brand: this client reads index {pin}, a gateway answered from {got}")

    def _routes(self) -> Router:
        """The router of this client's requests, asking ``url`` for the
        cluster's layout first with ``discover`` (once it has answered; a
        failed discovery is tried again at the next request). Once an epoch
        has pinned a membership version other than the layout's, the layout
        is asked for again through the nodes known; if none answers, the
        old one is kept until the next epoch's pin."""
        r = self._router
        if r is not None and not self._rediscover:
            return r
        if r is not None:
            with self._lock:
                if not self._rediscover:
                    return self._router  # type: ignore[return-value]
                self._rediscover = False
            try:
                cl = json.loads(self._http.send(r, "GET", "/cluster", {"world": str(self.options.job.world)}).body)
                nr = self._router_of(cl, Router([self._gateway], 0, self.options.connection.home_retry))
            except (BrandError, ValueError):
                return r
            with self._lock:
                self._router, self._router_members = nr, cl.get("members")
                return nr
        with self._lock:
            if self._router is not None:
                return self._router
        single = Router([self._gateway], 0, self.options.connection.home_retry)
        try:
            cl = json.loads(self._http.send(single, "GET", "/cluster", {"world": str(self.options.job.world)}).body)
        except BrandError as e:
            if e.status != 404:
                raise
            cl = None  # a gateway from before clusters: it is alone
        except ValueError as e:
            raise BrandError(f"brand: GET {self.url}/cluster: bad JSON: {e}") from e
        r = self._router_of(cl, single)
        with self._lock:
            if self._router is None:
                self._router = r
                self._router_members = None if cl is None else cl.get("members")
            return self._router

    def _router_of(self, cl: Optional[Dict[str, Any]], single: Router) -> Router:
        """The router of a discovered layout (``GET /cluster``'s body). A
        single node is reached at ``url``, however it calls itself; nodes
        the answering gateway saw down start passed over."""
        where = f"brand: the cluster layout from {self.url}"
        try:
            listed = [] if cl is None else list(cl["nodes"])
            urls = [str(n["url"]) for n in listed]
            self_k = -1 if cl is None else int(cl.get("self", 0))
            homes = None if cl is None else cl.get("homes")
        except (KeyError, TypeError, ValueError) as e:
            raise BrandError(f"{where} is malformed: {e!r}") from None
        if len(urls) <= 1:
            return single
        if not 0 <= self_k < len(urls):
            raise BrandError(f"{where} was answered by node {self_k} of {len(urls)}")
        try:
            nodes = parse_peers(urls)
        except ValueError as e:
            raise BrandError(f"{where}: {e}") from None
        if len(nodes) != len(urls):
            raise BrandError(f"{where} lists {len(urls)} nodes as {len(nodes)} URLs")
        job = self.options.job
        assert job.world is not None and job.rank is not None  # filled in by __init__
        h = _home_of(job.rank, job.world, len(nodes))
        if homes:
            # The gateway's layout decides where the rank's samples live.
            if not isinstance(homes, list) or len(homes) != job.world:
                raise BrandError(f"{where}: asked for the homes of {job.world} ranks, got {homes!r}")
            h = homes[job.rank]
            if not isinstance(h, int) or not 0 <= h < len(nodes):
                raise BrandError(f"{where}: home {h!r} of rank {job.rank} is not one of the {len(nodes)} nodes")
        r = Router(nodes, h, self.options.connection.home_retry)
        for k, n in enumerate(listed):
            if not n.get("up", True):
                r.fail(k)
        return r

    def cluster(self) -> Dict[str, Any]:
        """The cluster's layout (``GET /cluster?world=W``) as this rank's
        node sees it: ``nodes`` (``url``, ``up``), ``self``, and ``homes``,
        every rank's home. A single gateway lists only itself."""
        _, body = self.get("/cluster", {"world": str(self.options.job.world)})
        return json.loads(body)

    @property
    def home(self) -> Optional[str]:
        """The URL of this rank's home node, once known: with ``peers``, or
        with ``discover`` after the first request; ``url`` for a single
        gateway."""
        r = self._router
        return None if r is None else r.nodes[r.home].url

    # -- API --------------------------------------------------------------

    def datasets(self) -> List[Dict[str, Any]]:
        """The gateway's datasets (``GET /datasets``)."""
        _, body = self.get("/datasets")
        return json.loads(body)["datasets"]

    def epoch_info(self, epoch: int) -> Dict[str, Any]:
        """The plan of ``epoch`` for this job (``GET /epoch/N``) as a dict:
        ``samples`` (whole epoch), ``batches`` (from the offset on),
        ``rank_samples``, and every parameter resolved; a mixture's has
        ``dataset`` the mixture and ``mix``, its ``block`` and
        ``components`` (``dataset``, ``weight``, ``index``, ``samples``,
        ``epoch_samples``, ``first_pass``, ``first_index``)."""
        body = self._send_pinned(f"/epoch/{int(epoch)}", self.params()).body
        info = json.loads(body)
        self._learn_index(_index_of(info))
        self._learn_schedule(info)
        return info

    def _learn_schedule(self, info: Mapping[str, Any]) -> None:
        """Pin the stored schedule's version a plan names, and its mixture."""
        v, mix = info.get("schedule_version"), info.get("mix")
        if self.options.job.schedule_version is None or not v or not mix:
            return
        self.schedule_version = str(v)
        self._mix_text = str(info["dataset"])
        self._mix_names = tuple(str(c["dataset"]) for c in mix["components"])

    def batch_bytes(self, epoch: int, batch: int, params: Optional[Mapping[str, str]] = None) -> Any:
        """Batch ``batch`` of ``epoch`` as the gateway's tar bytes; for a job
        with a ``transform``, a ``memoryview`` of a writable buffer instead
        (which the client reuses once nothing refers to it)."""
        return self._batch_answer(epoch, batch, params)[1]

    def _batch_answer(self, epoch: int, batch: int,
                      params: Optional[Mapping[str, str]] = None) -> "tuple[Mapping[str, str], Any]":
        q = params or self.params()
        # A transformed or token batch is read into a buffer of its own,
        # writable, so that its tensors are handed out as views of it, not
        # copies.
        into = self._body if self._views or "transform" in q or "seq" in q or "buckets" in q or _clips(q) else None
        a = self._send_pinned(f"/epoch/{int(epoch)}/batch/{int(batch)}", q, into=into)
        return a.headers, a.body

    def read_batches_into(self, get: Optional[Callable[[int], Any]]) -> None:
        """Where this client reads the bodies of the batches whose arrays
        it hands out as views of their buffer (transformed, token and clip
        batches): ``get(n)`` returns a writable buffer of ``n`` bytes, or
        ``None`` to use the client's own reused buffers for that batch.
        A :class:`~brand.torch.BrandLoader`'s DataLoader workers give
        shared memory, so that a step's tensors reach the trainer's
        process without a copy. ``None`` restores the default."""
        self._into = get

    def member_views(self, on: bool = True) -> None:
        """Hand every member of a batch out as a ``memoryview`` of the
        batch's buffer (read into :meth:`read_batches_into`'s buffers, or
        the client's own, reused once nothing refers to them) rather than a
        ``bytes`` copy of it, and the buffer as the batch's ``body``: no
        copy of a sample's bytes in the client. ``brand.Samples`` reads so
        (its steps' members are tensors on the buffer)."""
        self._views = bool(on)

    def _body(self, n: int) -> Any:
        """A buffer for a batch body of ``n`` bytes (read_batches_into)."""
        if self._into is not None:
            b = self._into(n)
            if b is not None:
                return b
        return self._bodies.get(n)

    def batch(self, epoch: int, batch: int, params: Optional[Mapping[str, str]] = None) -> Batch:
        """Batch ``batch`` of ``epoch``, decoded into samples (dicts in
        WebDataset's convention: ``{"__key__": key, "jpg": b"...", ...}``;
        a mixture's also carry ``"__dataset__"``, the sample's dataset).

        With the job's ``transform``, each image member arrives as a
        ``.npy`` member (``"npy"``) holding its uint8 tensor, which is a
        ``memoryview`` of the batch's buffer rather than a copy:
        :func:`brand.transform.npy_array` views it as a numpy array, and
        :func:`brand.torch.npy_tensor` as a ``torch.Tensor``, in place.
        Every other member is ``bytes`` as without a transform. A token
        job's (``seq``) ``input_ids.npy`` and ``position_ids.npy`` members
        are such views too, and :func:`brand.sequence_arrays` (numpy) or
        :func:`brand.torch.sequence_tensors` view the batch as two ``(B,
        seq)`` int32 arrays on its buffer.
        """
        q = params or self.params()
        return self._decode(epoch, batch, q, *self._batch_answer(epoch, batch, q))

    def _decode(self, epoch: int, batch: int, params: Mapping[str, str], headers: Mapping[str, str],
                body: Any) -> Batch:
        """A batch's samples, its missing samples and pipeline named; a
        mixture's tagged with their datasets."""
        pipeline = params.get("transform")
        if "buckets" in params:
            # A bucket job's pipeline is its step's bucket's, which the
            # gateway names.
            pipeline = headers.get("Brand-Transform")
            if not pipeline or not pipeline.startswith("bucket:"):
                raise BrandError(f"brand: epoch {epoch} batch {batch}: a bucket job's batch names no bucket "
                                 f"(Brand-Transform {pipeline!r})")
        elif pipeline is not None and headers.get("Brand-Transform") != pipeline:
            # A gateway from before transforms ignores the parameter: its
            # images are not the tensors asked for.
            raise BrandError(f"brand: epoch {epoch} batch {batch}: asked for transform {pipeline!r}, "
                             f"Brand-Transform says {headers.get('Brand-Transform')!r}")
        views = self._views or pipeline is not None or "seq" in params or _clips(params)
        out = Batch(self._samples(epoch, batch, params, headers, body, views))
        out.transform = pipeline
        if views:
            out.body = body
        n = headers.get("Brand-Missing-Samples")
        if n:
            out.missing = int(n)
            out.missing_keys = _missing_keys(headers.get("Brand-Missing-Keys", ""))
        n = headers.get("Brand-Epoch-Samples")
        if n:
            out.epoch_samples = int(n)
        out.geometry = headers.get("Brand-Bucket-Geometry")
        return out

    def _samples(self, epoch: int, batch: int, params: Mapping[str, str], headers: Mapping[str, str],
                 body: Any, npy_views: bool) -> List[Sample]:
        samples = _decode(epoch, batch, body, npy_views, views=self._views)
        mix = self._mix_text
        if mix is None:
            return samples
        where = f"brand: epoch {epoch} batch {batch}"
        got = headers.get("Brand-Mix")
        if got != mix:
            # Another mixture (or one dataset) is another order.
            raise BrandError(f"{where}: asked for mixture {mix!r}, Brand-Mix says {got!r}")
        comps = _components(headers.get("Brand-Mix-Components"), len(self._mix_names), where)
        if len(samples) < len(comps):
            # Two components may hold equal keys, and a tar cannot tell
            # two adjacent samples of one key from one sample: grouping by
            # key merged some. (It never splits one, so equal counts mean
            # none was merged.) The batch's manifest has each sample's
            # length: the body is their byte ranges back to back. A
            # transformed batch's lengths are not the stored ones: a
            # sample's members there have distinct extensions, so a
            # repeated one starts the next sample.
            if npy_views:
                samples = _decode(epoch, batch, body, npy_views, split_repeats=True, views=self._views)
            else:
                samples = self._split(epoch, batch, params, body, where, npy_views)
        if len(samples) != len(comps):
            raise BrandError(f"{where}: Brand-Mix-Components names {len(comps)} components for {len(samples)} samples")
        for smp, i in zip(samples, comps):
            smp["__dataset__"] = self._mix_names[i]
        return samples

    def _split(self, epoch: int, batch: int, params: Mapping[str, str], body: Any, where: str,
               npy_views: bool = False) -> List[Sample]:
        """A batch's samples, each decoded from its own byte range, whose
        lengths the batch's manifest gives in the tar's order."""
        _, mbody = self.get(f"/epoch/{int(epoch)}/batch/{int(batch)}/manifest", params)
        try:
            lengths = [int(m["length"]) for m in json.loads(mbody)["samples"]]
        except (KeyError, TypeError, ValueError) as e:
            raise BrandError(f"{where}: the batch's manifest is malformed: {e!r}") from None
        if sum(lengths) + 2 * 512 != len(body):  # the ranges, then the tar's two zero blocks
            raise BrandError(f"{where}: the manifest's samples span {sum(lengths)} bytes of a {len(body)}-byte batch")
        out: List[Sample] = []
        at = 0
        for n in lengths:
            part = body[at:at + n] if isinstance(body, bytes) else memoryview(body)[at:at + n]
            one = _decode(epoch, batch, part, npy_views, views=self._views)
            if len(one) != 1:
                raise BrandError(f"{where}: bytes [{at}, {at + n}) hold {len(one)} samples, not one")
            out.append(one[0])
            at += n
        return out

    def epoch(self, epoch: int, info: Optional[Dict[str, Any]] = None) -> Iterator[Batch]:
        """Every batch of ``epoch`` for this rank, in order, as lists of samples.

        Fetches the epoch's plan first, then requests every batch with the
        plan's parameters spelled out (so all of them come from one shuffle
        even if gateways behind a balancer have other defaults), keeping
        ``ahead`` requests in flight on threads. Closing the iterator (or
        breaking out of the loop) drops the outstanding requests.
        """
        if info is None:
            info = self.epoch_info(epoch)
        self._learn_index(_index_of(info))
        self._learn_schedule(info)
        job = self.options.job
        if job.schedule_version is not None and self.schedule_version:
            job = replace(job, schedule_version=self.schedule_version)
        q = job_query(_planned(job, info), self.index)
        n = int(info["batches"])
        ahead = self.options.ahead
        if ahead == 0:
            m = 0
            while m < n:
                headers, body = self._batch_answer(epoch, m, q)
                n = self._epoch_batches(epoch, m, n, headers)
                yield self._decode(epoch, m, q, headers, body)
                m += 1
            return
        # The threads only fetch (socket reads release the GIL); batches are
        # decoded here, on the consumer's thread. Decoded on the fetching
        # threads, their samples came from glibc's per-thread arenas, whose
        # heaps are unmapped once empty and faulted in again for the next
        # batches: 1.35 CPU-s/GB against 0.4 (100 KiB samples, 3 ahead).
        pool = self._executor()
        pending: Deque["Future[tuple[Mapping[str, str], Any]]"] = collections.deque()
        nxt = 0
        try:
            while nxt < n and len(pending) <= ahead:
                pending.append(pool.submit(self._batch_answer, epoch, nxt, q))
                nxt += 1
            m = 0
            while pending:
                headers, body = pending.popleft().result()
                n = self._epoch_batches(epoch, m, n, headers)
                while nxt < n and len(pending) <= ahead:
                    pending.append(pool.submit(self._batch_answer, epoch, nxt, q))
                    nxt += 1
                b = self._decode(epoch, m, q, headers, body)
                del body
                m += 1
                yield b
        finally:
            for f in pending:
                f.cancel()

    def _epoch_batches(self, epoch: int, m: int, n: int, headers: Mapping[str, str]) -> int:
        """The batches of the epoch batch ``m`` is read under: ``n``, the
        plan's, or, when the batch reports an epoch of another size (an
        append record applies from its step: POST /jobs/NAME/append), the
        count of the epoch's plan asked for again, which the batch must
        agree with. The loop then goes on to the epoch's new end."""
        got = headers.get("Brand-Epoch-Batches")
        if got is None or int(got) == n:
            return n
        info = self.epoch_info(epoch)
        if int(info["batches"]) != int(got):
            raise BrandError(f"brand: epoch {epoch} batch {m} reports {got} batches, its plan {n}, "
                             f"and the plan asked for again {info['batches']}")
        return int(info["batches"])

    def samples(self, epoch: int) -> Iterator[Sample]:
        """Every sample of ``epoch`` for this rank, in order."""
        for b in self.epoch(epoch):
            yield from b

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.options.ahead + 1, thread_name_prefix="brand")
        return self._pool

    def close(self) -> None:
        """Stop the read-ahead threads and close every connection."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> Dict[str, Any]:
        # Threads, locks and sockets do not survive pickling (DataLoader
        # workers on spawn); a copy starts with none.
        s = self.__dict__.copy()
        for k in ("_pool", "_lock", "_bodies"):
            s.pop(k)
        s["_into"] = None  # a process's own memory
        s["served"] = {}
        return s

    def __setstate__(self, s: Dict[str, Any]) -> None:
        self.__dict__.update(s)
        self._pool = None
        self._lock = threading.Lock()
        self._bodies = _Bodies(self.options.ahead + 3)


class _Bodies:
    """The buffers transformed batches are read into, reused once nothing
    refers to them: a batch's tensors are views of its buffer, so a buffer
    is free again only when every sample, tensor and view of it is gone.
    A fresh buffer of a batch's size costs its pages' faults (and, made on
    a fetching thread, glibc's per-thread heaps hand them back to the
    kernel when freed): 100 µs a 150 KB image on a small VM, more than
    decoding the batch. At most ``keep`` are kept; a batch that finds none
    free gets a new buffer.

    A body is a ``memoryview`` of its buffer, of the answer's length.
    """

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.lock = threading.Lock()
        self.free: List[bytearray] = []

    def get(self, n: int) -> memoryview:
        with self.lock:
            for buf in self.free:
                # The list's reference and getrefcount's own: no sample,
                # view or tensor holds it.
                if len(buf) >= n and sys.getrefcount(buf) == 3:
                    return memoryview(buf)[:n]
            buf = bytearray(n)
            if len(self.free) < self.keep:
                self.free.append(buf)
            elif self.free:
                # Keep the newest buffers: the oldest are those a consumer
                # holds on to.
                self.free.pop(0)
                self.free.append(buf)
            return memoryview(buf)


#: A request about an epoch: its number.
_EPOCH_PATH = re.compile(r"^/epoch/(\d+)(?:/|$)")

def _index_of(info: Mapping[str, Any]) -> Optional[str]:
    """The index version an epoch plan names: its ``index``, or a
    mixture's components' versions, comma-separated (as in
    ``Brand-Mix-Index``)."""
    mix = info.get("mix")
    if mix:
        return ",".join(str(c["index"]) for c in mix["components"])
    return info.get("index")


def _components(header: Optional[str], k: int, where: str) -> List[int]:
    """A mixture batch's ``Brand-Mix-Components``: each sample's component
    number, in the tar's order (none for an empty batch).

    Raises:
        BrandError: an entry that is not one of the ``k`` components.
    """
    if not header:
        return []
    out = []
    for c in header.split(","):
        try:
            i = int(c)
        except ValueError:
            i = -1
        if not 0 <= i < k:
            raise BrandError(f"{where}: Brand-Mix-Components {c!r} is not a component of the {k}")
        out.append(i)
    return out


def _decode(epoch: int, batch: int, body: Any, npy_views: bool = False, split_repeats: bool = False,
            views: bool = False) -> List[Sample]:
    try:
        return decode_tar(body, npy_views, split_repeats, views)
    except TarError as e:
        raise BrandError(f"brand: epoch {epoch} batch {batch}: {e}") from e


def _missing_keys(header: str) -> "tuple[str, ...]":
    """The keys ``Brand-Missing-Keys`` names: comma-separated, each with
    ``%``, ``,``, spaces and bytes outside printable ASCII written ``%XX``,
    and a last entry ``…`` where the header was cut."""
    return tuple(urllib.parse.unquote(k, errors="surrogateescape") for k in header.split(",") if k and k != "…")


def _planned(job: Job, info: Mapping[str, Any]) -> Job:
    """``job`` with every parameter its epoch plan resolved spelled out, so
    that all of an epoch's batches come from one shuffle even if gateways
    behind a balancer have other defaults: the dataset by name, the seed,
    batch size, window, world, rank and drop_last, and a mixture's block
    and length, which are part of its order. The job's own offset,
    locality, name, weight and importance stay (a plan does not echo
    them)."""
    mix = info.get("mix")
    return replace(
        job,
        dataset=None if mix else (str(info["dataset"]) if info.get("dataset") else job.dataset),
        seed=int(info["seed"]),
        batch_size=int(info["batch_size"]),
        window=int(info["window"]),
        world=int(info["world"]),
        rank=int(info["rank"]),
        drop_last=bool(info["drop_last"]),
        mix_block=int(mix["block"]) if mix else None,
        mix_samples=int(info["samples"]) if mix else None,
    )


def _clips(params: Mapping[str, str]) -> bool:
    """Whether a job's query is a clip job's: its batch is read into a
    buffer of its own, its frames viewed there."""
    return "clip" in params or "delta_timestamps" in params or "frames" in params
