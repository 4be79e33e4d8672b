"""Importance feedback: a job's per-sample losses steer what the gateway reads.

A training job in importance mode (docs/importance.md) reports each batch's
per-sample losses with :func:`feedback`, seals an epoch's losses into an
immutable snapshot with :func:`seal` (its rank 0, once per epoch), and asks
for the next epoch's batches with ``sampling=importance`` and the version
that sealing returned. Other ranks wait for that version with
:func:`version_for`.

These are plain functions of a gateway's base URL, so that they can be used
from any client and from processes that hold no :class:`brand.Client`;
a client's :meth:`~brand.Client.feedback`, :meth:`~brand.Client.seal` and
:meth:`~brand.Client.version_for` make the same requests through its own
connections, retries and cluster failover. They use the standard library
only. Feedback and sealing are idempotent on the gateway (a sample reported
twice keeps its largest loss; sealing the same feedback gives the same
version), so a request that got no answer is retried, as are 502, 503 and
504 answers.

Each takes the job's name as ``name`` (:attr:`brand.Job.name`), the
second argument; ``job=``, the first releases' keyword for it, still works,
with a DeprecationWarning: *job* means a :class:`brand.Job`.

Example::

    version = None
    for epoch in range(epochs):
        q = {"sampling": "importance", "job": "run1", "hot": "26"}
        if version is not None:
            q["importance"] = version
        for batch in batches(epoch, q):
            losses = train_step(batch)
            importance.feedback(url, "run1", epoch, keys=[s["__key__"] for s in batch], losses=losses)
        version = importance.seal(url, "run1", epoch, prev=version)
"""

from __future__ import annotations

import contextlib
import json
import math
import operator
import struct
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence

from ._http import Answer, BrandError, Session
from ._options import Connection, takes_name, valid_job
from ._options import check_job_name as _check_job
from ._route import Router, parse_node

__all__ = ["ImportanceError", "ImportanceTimeout", "feedback", "seal", "version_for", "valid_job"]

_RECORD = struct.Struct("<If")  # one binary feedback record: sample ID, loss
_MAX_ID = 0xFFFFFFFF

#: How a call reaches a gateway: ``send(method, path, params, body,
#: content_type, accept)`` returns the 2xx :class:`~brand._http.Answer` or
#: raises :class:`BrandError`, retried and failed over as its sender does.
#: :class:`brand.Client` passes its own; the functions of a URL make one.
Send = Callable[[str, str, Mapping[str, str], Optional[bytes], Optional[str], Optional[str]], Answer]


class ImportanceError(BrandError):
    """A feedback, seal or version request the gateway refused, or a
    request that got no answer after the retries.

    ``status`` is the HTTP status (``None`` when no answer came) and
    ``message`` the gateway's own message (its JSON ``error``), e.g. which
    key is unknown or which loss is not finite.
    """


class ImportanceTimeout(ImportanceError, TimeoutError):
    """:func:`version_for` waited its whole ``wait`` and the epoch was still
    not sealed."""


@takes_name
def feedback(
    url: str,
    name: str,
    epoch: int,
    keys: Optional[Sequence[str]] = None,
    ids: Optional[Sequence[int]] = None,
    losses: Sequence[float] = (),
    dataset: Optional[str] = None,
    token: Optional[str] = None,
    timeout: float = 30.0,
    max_retries: int = 2,
) -> int:
    """Report per-sample losses of epoch ``epoch`` for the job named ``name``.

    Give exactly one of ``keys`` (sample keys, as in a batch's
    ``__key__``; sent as JSON) or ``ids`` (the index's sample IDs; sent as
    the compact binary body, 8 bytes a sample). ``losses`` is parallel to
    them; sequences, NumPy arrays and tensors (anything with ``tolist()``)
    are accepted. Losses must be finite and >= 0; a sample may appear more
    than once (the gateway keeps its largest loss).

    Returns the number of losses the gateway accepted.

    Raises:
        ValueError: arguments that cannot make a valid request (both or
            neither of keys and ids, lengths that differ, an invalid job
            name, a NaN, infinite or negative loss, an ID out of range).
        ImportanceError: the gateway's refusal (e.g. an unknown key: HTTP
            400 with its message; HTTP 409 once the epoch is sealed, when
            the losses would not be counted), or no answer after
            ``max_retries``.
    """
    with _gateway(url, token, timeout, max_retries) as send:
        return feedback_via(send, name, epoch, keys=keys, ids=ids, losses=losses, dataset=dataset)


