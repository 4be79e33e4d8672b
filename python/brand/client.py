"""The HTTP client of the Brand gateway (standard library only)."""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import json
import numbers
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Deque, Dict, Iterator, List, Mapping, Optional, Sequence

from . import importance
from ._http import Answer, BrandConnectionError, BrandError, IndexChangedError, Session
from ._mix import MixSpec, format_mix, mix_components
from ._route import Router, parse_node, parse_peers
from ._route import home as _home_of
from ._tar import Sample, TarError, decode_tar
from ._version import __version__

__all__ = ["BrandError", "BrandConnectionError", "Client", "IndexChangedError", "tune_malloc", "__version__"]


# glibc's malloc returns the top of its heap to the kernel once more than
# M_TRIM_THRESHOLD bytes are free there, and serves allocations above
# M_MMAP_THRESHOLD with fresh mappings. A client allocates and frees a
# batch's worth of sample bytes (and a body) for every batch, so with the
# defaults every batch faults its memory in anew: measured, 5 ms to decode a
# 1.1 MB batch of 64 samples instead of 0.1 ms, and recv into fresh pages.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_TRIM_THRESHOLD = 256 << 20  # freed heap kept for reuse
_MMAP_THRESHOLD = 32 << 20  # glibc's maximum: bodies below it come from the heap
_malloc_tuned = False


def _tune_malloc() -> bool:
    """Keep freed memory for reuse instead of faulting it in for every batch.

    On glibc, raises malloc's trim threshold (to 256 MiB) and mmap threshold
    (to 32 MiB, its maximum) for this process, so that a batch's sample bytes
    and body reuse the memory the previous batches freed; the process keeps
    up to 256 MiB of freed heap rather than returning it to the kernel.
    :class:`Client` calls it unless ``tune_malloc=False``; it does nothing if
    the environment sets any ``MALLOC_*_`` tunable (the user chose) or the C
    library is not glibc. Returns whether the thresholds were set.
    """
    global _malloc_tuned
    if _malloc_tuned:
        return True
    if any(k.startswith("MALLOC_") and k.endswith("_") for k in os.environ) or "GLIBC_TUNABLES" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _malloc_tuned = bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
    return _malloc_tuned


tune_malloc = _tune_malloc


