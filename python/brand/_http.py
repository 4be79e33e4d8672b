"""How the package talks to gateways: every request of :class:`brand.Client`
and :mod:`brand.importance` goes through :meth:`Session.send`.

A :class:`Session` owns what the two used to each do their own way: the
keep-alive connections (one per thread and node, ``http.client``, TLS with
an extra CA file, a bearer token), the user agent, which answers and
failures are retried (502/503/504, refused or reset connections, timeouts,
short bodies), the wait between attempts (doubling, jittered, or the
gateway's ``Retry-After``), the failover through a :class:`~brand._route.Router`,
and the decoding of the gateway's JSON errors (``{"error": ..., "status":
...}``) into :class:`BrandError`.

A node that accepts connections but never answers (a stopped process: the
kernel completes the TCP handshake for it; a machine cut off from its
network) would hold an attempt for the whole socket timeout. When the
router knows more than one node, an attempt that has had no answer for a
deadline learnt from the session's answers (:class:`_Lag`: three times the
95th percentile of its recent attempts' time to a first byte, at least 0.1
s, at most ``probe_after``; 0.25 s until 16 answers are seen) asks the
node's ``GET /healthz`` on a connection of its own, waiting as long (0.25
to 1 s). No answer: the attempt is abandoned as failed and the next node is
tried at once, unless its hedge (below) is out. An answer: the node is alive, and either busy (a cold batch)
or its connection stalled (a link that flaps drops the request's resends in
step with its outages); the attempt goes on waiting, probing again every
``probe_after`` seconds (each probe waiting a second), up to the timeout.
As the node is first probed the attempt is hedged: the request is also
sent to the next node (within a budget of 20 hedges a second), and the
first to answer is read, the other dropped; a node whose probe then gets
no answer is passed over, the hedge standing in for its attempt. A
node sends a batch's first byte only once it holds the whole batch, so an
answer's body that stops is a node gone silent or a stalled connection,
never a node at work: the learnt deadline (at least 0.25 s) without a
byte fails the attempt over to the next node at once, unprobed. The node
a request goes to after a node that answered nothing, or whose body
stopped, and a hedge's, is told which node that was and for how long
(``Brand-Unanswered``). A single node is never probed: there is nowhere
else to go.

Concurrency: a Session is used by many threads at once; each thread has
its own connection to each node.
"""

from __future__ import annotations

import collections
import email.utils
import http.client
import io
import json
import math
import os
import random
import selectors
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional

from ._options import Connection
from ._route import Node, Router
from ._version import __version__

__all__ = ["Answer", "BrandConnectionError", "BrandError", "Session", "api_error"]

USER_AGENT = f"brand-python/{__version__}"
# Answers that mean "try again": 503 is the gateway's own not-ready answer,
# 502 and 504 a load balancer's while a gateway restarts. No 4xx is retried.
RETRY_STATUS = frozenset((502, 503, 504))
# Transport failures that may clear up: refused or reset connections, a
# gateway that closed a keep-alive connection, timeouts, short bodies, a
# node that stopped answering.
TRANSPORT_ERRORS = (OSError, http.client.HTTPException)
# How long a liveness probe may take: a gateway answers /healthz from its
# HTTP server alone, in well under a millisecond.
PROBE_TIMEOUT = 1.0


class BrandError(Exception):
    """An error answered by the gateway, or its absence.

    Attributes:
        status: the HTTP status (400, 404, 503, ...), or ``None`` when no
            answer came (connection refused, reset, timed out).
        message: the gateway's message (its JSON ``error``), which says what
            to change, e.g. the valid range of a batch number.
        retry_after: seconds the gateway asked to wait (503), or ``None``.
        members: on a 409 for a cluster membership version no node knows
            any more, the version the cluster uses now (``Brand-Members``),
            else ``None``.
        schedule_version: on a 409 for a stored schedule's version that an
            edit has since changed where the request reads, the current
            version (``Brand-Schedule-Version``); on a 409 refusing an edit
            based on a version that is no longer current, the current one;
            else ``None``.
        first_editable_step: on a 409 refusing an edit (a schedule's, an
            exclusion list, an append record) from a step the job has read,
            the first step an edit could start at when it was refused (its
            loaders may have read on since), else ``None``.
        exclusion_version: on a 409 refusing an exclusion list for a job
            that has one, or an extension of a version that is not the
            current one, the current version: the one to extend
            (``previous=``), else ``None``.
        edit_version: on a 409 refusing an edit of a job's chain of
            exclusions and appends that does not name the job's current
            edit (of either kind) as its ``previous=``, that edit, else
            ``None``.
    """

    def __init__(self, message: str, status: Optional[int] = None, retry_after: Optional[float] = None,
                 members: Optional[str] = None, schedule_version: Optional[str] = None,
                 first_editable_step: Optional[int] = None, exclusion_version: Optional[str] = None,
                 edit_version: Optional[str] = None):
        super().__init__(message if status is None else f"{message} (HTTP {status})")
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.members = members
        self.schedule_version = schedule_version
        self.first_editable_step = first_editable_step
        self.exclusion_version = exclusion_version
        self.edit_version = edit_version


