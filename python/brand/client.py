"""The HTTP client of the Brand gateway (standard library only)."""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import http.client
import os
import json
import random
import socket
import ssl
import threading
import time
import urllib.parse
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Deque, Dict, Iterator, List, Mapping, Optional

from ._tar import Sample, TarError, decode_tar

__all__ = ["BrandError", "BrandConnectionError", "Client", "tune_malloc", "__version__"]

__version__ = "0.1.0"

_USER_AGENT = f"brand-python/{__version__}"
_RETRY_STATUS = frozenset((502, 503, 504))
# Transport failures that may clear up: refused or reset connections, a
# gateway that closed a keep-alive connection, timeouts, short bodies.
_TRANSPORT_ERRORS = (OSError, http.client.HTTPException)


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


class BrandError(Exception):
    """An error answered by the gateway, or its absence.

    Attributes:
        status: the HTTP status (400, 404, 503, ...), or ``None`` when no
            answer came (connection refused, reset, timed out).
        message: the gateway's message (its JSON ``error``), which says what
            to change, e.g. the valid range of a batch number.
        retry_after: seconds the gateway asked to wait (503), or ``None``.
    """

    def __init__(self, message: str, status: Optional[int] = None, retry_after: Optional[float] = None):
        super().__init__(message if status is None else f"{message} (HTTP {status})")
        self.message = message
        self.status = status
        self.retry_after = retry_after


class BrandConnectionError(BrandError, ConnectionError):
    """No answer from the gateway after the client's retries."""