class Client:
    """A client of a Brand gateway for one job (one rank of a training run).

    A batch is fully determined by the job parameters, the epoch and the
    batch number, so ranks need no coordination: each asks for its share.
    Parameters left ``None`` take the gateway's defaults; ``seed`` and
    ``drop_last`` default to fixed values so that a program's data order
    never depends on a server flag.

    Args:
        url: the gateway, e.g. ``"http://brand:8080"``.
        dataset: dataset name (``/datasets``); ``None`` for the default.
        seed: shuffle seed, any unsigned 64-bit integer.
        batch_size: samples per rank per batch.
        window: shuffle window, in chunks.
        world: number of ranks reading the epoch together.
        rank: this reader's rank, in ``[0, world)``.
        drop_last: drop the epoch's partial final global batch.
        offset: samples of the epoch already consumed globally (over all
            ranks); batch 0 starts at that epoch position. Used to resume.
        ahead: batches :meth:`epoch` keeps requested beyond the one being
            consumed, each on its own thread and keep-alive connection.
        max_retries: retries of one request after its first attempt, on
            502/503/504 answers and connection errors.
        backoff: seconds before the first retry; doubles with each retry,
            jittered. A gateway's ``Retry-After`` is honoured instead.
        max_backoff: cap on every wait between attempts, ``Retry-After``
            included.
        timeout: socket timeout, in seconds, of each request.
        probe_after: with ``peers`` or ``discover`` (more than one node),
            seconds an attempt waits for a node's answer before asking the
            node's ``GET /healthz`` on a connection of its own (one second
            to answer). A node that answers is busy and waited for,
            probed again every ``probe_after`` seconds, up to ``timeout``;
            one that does not (a stopped process, a dead host) fails the
            attempt, which goes on at once to the next node, as a refused
            connection would. ``None``: wait ``timeout`` without probing. A
            single gateway is never probed.
        token: a bearer token sent with every request, for a gateway
            started with ``--auth-token-file``; never shown in errors.
        ca_file: a PEM file of certificate authorities to trust for an
            ``https`` gateway, beside the system's.
        tune_malloc: call :func:`tune_malloc` (glibc only): reuse freed
            memory rather than fault in every batch's anew.
        peers: the gateways of a cluster in order, node ``k`` being
            ``peers[k]``: the list every node was given as ``brand serve
            --peers`` (a list, or one comma-separated string; StatefulSet
            patterns such as ``http://brand-{0..3}.brand.ns.svc:8080``
            included). Requests then go to this rank's home node, ``rank *
            N // world``, which caches its samples; an attempt that fails
            there as a retry would (refused or reset connection, timeout,
            502/503/504) is made at once on the next node in order
            (``home+1, home+2, ...`` mod ``N``), within the same
            ``max_retries``, and the home is tried again after
            ``home_retry`` seconds. Every node serves the same bytes. With
            peers, ``url`` is not contacted and may be empty.
        discover: ask ``url`` for the cluster's peer list (``GET /cluster``)
            before the first request, then route as with ``peers``. A single
            gateway, or one from before clusters, is used alone at ``url``.
        home_retry: seconds a node whose attempt failed is passed over.
        locality: ``False`` asks a cluster for the plain cut of every global
            batch (``locality=false``) instead of giving each rank the
            samples its home node owns first. A single gateway ignores it.
        job: the job's name (``job=``, 1 to 128 of ``A-Z a-z 0-9 . _ -``,
            not ``.`` or ``..``), sent with every request. The gateway
            follows each named job as a stream of its own in its cache, even
            when another job reads the same order; it changes no byte
            served. Give every rank of a run the same name. ``None``: an
            unnamed job, known by its order, or the ``importance_job``'s
            name.
        weight: the job's share of a contended cache relative to other
            jobs (``weight=``, a number in ``(0, 100]``; the gateway's
            default is 1). It changes no byte served. ``None``: not sent.
        importance_job: sample by importance (``sampling=importance``,
            docs/importance.md) under this job name: report losses with
            :meth:`feedback`, seal each epoch with :meth:`seal` (one rank),
            and read the next epoch after :meth:`set_importance` with the
            version sealed. ``None``: the uniform shuffle. It is also the
            job's name: ``job``, if given too, must be the same name.
        importance: the snapshot version the epochs are drawn from; ``None``
            (an importance job's first epoch) reads the uniform order.
        hot: the heaviest chunks put first in an importance epoch (about
            the gateway's cache size in chunks).
        mix: read a mixture of the gateway's datasets instead of
            ``dataset`` (``mix=``): ``"web:0.7,code:0.3"``, a dict
            ``{"web": 0.7, "code": 0.3}`` or (dataset, weight) pairs, in
            order (see :func:`brand.format_mix`). Each component is read as
            an endless stream of passes over its dataset, each pass in its
            own shuffled order, and every block of ``mix_block`` epoch
            positions holds each component within one sample of its share.
            Every sample carries ``"__dataset__"``, its component's
            dataset. Not with ``dataset`` or ``importance_job``.
        mix_block: the mixing block K (``mix_block=``); ``None``: the
            gateway's default, ``batch_size * world`` of this request. K is
            part of the order: every rank, and a run resumed at another
            world size, must give the same K.
        mix_samples: the mixture epoch's length (``mix_samples=``),
            rounded up to a multiple of K by the gateway; ``None``: the
            components' sizes summed.

    Example::

        c = brand.Client("http://localhost:8080", batch_size=64, world=4, rank=2, seed=7)
        for batch in c.epoch(0):
            for s in batch:
                use(s["__key__"], s["jpg"], s["cls"])
    """

    def __init__(
        self,
        url: str,
        dataset: Optional[str] = None,
        seed: int = 0,
        batch_size: Optional[int] = None,
        window: Optional[int] = None,
        world: int = 1,
        rank: int = 0,
        drop_last: bool = False,
        offset: int = 0,
        *,
        ahead: int = 2,
        max_retries: int = 5,
        backoff: float = 0.2,
        max_backoff: float = 10.0,
        timeout: float = 120.0,
        probe_after: Optional[float] = 3.0,
        token: Optional[str] = None,
        ca_file: Optional[str] = None,
        tune_malloc: bool = True,
        peers: Optional[Sequence[str]] = None,
        discover: bool = False,
        home_retry: float = 10.0,
        locality: bool = True,
        job: Optional[str] = None,
        weight: Optional[float] = None,
        importance_job: Optional[str] = None,
        importance: Optional[str] = None,
        hot: int = 0,
        index: Optional[str] = None,
        mix: Optional[MixSpec] = None,
        mix_block: Optional[int] = None,
        mix_samples: Optional[int] = None,
    ) -> None:
        nodes = parse_peers(peers) if peers else None
        if nodes and not url:
            url = nodes[0].url
        if peers and discover:
            raise ValueError("brand: peers and discover exclude each other: give the peer list or ask for it")
        if home_retry < 0:
            raise ValueError(f"brand: home_retry {home_retry} must be >= 0")
        gw = parse_node(url, strict=False)
        if world < 1 or not 0 <= rank < world:
            raise ValueError(f"brand: rank {rank} out of range [0, {world}) for world size {world}")
        if offset < 0:
            raise ValueError(f"brand: offset {offset} must be >= 0")
        _check_mix_options(mix, dataset, mix_block, mix_samples, importance_job)
        #: The mixture read (``mix=``), in :func:`brand.format_mix`'s
        #: canonical text; ``None`` for one dataset.
        self.mix = format_mix(mix) if mix is not None else None
        self.mix_block = mix_block
        self.mix_samples = mix_samples
        # The components' datasets, by their numbers in Brand-Mix-Components.
        self._mix_names = [name for name, _ in mix_components(self.mix)] if self.mix else []
        if self.mix and index is not None and len(index.split(",")) != len(self._mix_names):
            raise ValueError(f"brand: index {index!r} of a mixture names one version per component "
                             f"({len(self._mix_names)}), comma-separated")
        self.url = url
        self.dataset = dataset
        self.seed = seed
        self.batch_size = batch_size
        self.window = window
        self.world = world
        self.rank = rank
        self.drop_last = drop_last
        self.offset = offset
        self.locality = locality
        if importance_job is None and (importance is not None or hot):
            raise ValueError("brand: importance and hot need importance_job")
        if hot < 0:
            raise ValueError(f"brand: hot {hot} must be >= 0")
        #: The job's name as sent (``job=``): ``job``, else
        #: ``importance_job``; ``None`` for an unnamed job.
        self.job = _job_name(job, importance_job)
        #: The job's cache weight as sent (``weight=``); ``None``: not sent.
        self.weight = _check_weight(weight)
        self.importance_job = importance_job
        self.importance = importance
        self.hot = hot
        self.ahead = max(0, ahead)
        #: The version of the dataset's index this client reads (the
        #: ``Brand-Index`` header's ID): the ``index`` given, else the one
        #: the first answer named. Every request names it, so a dataset
        #: re-packed under a running job never changes the order read: a
        #: gateway without that version answers 409, the client asks the
        #: other nodes, and raises :class:`IndexChangedError` when none
        #: holds it. Save it with a checkpoint to resume on it.
        #:
        #: With ``mix``, the components' versions, comma-separated in the
        #: mixture's order (the ``Brand-Mix-Index`` header). A gateway
        #: cannot be asked for older versions of a mixture's components
        #: (it refuses ``index=`` with ``mix=``), so the client checks
        #: instead: an answer from other versions raises
        #: :class:`IndexChangedError` rather than continue in another order.
        self.index = index
        self._http = Session(timeout=timeout, token=token, ca_file=ca_file, max_retries=max_retries,
                             backoff=backoff, max_backoff=max_backoff, probe_after=probe_after)
        self._pool: Optional[ThreadPoolExecutor] = None
        self._lock = threading.Lock()
        self.peers = [n.url for n in nodes] if nodes else None
        self.discover = discover
        self.home_retry = home_retry
        # The router of the requests: the URL alone, the peers, or (with
        # discover) None until the cluster has answered.
        self._router: Optional[Router] = None
        if nodes:
            self._router = Router(nodes, _home_of(rank, world, len(nodes)), home_retry)
        elif not discover:
            self._router = Router([gw], 0, home_retry)
        self._gateway = gw
        if gw.https or any(n.https for n in nodes or ()):
            self._http.tls()  # a bad ca_file fails here, not at the first batch
        #: Answers received from each node (its URL), for a look at where a
        #: client's requests went.
        self.served: Dict[str, int] = {}
        if tune_malloc:
            _tune_malloc()

    max_retries = property(lambda self: self._http.max_retries, doc="Retries of a request after its first attempt.")
    backoff = property(lambda self: self._http.backoff, doc="Seconds before the first retry that waits.")
    max_backoff = property(lambda self: self._http.max_backoff, doc="Cap on every wait between attempts.")
    timeout = property(lambda self: self._http.timeout, doc="Socket timeout of each request, in seconds.")
    probe_after = property(lambda self: self._http.probe_after, doc="Seconds without an answer before a probe.")

    # -- parameters -------------------------------------------------------

    def params(self) -> Dict[str, str]:
        """The job's query parameters, as sent with every request."""
        q: Dict[str, str] = {}
        if self.dataset is not None:
            q["dataset"] = self.dataset
        q.update(self._mix_params())
        q["seed"] = str(self.seed)
        if self.batch_size is not None:
            q["batch_size"] = str(self.batch_size)
        if self.window is not None:
            q["window"] = str(self.window)
        q["world"] = str(self.world)
        q["rank"] = str(self.rank)
        q["drop_last"] = "true" if self.drop_last else "false"
        if self.offset:
            q["offset"] = str(self.offset)
        if not self.locality:
            q["locality"] = "false"
        q.update(self._job_params())
        if self.index and not self.mix:
            q["index"] = self.index
        return q

    def _mix_params(self) -> Dict[str, str]:
        """The mixture's parameters as given (the plan resolves them)."""
        q: Dict[str, str] = {}
        if self.mix:
            q["mix"] = self.mix
            if self.mix_block is not None:
                q["mix_block"] = str(self.mix_block)
            if self.mix_samples is not None:
                q["mix_samples"] = str(self.mix_samples)
        return q

    def _job_params(self) -> Dict[str, str]:
        """The parameters that name, weigh and sample the job: sent with
        the epoch's plan and, since a plan does not echo them, with every
        batch."""
        q: Dict[str, str] = {}
        if self.job is not None:
            q["job"] = self.job
        if self.importance_job is not None:
            q["sampling"] = "importance"
            if self.importance:
                q["importance"] = self.importance
            if self.hot:
                q["hot"] = str(self.hot)
        if self.weight is not None:
            q["weight"] = _format_weight(self.weight)
        return q

    # -- importance sampling ---------------------------------------------

    def _importance_job(self) -> str:
        if self.importance_job is None:
            raise ValueError("brand: this client has no importance_job")
        return self.importance_job

    def feedback(self, epoch: int, keys: Sequence[str], losses: Sequence[float]) -> int:
        """Report the losses of samples of ``epoch`` by key (a batch's
        ``__key__``); see :func:`brand.importance.feedback`. Sent as every
        request of the client is: to its home node, failing over."""
        return importance.feedback_via(self._send, self._importance_job(), epoch, keys=keys, losses=losses,
                                       dataset=self.dataset)

    def seal(self, epoch: int, prev: Optional[str] = None) -> str:
        """Seal ``epoch``'s feedback onto ``prev`` (``None``: the current
        version) and return the new version; one rank seals."""
        return importance.seal_via(self._send, self._importance_job(), epoch,
                                   prev=self.importance if prev is None else prev, dataset=self.dataset)

    def version_for(self, epoch: int, wait: float = 60.0) -> str:
        """The version sealed for ``epoch``, waiting up to ``wait`` seconds."""
        return importance.version_for_via(self._send, self._importance_job(), epoch, wait=wait, dataset=self.dataset)

    def set_importance(self, version: Optional[str]) -> None:
        """Draw the following epochs from snapshot ``version``."""
        self.importance = version

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
              content_type: Optional[str] = None, accept: Optional[str] = None) -> Answer:
        """Every request of the client: through its router, counted in
        :attr:`served`."""
        a = self._http.send(self._routes(), method, path, params, body, content_type, accept)
        with self._lock:
            self.served[a.node] = self.served.get(a.node, 0) + 1
        self._learn_index(a.headers.get("Brand-Mix-Index" if self.mix else "Brand-Index"))
        return a

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
        failed discovery is tried again at the next request)."""
        r = self._router
        if r is not None:
            return r
        with self._lock:
            if self._router is not None:
                return self._router
        single = Router([self._gateway], 0, self.home_retry)
        try:
            cl = json.loads(self._http.send(single, "GET", "/cluster", {"world": str(self.world)}).body)
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
        h = _home_of(self.rank, self.world, len(nodes))
        if homes:
            # The gateway's layout decides where the rank's samples live.
            if not isinstance(homes, list) or len(homes) != self.world:
                raise BrandError(f"{where}: asked for the homes of {self.world} ranks, got {homes!r}")
            h = homes[self.rank]
            if not isinstance(h, int) or not 0 <= h < len(nodes):
                raise BrandError(f"{where}: home {h!r} of rank {self.rank} is not one of the {len(nodes)} nodes")
        r = Router(nodes, h, self.home_retry)
        for k, n in enumerate(listed):
            if not n.get("up", True):
                r.fail(k)
        return r

    def cluster(self) -> Dict[str, Any]:
        """The cluster's layout (``GET /cluster?world=W``) as this rank's
        node sees it: ``nodes`` (``url``, ``up``), ``self``, and ``homes``,
        every rank's home. A single gateway lists only itself."""
        _, body = self.get("/cluster", {"world": str(self.world)})
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
        _, body = self.get(f"/epoch/{int(epoch)}", self.params())
        info = json.loads(body)
        self._learn_index(_index_of(info))
        return info

    def batch_bytes(self, epoch: int, batch: int, params: Optional[Mapping[str, str]] = None) -> bytes:
        """Batch ``batch`` of ``epoch`` as the gateway's tar bytes."""
        return self._batch_answer(epoch, batch, params)[1]

    def _batch_answer(self, epoch: int, batch: int,
                      params: Optional[Mapping[str, str]] = None) -> "tuple[Mapping[str, str], bytes]":
        return self.get(f"/epoch/{int(epoch)}/batch/{int(batch)}", params or self.params())

    def batch(self, epoch: int, batch: int, params: Optional[Mapping[str, str]] = None) -> List[Sample]:
        """Batch ``batch`` of ``epoch``, decoded into samples (dicts in
        WebDataset's convention: ``{"__key__": key, "jpg": b"...", ...}``;
        a mixture's also carry ``"__dataset__"``, the sample's dataset)."""
        q = params or self.params()
        return self._decode(epoch, batch, q, *self._batch_answer(epoch, batch, q))

    def _decode(self, epoch: int, batch: int, params: Mapping[str, str], headers: Mapping[str, str],
                body: bytes) -> List[Sample]:
        """A batch's samples; a mixture's tagged with their datasets."""
        samples = _decode(epoch, batch, body)
        if not self.mix:
            return samples
        where = f"brand: epoch {epoch} batch {batch}"
        got = headers.get("Brand-Mix")
        if got != self.mix:
            # Another mixture (or one dataset) is another order.
            raise BrandError(f"{where}: asked for mixture {self.mix!r}, Brand-Mix says {got!r}")
        comps = _components(headers.get("Brand-Mix-Components"), len(self._mix_names), where)
        if len(samples) < len(comps):
            # Two components may hold equal keys, and a tar cannot tell
            # two adjacent samples of one key from one sample: grouping by
            # key merged some. (It never splits one, so equal counts mean
            # none was merged.) The batch's manifest has each sample's
            # length: the body is their byte ranges back to back.
            samples = self._split(epoch, batch, params, body, where)
        if len(samples) != len(comps):
            raise BrandError(f"{where}: Brand-Mix-Components names {len(comps)} components for {len(samples)} samples")
        for smp, i in zip(samples, comps):
            smp["__dataset__"] = self._mix_names[i]
        return samples

    def _split(self, epoch: int, batch: int, params: Mapping[str, str], body: bytes, where: str) -> List[Sample]:
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
            one = _decode(epoch, batch, body[at:at + n])
            if len(one) != 1:
                raise BrandError(f"{where}: bytes [{at}, {at + n}) hold {len(one)} samples, not one")
            out.append(one[0])
            at += n
        return out

    def epoch(self, epoch: int, info: Optional[Dict[str, Any]] = None) -> Iterator[List[Sample]]:
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
        q = _pinned(info, self.offset, self.locality)
        q.update(self._job_params())
        if self.index and not self.mix:
            q["index"] = self.index
        n = int(info["batches"])
        if self.ahead == 0:
            for m in range(n):
                yield self.batch(epoch, m, q)
            return
        # The threads only fetch (socket reads release the GIL); batches are
        # decoded here, on the consumer's thread. Decoded on the fetching
        # threads, their samples came from glibc's per-thread arenas, whose
        # heaps are unmapped once empty and faulted in again for the next
        # batches: 1.35 CPU-s/GB against 0.4 (100 KiB samples, 3 ahead).
        pool = self._executor()
        pending: Deque["Future[tuple[Mapping[str, str], bytes]]"] = collections.deque()
        nxt = 0
        try:
            while nxt < n and len(pending) <= self.ahead:
                pending.append(pool.submit(self._batch_answer, epoch, nxt, q))
                nxt += 1
            m = 0
            while pending:
                headers, body = pending.popleft().result()
                if nxt < n:
                    pending.append(pool.submit(self._batch_answer, epoch, nxt, q))
                    nxt += 1
                b = self._decode(epoch, m, q, headers, body)
                del body
                m += 1
                yield b
        finally:
            for f in pending:
                f.cancel()

    def samples(self, epoch: int) -> Iterator[Sample]:
        """Every sample of ``epoch`` for this rank, in order."""
        for b in self.epoch(epoch):
            yield from b

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.ahead + 1, thread_name_prefix="brand")
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
        for k in ("_pool", "_lock"):
            s.pop(k)
        s["served"] = {}
        return s

    def __setstate__(self, s: Dict[str, Any]) -> None:
        self.__dict__.update(s)
        self._pool = None
        self._lock = threading.Lock()