class EditRefused(BrandError):
    """An edit of a job (an exclusion list, an append record, a stored
    schedule) or its feedback that the gateway refused: 409 (from a step
    the job has read, or over a version that is no longer the current one),
    400 or 422 (an edit it cannot take; :attr:`message` says why).

    Attributes:
        first_editable_step: on a refusal for a step read, the first step
            an edit could start at when it was refused (the job's loaders
            may have read on since); else ``None``.
        current_version: on a refusal for a version that is not the
            current one, the current one (the job's current edit of its
            chain of exclusions and appends, or its schedule's), to name as
            ``previous`` or ``base``; else ``None``.
    """

    @property
    def current_version(self) -> Optional[str]:
        return self.edit_version or self.exclusion_version or self.schedule_version

    @classmethod
    def of(cls, e: BrandError) -> "EditRefused":
        """``e`` (an edit's refusal) as this type, its fields kept."""
        return cls(e.message, e.status, e.retry_after, e.members, e.schedule_version, e.first_editable_step,
                   e.exclusion_version, e.edit_version)


class ScheduleConflictError(EditRefused):
    """An edit of a job's stored schedule the gateway refused (409): from a
    step the job has read (:attr:`first_editable_step` is the first step an
    edit could start at when it was refused; an edit from ``"next"`` is
    never refused so), or based on a version that is no longer current,
    another edit having been made since (:attr:`schedule_version` names
    the current one; read it before editing over it)."""


class BrandConnectionError(BrandError, ConnectionError):
    """No answer from the gateway after the client's retries."""


class IndexChangedError(BrandError):
    """No gateway answers from the dataset's index version the client reads
    (:attr:`brand.Client.index`): the dataset was re-packed since the job
    began and no node holds the old version any more, or a gateway answered
    from another version. Start the epoch again on the new version (a new
    client, or ``index=None``)."""


class MembersUnknownError(BrandError):
    """No gateway knows the cluster membership version the epoch is laid
    out under any more (:attr:`brand.Client.members`): every node has
    restarted since the epoch was pinned, and the datasets' stores keep no
    list of it (the gateways cannot write there). No rank can finish the
    epoch under that version, and one that moved to another on its own
    would split a step between two layouts, some samples twice and some
    never. Start the epoch again on every rank: its first answer pins the
    version the cluster uses. :attr:`members` names it."""


class Answer(NamedTuple):
    """A 2xx answer: the URL of the node that gave it, its headers, its body
    (``bytes``, or the buffer :meth:`Session.send`'s ``into`` made)."""

    node: str
    headers: Mapping[str, str]
    body: Any


def api_error(method: str, status: int, headers: Mapping[str, str], body: bytes, where: str) -> BrandError:
    """The :class:`BrandError` of a non-2xx answer to ``method where``: the
    gateway's JSON ``error`` as the message when the body has one, else the
    start of the body."""
    msg = None
    version = (headers.get("Brand-Schedule-Version") or None) if status == 409 else None
    step = excluded = edited = None
    try:
        doc = json.loads(body)
        if isinstance(doc, dict) and isinstance(doc.get("error"), str):
            msg = doc["error"]
            if status == 409:
                # An edit's 409 says what to do instead in fields.
                if version is None and isinstance(doc.get("schedule_version"), str):
                    version = doc["schedule_version"]
                if isinstance(doc.get("first_editable_step"), int):
                    step = doc["first_editable_step"]
                if isinstance(doc.get("exclusion_version"), str):
                    excluded = doc["exclusion_version"]
                if isinstance(doc.get("edit_version"), str):
                    edited = doc["edit_version"]
    except ValueError:
        pass
    if msg is None:
        text = body[:200].decode("utf-8", "replace").strip()
        msg = f"{method} {where}: HTTP {status}" + (f": {text}" if text else "")
    return BrandError(msg, status, retry_after(headers.get("Retry-After")), headers.get("Brand-Members") or None,
                      version, step, excluded, edited)