@takes_name
def seal(
    url: str,
    name: str,
    epoch: int,
    prev: Optional[str] = None,
    dataset: Optional[str] = None,
    token: Optional[str] = None,
    timeout: float = 120.0,
    max_retries: int = 2,
) -> str:
    """Seal epoch ``epoch``'s feedback of the job named ``name`` onto
    snapshot ``prev`` (the version sealed for the previous epoch; ``None``
    for the job's first) and return the new snapshot's version, which the
    next epoch's requests name with ``importance=VERSION``.

    Sealing is idempotent: an epoch is sealed once, and sealing it again
    (or at the same time, from another rank or node) returns the version
    first sealed. Only one rank needs to seal; the others wait with
    :func:`version_for`. Sealing an epoch no gateway has feedback for is
    refused (HTTP 409).

    Raises:
        ValueError: an invalid job name or epoch.
        ImportanceError: the gateway's refusal (e.g. an unknown ``prev``)
            or no answer after ``max_retries``.
    """
    with _gateway(url, token, timeout, max_retries) as send:
        return seal_via(send, name, epoch, prev=prev, dataset=dataset)


@takes_name
def version_for(
    url: str,
    name: str,
    epoch: int,
    wait: float = 60.0,
    dataset: Optional[str] = None,
    token: Optional[str] = None,
    timeout: float = 30.0,
    poll: float = 0.05,
    max_poll: float = 2.0,
) -> str:
    """The version sealed for epoch ``epoch`` of the job named ``name``,
    waiting up to ``wait`` seconds for it to be sealed.

    Polls the gateway (``GET /importance/JOB/epochs/E``) while it answers
    404 (not sealed yet), first after ``poll`` seconds, then doubling the
    interval up to ``max_poll``. Each poll is retried twice on no answer
    or 502/503/504.

    Raises:
        ImportanceTimeout: still not sealed after ``wait`` seconds.
        ImportanceError: any other refusal, or no answer.
    """
    with _gateway(url, token, timeout, 2) as send:
        return version_for_via(send, name, epoch, wait=wait, dataset=dataset, poll=poll, max_poll=max_poll)


# -- the calls over a Send -------------------------------------------------
#
# The functions above and brand.Client's feedback, seal and version_for
# make their requests with these, each with its own Send.


@takes_name
def feedback_via(
    send: Send,
    name: str,
    epoch: int,
    keys: Optional[Sequence[str]] = None,
    ids: Optional[Sequence[int]] = None,
    losses: Sequence[float] = (),
    dataset: Optional[str] = None,
) -> int:
    """:func:`feedback` through ``send``."""
    _check_job(name)
    epoch = _check_epoch(epoch)
    if (keys is None) == (ids is None):
        raise ValueError("brand: feedback takes exactly one of keys and ids")
    ls = _floats(losses)
    names = _as_list(keys if keys is not None else ids)
    if len(names) != len(ls):
        what = "keys" if keys is not None else "ids"
        raise ValueError(f"brand: feedback has {len(names)} {what} and {len(ls)} losses")
    for i, v in enumerate(ls):
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"brand: feedback loss {i} is {v!r}: losses must be finite and >= 0")
    if keys is not None:
        for i, k in enumerate(names):
            if not isinstance(k, str):
                raise ValueError(f"brand: feedback key {i} is {type(k).__name__}, not str")
        body = json.dumps({"keys": names, "losses": ls}, allow_nan=False).encode()
        ctype = "application/json"
    else:
        body = _binary(names, ls)
        ctype = "application/octet-stream"
    q: Dict[str, str] = {"epoch": str(epoch)}
    if dataset is not None:
        q["dataset"] = dataset
    doc = _call(send, "POST", f"/importance/{name}/feedback", q, body, ctype)
    return int(_field(doc, "accepted", "feedback"))


@takes_name
def seal_via(send: Send, name: str, epoch: int, prev: Optional[str] = None, dataset: Optional[str] = None) -> str:
    """:func:`seal` through ``send``."""
    _check_job(name)
    epoch = _check_epoch(epoch)
    q: Dict[str, str] = {"epoch": str(epoch)}
    if dataset is not None:
        q["dataset"] = dataset
    if prev is not None:
        q["prev"] = str(prev)
    doc = _call(send, "POST", f"/importance/{name}/seal", q, b"")
    return str(_field(doc, "version", "seal"))