#: The largest job weight a gateway takes (``weight=``).
_MAX_WEIGHT = 100


def _job_name(job: Optional[str], importance_job: Optional[str]) -> Optional[str]:
    """The job name a client sends (``job=``): ``job``, else
    ``importance_job``. With ``sampling=importance`` the gateway takes
    ``job=`` as the importance job's name, so a job has one name: both
    given and different is an error.

    Raises:
        ValueError: an invalid ``job``, or ``job`` and ``importance_job``
            that differ.
    """
    if job is None:
        return importance_job
    importance._check_job(job)  # the gateway's rule, as for importance_job's requests
    if importance_job is not None and importance_job != job:
        raise ValueError(
            f"brand: job {job!r} and importance_job {importance_job!r} differ: a job has one name, "
            "and with importance sampling it is the importance job's; give one of them, or the same"
        )
    return job


def _check_weight(weight: Optional[float]) -> Optional[float]:
    """``weight`` as a float, checked as the gateway checks ``weight=``: a
    finite number in ``(0, 100]``; ``None`` stays ``None``.

    Raises:
        ValueError: anything else (a bool or a string included).
    """
    if weight is None:
        return None
    # NaN and the infinities fail the comparison too.
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not 0 < weight <= _MAX_WEIGHT:
        raise ValueError(
            f"brand: weight {weight!r} must be a number in (0, {_MAX_WEIGHT}]: the job's share of a "
            "contended cache relative to other jobs (1 when not given)"
        )
    return float(weight)