def retry_after(v: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """A ``Retry-After`` value in seconds: delay-seconds or an HTTP date
    (``now`` in seconds since the epoch, for the tests). ``None`` when
    absent or unreadable; a date in the past is 0."""
    if not v:
        return None
    v = v.strip()
    try:
        s = float(v)
        return s if math.isfinite(s) and s >= 0 else None
    except ValueError:
        pass
    try:
        t = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if t.tzinfo is None:
        return None  # HTTP dates are GMT; one without a zone is no HTTP date
    return max(0.0, t.timestamp() - (time.time() if now is None else now))


def _read_into(r: http.client.HTTPResponse, into: Callable[[int], Any]) -> Any:
    """``r``'s body, read into the buffer ``into`` makes for its length.
    Raises ``IncompleteRead`` on a short body, as ``read`` does."""
    n = r.length
    if n is None:  # no Content-Length: read it whole, then copy it over
        data = r.read()
        buf = into(len(data))
        memoryview(buf).cast("B")[:] = data
        return buf
    buf = into(n)
    view = memoryview(buf).cast("B")
    got = 0
    while got < n:
        k = r.readinto(view[got:])
        if not k:
            raise http.client.IncompleteRead(bytes(view[:got]), n - got)
        got += k
    return buf


class _Counted:
    """A connection's socket as ``http.client`` sees it while an answer is
    read under a :class:`_Stalls` watch: the file its response reads
    through counts each read from the socket (``_Reading.step``), so that
    the watch sees the body arrive. Everything else is the socket's."""

    def __init__(self, sock: socket.socket, rd: "_Reading") -> None:
        self._sock = sock
        self._rd = rd

    def makefile(self, mode: str = "r", *args: Any, **kw: Any) -> Any:
        if mode != "rb":
            return self._sock.makefile(mode, *args, **kw)
        return io.BufferedReader(_CountingIO(self._sock.makefile("rb", buffering=0), self._rd))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _CountingIO(io.RawIOBase):
    """A raw socket file whose reads step a :class:`_Reading`."""

    def __init__(self, raw: Any, rd: "_Reading") -> None:
        super().__init__()
        self._raw = raw
        self._rd = rd

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> Optional[int]:
        n = self._raw.readinto(b)
        self._rd.step()
        return n

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


class _Lag:
    """The time to a first byte of a Session's attempts on a cluster,
    learnt as the Go client and the gateways' hedged reads learn theirs
    (internal/cluster/hedge): how long an attempt waits before its node is
    first probed, and how long that probe waits. Until enough answers are
    seen it is ``COLD`` (``probe_after`` if shorter): waiting ``probe_after``
    cost a step 3 s and a probe's second on a node gone silent early in an
    epoch, and probing a live node early costs a ``/healthz`` it answers at
    once. It grows with a loaded node's answers, so a busy cluster is
    probed little. It also holds the budget of the session's hedges (a
    token bucket of ``RATE`` a second). Used by many threads at once.
    """

    WINDOW = 256  # latencies kept
    MIN_OBSERVED = 16
    QUANTILE = 0.95
    FACTOR = 3.0
    FLOOR = 0.1  # seconds
    COLD = 0.25  # seconds: the deadline until MIN_OBSERVED answers are seen
    MIN_PROBE = 0.25  # the shortest a first probe waits for an answer
    RATE = 20.0  # hedges a second, in bursts of as many

    def __init__(self, ceiling: float) -> None:
        self.ceiling = ceiling
        self._lat: "collections.deque[float]" = collections.deque(maxlen=self.WINDOW)
        self._lock = threading.Lock()
        self._tokens = self.RATE
        self._last = time.monotonic()

    def observe(self, seconds: float) -> None:
        with self._lock:
            self._lat.append(seconds)

    def deadline(self) -> float:
        with self._lock:
            lat = sorted(self._lat)
        if len(lat) < self.MIN_OBSERVED:
            return min(self.COLD, self.ceiling)
        q = lat[min(len(lat) - 1, math.ceil(self.QUANTILE * len(lat)) - 1)]
        return min(max(q * self.FACTOR, min(self.FLOOR, self.ceiling)), self.ceiling)

    def allow(self) -> bool:
        """Takes a hedge from the budget; False: the attempt waits for its
        node alone."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.RATE, self._tokens + (now - self._last) * self.RATE)
            self._last = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True

    def first(self) -> "tuple[float, float]":
        """When to probe first, and how long that probe waits."""
        after = self.deadline()
        return after, min(max(after, self.MIN_PROBE), PROBE_TIMEOUT)


class _Unresponsive(TimeoutError):
    """A node that answered neither the request nor a liveness probe."""


class _Silent(_Unresponsive):
    """A node that sent no answer's headers and did not answer a liveness
    probe either, or whose answer stopped midway (:class:`_Stalled`): the
    node the request goes to next is told (:func:`_unanswered`)."""


class _Stalled(_Silent):
    """A node (the attempt's, or its hedge's) whose answer sent no byte for
    ``waited`` seconds, the learnt deadline or more (:class:`_Stalls`)."""

    def __init__(self, node: Node, waited: float) -> None:
        super().__init__(f"{node.origin}'s answer sent no byte for {waited:.3g} s, the deadline learnt from its answers")
        self.node = node
        self.waited = waited


def _unanswered(headers: Mapping[str, str], node: Node, waited: float) -> "dict[str, str]":
    """``headers`` telling the node a request goes to that ``node`` did not
    answer it for ``waited`` seconds (``Brand-Unanswered``): a hedge, or a
    failover from a silent node. That node has not seen the silence yet
    (it hears from its peers once a probe interval), and reads the silent
    node's chunks elsewhere at once rather than wait on it first, up to
    its hedge deadline and more (docs/scale-out.md, "Hedged reads")."""
    out = dict(headers)
    out["Brand-Unanswered"] = node.url
    out["Brand-Unanswered-For"] = str(max(1, int(waited * 1000)))
    return out


def _passed_over(router: Router, k: int) -> Callable[[], None]:
    """Passes node ``k`` over in ``router``; returns the undo."""
    mark = router.fail(k)
    return lambda: router.unfail(k, mark)


class _Background:
    """A call that may block (a hedge's connect and send, a probe) run on a
    thread of its own, its end signalled on a socket a selector waits on
    beside others (``fileno``). Its result is taken once (``take``, after
    the signal) or abandoned (``abandon``: closed when the call ends, if
    ``closed``). A call that raises returns ``None``."""

    def __init__(self, call: "Callable[[], Any]", closed: bool = True) -> None:
        self._r, self._w = socket.socketpair()
        self._lock = threading.Lock()
        self._done = self._abandoned = False
        self._closed = closed
        self._value: Any = None
        threading.Thread(target=self._run, args=(call,), name="brand-hedge", daemon=True).start()

    def _run(self, call: "Callable[[], Any]") -> None:
        try:
            value = call()
        except BaseException:  # noqa: BLE001 - a hedge that failed is a hedge not sent
            value = None
        with self._lock:
            self._done = True
            if self._abandoned:
                if value is not None and self._closed:
                    value.close()
            else:
                self._value = value
        try:
            self._w.send(b"\0")
        except OSError:
            pass
        finally:
            self._w.close()

    def fileno(self) -> int:
        return self._r.fileno()

    def take(self) -> Any:
        """The call's result, once its end was signalled."""
        with self._lock:
            value, self._value, self._abandoned = self._value, None, True
        self._r.close()
        return value

    def abandon(self) -> None:
        """Lets the call's result go: closed now if it ended, else when it
        does."""
        with self._lock:
            self._abandoned = True
            value, self._value = self._value, None
        if value is not None and self._closed:
            value.close()
        self._r.close()


class _Watch:
    """The waits of one attempt on a node that may have stopped: up to
    ``timeout`` in all, probing the node (``alive(wait)`` returns whether
    it answered within ``wait``) after ``first`` (:meth:`_Lag.first`),
    then every ``probe_after`` seconds without progress. A probe without
    an answer ends the attempt (:class:`_Silent`), unless a hedge is out
    (:meth:`first_of`), which then answers for the node. A hedge that
    wins before the node answered its first probe passes the node over
    (``pass_over()``, which returns its undo), and the probe, left to
    finish, takes it back if it answers: a node that answers is alive (a
    cold batch, a stalled connection), and a cold batch still comes from
    its home first.
    """

    def __init__(self, timeout: float, first: "tuple[float, float]", probe_after: float,
                 alive: Callable[[float], bool],
                 pass_over: "Callable[[], Callable[[], None]]" = lambda: lambda: None) -> None:
        now = time.monotonic()
        self.deadline = now + timeout
        self.first = first[0]
        self.wait = first[1]
        self.probe_after = probe_after
        self.probe_at = now + first[0]
        self.alive = alive
        self.pass_over = pass_over
        self._lock = threading.Lock()
        self._probed: Optional[bool] = None  # the first probe's outcome, beside a hedge
        self._undo: "Optional[Callable[[], None]]" = None  # a pass-over the probe takes back if answered

    def _first_probe(self, wait: float) -> bool:
        """The first probe, beside a hedge (on a thread of its own)."""
        ok = self.alive(wait)
        with self._lock:
            self._probed = ok
            undo = self._undo
        if ok and undo is not None:
            undo()
        return ok

    def _hedge_won(self) -> None:
        """Passes the node over once the hedge won, unless its first probe
        answered; if that probe is still out, it takes the node back if it
        answers."""
        with self._lock:
            if self._probed is None:
                self._undo = self.pass_over()
                return
            probed = self._probed
        if not probed:
            self.pass_over()

    def _until(self) -> float:
        """Seconds to wait until the next probe or the deadline, probing
        first if a probe is due. Raises at the deadline, or when the probe
        gets no answer."""
        while True:
            now = time.monotonic()
            if now >= self.deadline:
                raise TimeoutError("timed out")
            if now < self.probe_at:
                return min(self.deadline, self.probe_at) - now
            if not self.alive(self.wait):
                raise self._unanswered(self.wait)
            self.probe_at = time.monotonic() + self.probe_after
            self.wait = PROBE_TIMEOUT

    def _unanswered(self, wait: float) -> _Silent:
        return _Silent(f"no answer in {self.first:.3g} s or more, nor to GET /healthz in {wait:.3g} s")

    def first_of(
        self, sock: socket.socket, hedge: "Optional[Callable[[], Optional[http.client.HTTPConnection]]]",
    ) -> "tuple[int, Optional[http.client.HTTPConnection]]":
        """Returns once ``sock`` can be read (0) or once the socket of the
        request ``hedge()`` sent to another node can (1); with the hedge's
        connection once it was sent (the caller closes it). At the learnt
        deadline without an answer the attempt is hedged as its node is
        first probed, each on a thread of its own (a hedge's connect and
        send may wait on a silent node for a probe's timeout, while the
        first node answers); ``hedge()`` returns ``None`` when it sent
        nothing (no budget, the other node unreachable), and the attempt
        goes on alone, probed as ever. A first probe without an answer
        ends the attempt only if no hedge is out; once hedged, the first
        node is not probed again: the hedge answers for it.

        It used to hedge only once the first probe had answered and the
        deadline had passed again, and to fail over only once the probe
        had waited its time unanswered: a node gone silent cost the
        deadline and the probe's wait, most of a step's second with
        batches of MiBs (issue 98, item 12), as the Go client's did before
        it hedged at the deadline."""
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return 0, None
        pending: Optional[_Background] = None  # the hedge being sent
        probing: Optional[_Background] = None  # the first probe, sent beside it
        conn: Optional[http.client.HTTPConnection] = None
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(sock, selectors.EVENT_READ, 0)
                hedged = silent = False
                while True:
                    now = time.monotonic()
                    if hedge is not None and now >= self.probe_at:
                        # The deadline: hedged as the node is first probed.
                        pending = _Background(hedge)
                        hedge = None
                        sel.register(pending, selectors.EVENT_READ, 2)
                        probing = _Background(lambda w=self.wait: self._first_probe(w), closed=False)
                        sel.register(probing, selectors.EVENT_READ, 3)
                        continue
                    if hedged or pending is not None or probing is not None:
                        wait = self.deadline - now
                        if wait <= 0:
                            raise TimeoutError("timed out")
                    else:
                        wait = self._until()
                    for key, _ in sel.select(wait):
                        if key.data == 0:
                            return 0, conn
                        if key.data == 1:
                            self._hedge_won()
                            return 1, conn
                        if key.data == 2:
                            assert pending is not None
                            sel.unregister(pending)
                            conn, pending = pending.take(), None
                            if conn is not None and conn.sock is not None:
                                sel.register(conn.sock, selectors.EVENT_READ, 1)
                                hedged = True
                            elif silent:
                                raise self._unanswered(self.wait)
                        else:
                            assert probing is not None
                            sel.unregister(probing)
                            alive, probing = probing.take(), None
                            if not alive:
                                silent = True
                                if not hedged and pending is None:
                                    raise self._unanswered(self.wait)
                            self.probe_at = time.monotonic() + self.probe_after
                            self.wait = PROBE_TIMEOUT
                        break
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        finally:
            if pending is not None:
                pending.abandon()
            if probing is not None:
                probing.abandon()

    def ready(self, sock: socket.socket, write: bool = False) -> None:
        """Returns once ``sock`` can be read (written, with ``write``)."""
        if not write and isinstance(sock, ssl.SSLSocket) and sock.pending():
            return
        # A selector rather than select.select, which fails on descriptors
        # past 1024 (a trainer can hold that many files open).
        with selectors.DefaultSelector() as sel:
            sel.register(sock, selectors.EVENT_WRITE if write else selectors.EVENT_READ)
            while not sel.select(self._until()):
                pass

    def connect(self, addr: "tuple[str, int]") -> socket.socket:
        """A TCP connection to ``addr``, made again after each probe that
        found the node alive (a SYN the node's full queue dropped)."""
        while True:
            wait = self._until()
            try:
                return socket.create_connection(addr, timeout=wait)
            except socket.timeout:
                continue  # _until raises at the deadline or probes

    def handshake(self, tls: ssl.SSLSocket) -> ssl.SSLSocket:
        """``tls`` after its TLS handshake."""
        tls.settimeout(0.0)
        while True:
            try:
                tls.do_handshake()
                return tls
            except ssl.SSLWantReadError:
                self.ready(tls)
            except ssl.SSLWantWriteError:
                self.ready(tls, write=True)


class _Reading:
    """One answer being read under a :class:`_Stalls` watch, which gives
    it up once it has read nothing for ``stall`` seconds."""

    def __init__(self, sock: socket.socket, stall: float) -> None:
        self.sock = sock
        self.stall = stall
        self.last = time.monotonic()  # when the reader last read; the reader's alone to change
        self.look_at = self.last + stall
        self.tripped: Optional[float] = None  # once given up: seconds without a byte

    def step(self) -> None:
        self.last = time.monotonic()


class _Stalls:
    """Watches the answers a Session's threads are reading, after their
    first byte (which :class:`_Watch` waits for): an answer that reads
    nothing for the learnt deadline (at least ``_Lag.MIN_PROBE``) has its
    socket shut down, so that the read blocked on it ends at once (the
    reader then raises :class:`_Stalled`, and the request goes to the
    next node, told which node stopped: :func:`_unanswered`). A node
    sends a batch's first byte only once the batch is read whole, so a
    body that stops is a node gone silent or a stalled connection (a link
    that flaps, dropping the resends in step with its outages), never a
    node at work: it is not probed first. (It was: the deadline, then a
    probe's wait unanswered or the deadline again, counted from when the
    watch noticed a byte rather than from the byte; the partition suite's
    flapping link saw a step of 1.09 s, issue 98, item 12.) A node
    stopped while it wrote a batch would otherwise hold the reader for
    the whole timeout. One thread for all, started at the first watch in
    each process (a forked DataLoader worker starts its own).
    """

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._reading: "set[_Reading]" = set()
        self._pid = 0  # the process whose thread runs

    def watch(self, sock: socket.socket, stall: float) -> _Reading:
        rd = _Reading(sock, stall)
        with self._cv:
            self._reading.add(rd)
            if self._pid != os.getpid():
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="brand-stalls", daemon=True).start()
            self._cv.notify()
        return rd

    def done(self, rd: _Reading) -> None:
        with self._cv:
            self._reading.discard(rd)

    def _run(self) -> None:
        while True:
            with self._cv:
                now = time.monotonic()
                due = [rd for rd in self._reading if rd.look_at <= now]
                if not due:
                    nxt = min((rd.look_at for rd in self._reading), default=now + 60.0)
                    self._cv.wait(nxt - now)
                    continue
                for rd in due:
                    quiet = now - rd.last
                    if quiet < rd.stall:
                        # A byte came since: the deadline from that byte.
                        rd.look_at = rd.last + rd.stall
                        continue
                    rd.tripped = quiet
                    self._reading.discard(rd)
                    try:
                        rd.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass


class _Conns(threading.local):
    """A thread's keep-alive connection to each node (by origin)."""

    def __init__(self) -> None:
        self.by_origin: Dict[str, http.client.HTTPConnection] = {}


class Session:
    """Requests to the nodes of routers, with retries and failover, as a
    :class:`~brand._options.Connection` says: its ``timeout`` (for a
    connection and each read of an answer), ``token`` (sent with every
    request but probes, which the gateway answers without one), ``ca_file``,
    ``max_retries``, ``backoff``, ``max_backoff`` and ``probe_after`` (the
    module's documentation). A Session routes with the routers it is given;
    the connection's peers are the client's business.
    """

    def __init__(self, conn: Connection) -> None:
        self.timeout = conn.timeout
        self.max_retries = conn.max_retries
        self.backoff = conn.backoff
        self.max_backoff = conn.max_backoff
        self.probe_after = conn.probe_after
        self._ca_file = conn.ca_file
        self._headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        if conn.token:
            self._headers["Authorization"] = "Bearer " + conn.token
        self._init_local()

    def _init_local(self) -> None:
        self._lock = threading.Lock()
        self._ssl: Optional[ssl.SSLContext] = None  # made for the first https node
        self._local = _Conns()
        self._all: List[http.client.HTTPConnection] = []
        self._stalls = _Stalls()
        self._lag = _Lag(self.probe_after if self.probe_after is not None else PROBE_TIMEOUT)

    # -- the request ------------------------------------------------------

    def send(
        self,
        router: Router,
        method: str,
        path: str,
        params: Optional[Mapping[str, str]] = None,
        body: Optional[bytes] = None,
        content_type: Optional[str] = None,
        accept: Optional[str] = None,
        into: Optional[Callable[[int], Any]] = None,
    ) -> Answer:
        """``method path?params`` (with ``body``, of ``content_type``) to the
        node ``router`` picks; returns the first 2xx answer.

        ``into(n)``, if given, makes the writable buffer of ``n`` bytes a 2xx
        answer's body is read into, such as a ``bytearray``, so that views of
        it can be handed out without a copy (a body of bytes is immutable);
        the answer's body is then that buffer.

        A failed attempt (a retried status or transport failure) marks its
        node failed in the router; the next attempt goes to the node the
        router picks then: at once if this call has not tried it yet (it
        has no reason to be down too), otherwise, and always with a single
        node, after the backoff. Every request Brand makes is idempotent
        (a GET, or importance feedback and seals), so POSTs are retried as
        GETs are.

        Raises:
            BrandError: a non-2xx answer (after retries for 502/503/504).
            BrandConnectionError: no answer after ``max_retries`` retries.
        """
        query = "?" + urllib.parse.urlencode(params) if params else ""
        headers = dict(self._headers)
        if accept is not None:
            headers["Accept"] = accept
        if content_type is not None:
            headers["Content-Type"] = content_type
        probe = self.probe_after if len(router.nodes) > 1 else None
        tried = set()
        waits = 0  # the backoff grows with the waits, not with failovers
        k = router.pick()
        attempt = 0
        silent: "Optional[tuple[Node, float]]" = None  # the node the last attempt found silent, and for how long
        while True:
            tried.add(k)
            node = router.nodes[k]
            target = node.base + path + query
            h = router.next(k) if probe is not None else -1
            hedge = (router.nodes[h], router.nodes[h].base + path + query) if h >= 0 else None
            wait_for = None
            began = time.monotonic()
            told = _unanswered(headers, *silent) if silent is not None else headers
            silent = None
            try:
                status, got, data, won = self._attempt(node, method, target, body, told, probe, into, hedge,
                                                       lambda k=k: _passed_over(router, k))
                if won:
                    # The hedge's node answered: what follows is of its answer.
                    k, node, target = h, router.nodes[h], hedge[1]  # type: ignore[index]
                    tried.add(k)
            except TRANSPORT_ERRORS as e:
                err: BrandError = BrandConnectionError(
                    f"brand: {method} {node.origin}{target}: {type(e).__name__}: {e}"
                )
                err.__cause__ = e
                if isinstance(e, _Stalled):
                    silent = (e.node, e.waited)  # silent since its last byte
                elif isinstance(e, _Silent):
                    silent = (node, time.monotonic() - began)
            else:
                if 200 <= status < 300:
                    return Answer(node.url, got, data)
                err = api_error(method, status, got, data, f"{node.origin}{target}")
                if status == 409 and err.schedule_version is not None:
                    raise err  # the caller re-pins the schedule's version
                if status == 409 and path.startswith(("/epoch/", "/samples/")):
                    # The node does not hold the index version, or know
                    # the membership version, this job reads; another may.
                    # It is not down: ask the next node not tried, and say
                    # so if none holds it.
                    k = next((j for j in router.order() if j not in tried), -1)
                    if k >= 0:
                        continue
                    if err.members is not None:
                        raise MembersUnknownError(err.message, status, members=err.members) from err
                    raise IndexChangedError(err.message, status) from err
                if status not in RETRY_STATUS:
                    raise err
                wait_for = err.retry_after
            router.fail(k)
            if attempt >= self.max_retries:
                if attempt > 0:
                    err.args = (f"{err.args[0]} (after {attempt + 1} attempts)",)
                raise err
            k = router.pick()
            if k in tried:
                time.sleep(self.wait(waits, wait_for))
                waits += 1
                k = router.pick()  # a node's mark may have ended meanwhile
            attempt += 1

    def wait(self, waits: int, retry_after: Optional[float]) -> float:
        """Seconds to wait before a retry after ``waits`` earlier waits: the
        gateway's ``Retry-After`` if it gave one, else the backoff doubled
        ``waits`` times and drawn from ``[d/2, d]`` so that workers started
        together spread out; ``max_backoff`` caps both."""
        if retry_after is not None and retry_after > 0:
            return min(retry_after, self.max_backoff)
        d = min(self.backoff * (2**waits), self.max_backoff)
        return d / 2 + random.random() * d / 2

    def _attempt(
        self, node: Node, method: str, target: str, body: Optional[bytes], headers: Mapping[str, str],
        probe_after: Optional[float], into: Optional[Callable[[int], Any]] = None,
        hedge: "Optional[tuple[Node, str]]" = None,
        pass_over: "Callable[[], Callable[[], None]]" = lambda: lambda: None,
    ) -> "tuple[int, Mapping[str, str], Any, bool]":
        """One request to ``node`` (hedged on ``hedge``, a node and the
        request's target there: :meth:`_Watch.first_of`); its status,
        headers and body, and whether the hedge's node answered them.
        ``pass_over()`` passes ``node`` over in its router and returns its
        undo (:class:`_Watch`)."""
        c = self._connection(node)
        hc: Optional[http.client.HTTPConnection] = None  # the hedge's connection, once sent
        won = False
        try:
            first = self._lag.first()
            if probe_after is None:
                c.request(method, target, body=body, headers=headers)
            else:
                watch = _Watch(self.timeout, first, probe_after, lambda wait: self._alive(node, wait), pass_over)
                sent = time.monotonic()
                if c.sock is None:
                    c.sock = self._open(node, c.host, c.port, watch)
                c.request(method, target, body=body, headers=headers)

                hedge_sent = [sent]

                def send_hedge() -> Optional[http.client.HTTPConnection]:
                    # On a thread of its own (_Watch.first_of).
                    if hedge is None or not self._lag.allow():
                        return None
                    # Its node is told which node it stands in for.
                    got = self._hedge(hedge[0], method, hedge[1], body,
                                      _unanswered(headers, node, time.monotonic() - sent))
                    hedge_sent[0] = time.monotonic()
                    return got

                which, hc = watch.first_of(c.sock, send_hedge if hedge is not None else None)
                won = which == 1
                self._lag.observe(time.monotonic() - (hedge_sent[0] if won else sent))
                if won:
                    # The first node's request is dropped with its
                    # connection; the hedge's is read, and closed after.
                    assert hc is not None and hedge is not None
                    self._drop(node)
                    c, node, hc = hc, hedge[0], None
            rd = None
            if probe_after is not None:
                rd = self._stalls.watch(c.sock, max(first[0], _Lag.MIN_PROBE))
                sock, c.sock = c.sock, _Counted(c.sock, rd)  # type: ignore[assignment]
            try:
                r = c.getresponse()
                if into is not None and 200 <= r.status < 300:
                    data = _read_into(r, into)
                else:
                    data = r.read()  # raises IncompleteRead on a short body
            except TRANSPORT_ERRORS as e:
                if rd is not None and rd.tripped is not None:
                    raise _Stalled(node, rd.tripped) from e
                raise
            finally:
                if rd is not None:
                    self._stalls.done(rd)
                    if c.sock is not None:
                        c.sock = sock
            if won:
                c.close()
            elif r.will_close:
                self._drop(node)
            return r.status, r.headers, data, won
        except BaseException:
            if won:
                c.close()
            else:
                self._drop(node)
            raise
        finally:
            if hc is not None:
                hc.close()  # a hedge that lost

    def _hedge(self, node: Node, method: str, target: str, body: Optional[bytes],
               headers: Mapping[str, str]) -> Optional[http.client.HTTPConnection]:
        """A connection of its own to ``node`` with the request sent, or
        ``None`` if the node cannot be reached within a probe's timeout."""
        hc = self._new(node, self.timeout)
        try:
            sock = socket.create_connection((hc.host, hc.port), timeout=PROBE_TIMEOUT)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if node.https:
                sock = self.tls().wrap_socket(sock, server_hostname=hc.host)
            sock.settimeout(self.timeout)
            hc.sock = sock
            hc.request(method, target, body=body, headers=headers)
            return hc
        except TRANSPORT_ERRORS:
            hc.close()
            return None

    def _alive(self, node: Node, wait: float = PROBE_TIMEOUT) -> bool:
        """Whether ``node`` answers ``GET /healthz`` within ``wait``, on a
        connection of its own. Any answer will do: it comes from the node's
        HTTP server, which is what a stopped node lacks."""
        c = self._new(node, wait)
        try:
            c.request("GET", node.base + "/healthz", headers={"User-Agent": USER_AGENT})
            c.getresponse()
            return True
        except TRANSPORT_ERRORS:
            return False
        finally:
            c.close()

    # -- connections ------------------------------------------------------

    def _connection(self, node: Node) -> http.client.HTTPConnection:
        c = self._local.by_origin.get(node.origin)
        if c is None:
            c = self._new(node, self.timeout)
            self._local.by_origin[node.origin] = c
            with self._lock:
                self._all.append(c)
        return c

    def _new(self, node: Node, timeout: float) -> http.client.HTTPConnection:
        if node.https:
            return http.client.HTTPSConnection(node.host, node.port, timeout=timeout, context=self.tls())
        return http.client.HTTPConnection(node.host, node.port, timeout=timeout)

    def _open(self, node: Node, host: str, port: int, watch: _Watch) -> socket.socket:
        """A connected socket to ``host:port``, as ``http.client`` makes it
        but through ``watch``: probing while the connection or the TLS
        handshake waits."""
        sock = watch.connect((host, port))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if node.https:
                tls = self.tls().wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
                sock = watch.handshake(tls)
            sock.settimeout(self.timeout)
            return sock
        except BaseException:
            sock.close()
            raise

    def tls(self) -> ssl.SSLContext:
        """The TLS context of ``https`` nodes (a bad ``ca_file`` raises here)."""
        with self._lock:
            if self._ssl is None:
                f = self._ca_file
                self._ssl = ssl.create_default_context(cafile=f) if f else ssl.create_default_context()
            return self._ssl

    def _drop(self, node: Node) -> None:
        c = self._local.by_origin.pop(node.origin, None)
        if c is not None:
            c.close()

    def close(self) -> None:
        """Closes every connection of every thread."""
        with self._lock:
            conns, self._all = self._all, []
        for c in conns:
            c.close()
        self._local = _Conns()

    def __getstate__(self) -> Dict[str, Any]:
        # Locks and sockets do not survive pickling (DataLoader workers on
        # spawn); a copy starts with none, and learns its own lag.
        s = self.__dict__.copy()
        for k in ("_lock", "_ssl", "_local", "_all", "_stalls", "_lag"):
            s.pop(k)
        return s

    def __setstate__(self, s: Dict[str, Any]) -> None:
        self.__dict__.update(s)
        self._init_local()