class _Conn(threading.local):
    conn: Optional[http.client.HTTPConnection] = None


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
        token: a bearer token sent with every request, for a gateway
            started with ``--auth-token-file``; never shown in errors.
        ca_file: a PEM file of certificate authorities to trust for an
            ``https`` gateway, beside the system's.
        tune_malloc: call :func:`tune_malloc` (glibc only): reuse freed
            memory rather than fault in every batch's anew.

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
        token: Optional[str] = None,
        ca_file: Optional[str] = None,
        tune_malloc: bool = True,
    ) -> None:
        u = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if u.scheme not in ("http", "https"):
            raise ValueError(f"brand: gateway URL {url!r}: scheme must be http or https")
        if not u.hostname:
            raise ValueError(f"brand: gateway URL {url!r} has no host")
        if world < 1 or not 0 <= rank < world:
            raise ValueError(f"brand: rank {rank} out of range [0, {world}) for world size {world}")
        if offset < 0:
            raise ValueError(f"brand: offset {offset} must be >= 0")
        self.url = url
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port
        self._base = u.path.rstrip("/")
        self.dataset = dataset
        self.seed = seed
        self.batch_size = batch_size
        self.window = window
        self.world = world
        self.rank = rank
        self.drop_last = drop_last
        self.offset = offset
        self.ahead = max(0, ahead)
        self.max_retries = max(0, max_retries)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self._headers = {"User-Agent": _USER_AGENT, "Accept-Encoding": "identity"}
        if token:
            self._headers["Authorization"] = "Bearer " + token
        self._token = token
        self._ca_file = ca_file
        self._ssl = None
        if self._https:
            self._ssl = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()
        self._local = _Conn()
        self._pool: Optional[ThreadPoolExecutor] = None
        self._conns: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        if tune_malloc:
            _tune_malloc()

    # -- parameters -------------------------------------------------------

    def params(self) -> Dict[str, str]:
        """The job's query parameters, as sent with every request."""
        q: Dict[str, str] = {}
        if self.dataset is not None:
            q["dataset"] = self.dataset
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
        return q

    # -- requests ---------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        c = self._local.conn
        if c is None:
            if self._https:
                c = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout, context=self._ssl)
            else:
                c = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            self._local.conn = c
            with self._lock:
                self._conns.append(c)
        return c

    def _drop_connection(self) -> None:
        c = self._local.conn
        self._local.conn = None
        if c is not None:
            c.close()

    def _attempt(self, target: str) -> "tuple[int, Mapping[str, str], bytes]":
        c = self._connection()
        try:
            c.request("GET", target, headers=self._headers)
            r = c.getresponse()
            body = r.read()  # raises IncompleteRead on a short body
            if r.will_close:
                self._drop_connection()
            return r.status, r.headers, body
        except BaseException:
            self._drop_connection()
            raise

    def get(self, path: str, params: Optional[Mapping[str, str]] = None) -> "tuple[Mapping[str, str], bytes]":
        """GET ``path?params``, with retries; returns (headers, body) of a 2xx.

        Raises:
            BrandError: a non-2xx answer (after retries for 502/503/504),
                with the gateway's message and status.
            BrandConnectionError: no answer after ``max_retries`` retries.
        """
        target = self._base + path
        if params:
            target += "?" + urllib.parse.urlencode(params)
        attempt = 0
        while True:
            retry_after = None
            try:
                status, headers, body = self._attempt(target)
            except _TRANSPORT_ERRORS as e:
                err: BrandError = BrandConnectionError(
                    f"brand: GET {self.url}{target}: {type(e).__name__}: {e}"
                )
                err.__cause__ = e
            else:
                if 200 <= status < 300:
                    return headers, body
                err = _api_error(status, headers, body, f"{self.url}{target}")
                if status not in _RETRY_STATUS:
                    raise err
                retry_after = err.retry_after
            if attempt >= self.max_retries:
                if attempt > 0:
                    err.args = (f"{err.args[0]} (after {attempt + 1} attempts)",)
                raise err
            time.sleep(self._wait(attempt, retry_after))
            attempt += 1

    def _wait(self, attempt: int, retry_after: Optional[float]) -> float:
        if retry_after is not None and retry_after > 0:
            return min(retry_after, self.max_backoff)
        d = min(self.backoff * (2**attempt), self.max_backoff)
        return d / 2 + random.random() * d / 2

    # -- API --------------------------------------------------------------

    def datasets(self) -> List[Dict[str, Any]]:
        """The gateway's datasets (``GET /datasets``)."""
        _, body = self.get("/datasets")
        return json.loads(body)["datasets"]

    def epoch_info(self, epoch: int) -> Dict[str, Any]:
        """The plan of ``epoch`` for this job (``GET /epoch/N``) as a dict:
        ``samples`` (whole epoch), ``batches`` (from the offset on),
        ``rank_samples``, and every parameter resolved."""
        _, body = self.get(f"/epoch/{int(epoch)}", self.params())
        return json.loads(body)

    def batch_bytes(self, epoch: int, batch: int, params: Optional[Mapping[str, str]] = None) -> bytes:
        """Batch ``batch`` of ``epoch`` as the gateway's tar bytes."""
        _, body = self.get(f"/epoch/{int(epoch)}/batch/{int(batch)}", params or self.params())
        return body

    def batch(self, epoch: int, batch: int, params: Optional[Mapping[str, str]] = None) -> List[Sample]:
        """Batch ``batch`` of ``epoch``, decoded into samples (dicts in
        WebDataset's convention: ``{"__key__": key, "jpg": b"...", ...}``)."""
        return _decode(epoch, batch, self.batch_bytes(epoch, batch, params))

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
        q = _pinned(info, self.offset)
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
        pending: Deque["Future[bytes]"] = collections.deque()
        nxt = 0
        try:
            while nxt < n and len(pending) <= self.ahead:
                pending.append(pool.submit(self.batch_bytes, epoch, nxt, q))
                nxt += 1
            m = 0
            while pending:
                body = pending.popleft().result()
                if nxt < n:
                    pending.append(pool.submit(self.batch_bytes, epoch, nxt, q))
                    nxt += 1
                b = _decode(epoch, m, body)
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
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            c.close()
        self._local = _Conn()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> Dict[str, Any]:
        # Threads, locks and sockets do not survive pickling (DataLoader
        # workers on spawn); a copy starts with none.
        s = self.__dict__.copy()
        for k in ("_local", "_pool", "_conns", "_lock", "_ssl"):
            s.pop(k)
        return s

    def __setstate__(self, s: Dict[str, Any]) -> None:
        self.__dict__.update(s)
        self._ssl = None
        if self._https:
            self._ssl = ssl.create_default_context(cafile=self._ca_file) if self._ca_file else ssl.create_default_context()
        self._local = _Conn()
        self._pool = None
        self._conns = []
        self._lock = threading.Lock()


def _decode(epoch: int, batch: int, body: bytes) -> List[Sample]:
    try:
        return decode_tar(body)
    except TarError as e:
        raise BrandError(f"brand: epoch {epoch} batch {batch}: {e}") from e


def _pinned(info: Mapping[str, Any], offset: int) -> Dict[str, str]:
    q = {
        "seed": str(info["seed"]),
        "batch_size": str(info["batch_size"]),
        "window": str(info["window"]),
        "world": str(info["world"]),
        "rank": str(info["rank"]),
        "drop_last": "true" if info["drop_last"] else "false",
    }
    if info.get("dataset"):
        q["dataset"] = str(info["dataset"])
    if offset:
        q["offset"] = str(offset)
    return q


def _api_error(status: int, headers: Mapping[str, str], body: bytes, what: str) -> BrandError:
    msg = None
    try:
        doc = json.loads(body)
        if isinstance(doc, dict) and isinstance(doc.get("error"), str):
            msg = doc["error"]
    except ValueError:
        pass
    if msg is None:
        text = body[:200].decode("utf-8", "replace").strip()
        msg = f"GET {what}: HTTP {status}" + (f": {text}" if text else "")
    ra = None
    v = headers.get("Retry-After")
    if v:
        try:
            ra = float(v)
        except ValueError:
            ra = None
    return BrandError(msg, status, ra)