@takes_name
def version_for_via(
    send: Send,
    name: str,
    epoch: int,
    wait: float = 60.0,
    dataset: Optional[str] = None,
    poll: float = 0.05,
    max_poll: float = 2.0,
) -> str:
    """:func:`version_for` through ``send``."""
    _check_job(name)
    epoch = _check_epoch(epoch)
    q: Dict[str, str] = {}
    if dataset is not None:
        q["dataset"] = dataset
    deadline = time.monotonic() + max(0.0, wait)
    delay = poll
    while True:
        try:
            doc = _call(send, "GET", f"/importance/{name}/epochs/{epoch}", q)
            return str(_field(doc, "version", "epochs"))
        except ImportanceError as e:
            if e.status != 404:
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise ImportanceTimeout(
                    f"brand: epoch {epoch} of job {name!r} not sealed after {wait:g} s: {e.message}", 404
                ) from e
        time.sleep(min(delay, left))
        delay = min(delay * 2, max_poll)


@contextlib.contextmanager
def _gateway(url: str, token: Optional[str], timeout: float, max_retries: int) -> Iterator[Send]:
    """A Send to the gateway at ``url`` alone, its connection closed after."""
    router = Router([parse_node(url, strict=False)], 0, 0.0)
    session = Session(Connection(timeout=timeout, max_retries=max_retries, token=token))

    def send(method: str, path: str, params: Mapping[str, str], body: Optional[bytes] = None,
             content_type: Optional[str] = None, accept: Optional[str] = None) -> Answer:
        return session.send(router, method, path, params, body, content_type, accept)

    try:
        yield send
    finally:
        session.close()


def _call(send: Send, method: str, path: str, params: Mapping[str, str], body: Optional[bytes] = None,
          content_type: Optional[str] = None) -> Any:
    """The JSON answer to one importance request; the request's failure as
    an :class:`ImportanceError`."""
    try:
        a = send(method, path, params, body, content_type, "application/json")
    except ImportanceError:
        raise
    except BrandError as e:
        err = ImportanceError(e.message, e.status, e.retry_after)
        err.args = e.args  # with the attempts counted
        raise err from e
    try:
        return json.loads(a.body)
    except ValueError:
        raise ImportanceError(
            f"brand: {method} {a.node}{path}: the gateway's answer is not JSON: {a.body[:200]!r}"
        ) from None


# -- helpers ---------------------------------------------------------------


def _integer(v: Any) -> Optional[int]:
    """v as an int if it is an integer (NumPy's included, bool not)."""
    if isinstance(v, bool):
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None


def _check_epoch(epoch: int) -> int:
    e = _integer(epoch)
    if e is None:
        raise ValueError(f"brand: epoch {epoch!r} is not an integer")
    if e < 0:
        raise ValueError(f"brand: epoch {e} must be >= 0")
    return e


def _as_list(v: Any) -> List[Any]:
    if hasattr(v, "tolist"):
        v = v.tolist()
    return list(v)


def _floats(v: Any) -> List[float]:
    out = []
    for i, x in enumerate(_as_list(v)):
        try:
            out.append(float(x))
        except (TypeError, ValueError):
            raise ValueError(f"brand: feedback loss {i} is {x!r}, not a number") from None
    return out


def _binary(ids: List[Any], losses: List[float]) -> bytes:
    buf = bytearray(_RECORD.size * len(ids))
    for i, (sid, loss) in enumerate(zip(ids, losses)):
        n = _integer(sid)
        if n is None:
            raise ValueError(f"brand: feedback id {i} is {sid!r}, not an integer")
        sid = n
        if not 0 <= sid <= _MAX_ID:
            raise ValueError(f"brand: feedback id {i} is {sid}: sample IDs are uint32")
        try:
            _RECORD.pack_into(buf, i * _RECORD.size, sid, loss)
        except OverflowError:
            raise ValueError(f"brand: feedback loss {i} is {loss!r}: too large for a float32") from None
    return bytes(buf)


def _field(doc: Any, name: str, what: str) -> Any:
    if not isinstance(doc, dict) or name not in doc:
        raise ImportanceError(f"brand: {what}: the gateway's answer has no {name!r}: {str(doc)[:200]}")
    return doc[name]