def _format_weight(w: float) -> str:
    """``w`` in the fewest characters that parse back to it: ``2``,
    ``0.5``, ``1e-05``."""
    return str(int(w)) if w.is_integer() else repr(w)


def _check_mix_options(mix: Optional[MixSpec], dataset: Optional[str], mix_block: Optional[int],
                       mix_samples: Optional[int], importance_job: Optional[str]) -> None:
    """The rules of ``mix=`` beside the other job parameters, as the
    gateway applies them (the mixture's own text is :func:`format_mix`'s).

    Raises:
        ValueError: ``mix`` with ``dataset`` or ``importance_job``,
            ``mix_block`` or ``mix_samples`` without ``mix`` or below 1.
    """
    if mix is None:
        if mix_block is not None or mix_samples is not None:
            raise ValueError("brand: mix_block and mix_samples apply only to a mixture (mix=)")
        return
    if dataset is not None:
        raise ValueError("brand: give mix or dataset, not both: a mixture names its datasets")
    if importance_job is not None:
        raise ValueError("brand: importance sampling is per dataset; a mixture draws uniformly from each component")
    for name, v in (("mix_block", mix_block), ("mix_samples", mix_samples)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1):
            raise ValueError(f"brand: {name} {v!r} must be an integer >= 1")


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


def _decode(epoch: int, batch: int, body: bytes) -> List[Sample]:
    try:
        return decode_tar(body)
    except TarError as e:
        raise BrandError(f"brand: epoch {epoch} batch {batch}: {e}") from e


def _pinned(info: Mapping[str, Any], offset: int, locality: bool = True) -> Dict[str, str]:
    q = {
        "seed": str(info["seed"]),
        "batch_size": str(info["batch_size"]),
        "window": str(info["window"]),
        "world": str(info["world"]),
        "rank": str(info["rank"]),
        "drop_last": "true" if info["drop_last"] else "false",
    }
    mix = info.get("mix")
    if mix:
        # A mixture's plan names it in "dataset"; its block and length are
        # part of the order, pinned as the rest.
        q["mix"] = str(info["dataset"])
        q["mix_block"] = str(mix["block"])
        q["mix_samples"] = str(info["samples"])
    elif info.get("dataset"):
        q["dataset"] = str(info["dataset"])
    if offset:
        q["offset"] = str(offset)
    if not locality:
        # A plan does not say whether locality applies: the job's choice.
        q["locality"] = "false"
    return q
