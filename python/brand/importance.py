"""Importance feedback: a job's per-sample losses steer what the gateway reads.

A training job in importance mode (docs/importance.md) reports each batch's
per-sample losses with :func:`feedback`, seals an epoch's losses into an
immutable snapshot with :func:`seal` (its rank 0, once per epoch), and asks
for the next epoch's batches with ``sampling=importance`` and the version
that sealing returned. Other ranks wait for that version with
:func:`version_for`.

These are plain functions of a gateway's base URL, so that they can be used
from any client and from processes that hold no :class:`brand.Client`. They
use the standard library only. Feedback and sealing are idempotent on the
gateway (a sample reported twice keeps its largest loss; sealing the same
feedback gives the same version), so a request that got no answer is
retried, as are 502, 503 and 504 answers.

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

import http.client
import json
import math
import operator
import random
import re
import struct
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .client import BrandError, __version__

__all__ = ["ImportanceError", "ImportanceTimeout", "feedback", "seal", "version_for", "valid_job"]

_USER_AGENT = f"brand-python/{__version__}"
_JOB = re.compile(r"[A-Za-z0-9._-]{1,128}")
_RETRY_STATUS = frozenset((502, 503, 504))
_TRANSPORT_ERRORS = (OSError, http.client.HTTPException)
_RECORD = struct.Struct("<If")  # one binary feedback record: sample ID, loss
_MAX_ID = 0xFFFFFFFF
# No proxies from the environment, as brand.Client: a gateway is reached
# directly, and a proxy set for the internet must not catch loopback.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


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


def valid_job(job: str) -> bool:
    """Whether ``job`` is a valid job name: 1 to 128 ASCII letters, digits,
    ``.``, ``_`` or ``-``, and not ``.`` or ``..`` (it names a folder of the
    store)."""
    return isinstance(job, str) and _JOB.fullmatch(job) is not None and job not in (".", "..")


def feedback(
    url: str,
    job: str,
    epoch: int,
    keys: Optional[Sequence[str]] = None,
    ids: Optional[Sequence[int]] = None,
    losses: Sequence[float] = (),
    dataset: Optional[str] = None,
    token: Optional[str] = None,
    timeout: float = 30.0,
    max_retries: int = 2,
) -> int:
    """Report per-sample losses of epoch ``epoch`` for job ``job``.

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
            400 with its message), or no answer after ``max_retries``.
    """
    _check_job(job)
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
    doc = _request(url, "POST", f"/importance/{job}/feedback", q, body, ctype, token, timeout, max_retries)
    return int(_field(doc, "accepted", "feedback"))


def seal(
    url: str,
    job: str,
    epoch: int,
    prev: Optional[str] = None,
    dataset: Optional[str] = None,
    token: Optional[str] = None,
    timeout: float = 120.0,
    max_retries: int = 2,
) -> str:
    """Seal epoch ``epoch``'s feedback of job ``job`` onto snapshot ``prev``
    (the version sealed for the previous epoch; ``None`` for the job's
    first) and return the new snapshot's version, which the next epoch's
    requests name with ``importance=VERSION``.

    Sealing is idempotent: sealing the same epoch again returns the same
    version. Only one rank needs to seal; the others wait with
    :func:`version_for`.

    Raises:
        ValueError: an invalid job name or epoch.
        ImportanceError: the gateway's refusal (e.g. an unknown ``prev``)
            or no answer after ``max_retries``.
    """
    _check_job(job)
    epoch = _check_epoch(epoch)
    q: Dict[str, str] = {"epoch": str(epoch)}
    if dataset is not None:
        q["dataset"] = dataset
    if prev is not None:
        q["prev"] = str(prev)
    doc = _request(url, "POST", f"/importance/{job}/seal", q, b"", None, token, timeout, max_retries)
    return str(_field(doc, "version", "seal"))


def version_for(
    url: str,
    job: str,
    epoch: int,
    wait: float = 60.0,
    dataset: Optional[str] = None,
    token: Optional[str] = None,
    timeout: float = 30.0,
    poll: float = 0.05,
    max_poll: float = 2.0,
) -> str:
    """The version sealed for epoch ``epoch`` of job ``job``, waiting up to
    ``wait`` seconds for it to be sealed.

    Polls the gateway (``GET /importance/JOB/epochs/E``) while it answers
    404 (not sealed yet), first after ``poll`` seconds, then doubling the
    interval up to ``max_poll``.

    Raises:
        ImportanceTimeout: still not sealed after ``wait`` seconds.
        ImportanceError: any other refusal, or no answer.
    """
    _check_job(job)
    epoch = _check_epoch(epoch)
    q: Dict[str, str] = {}
    if dataset is not None:
        q["dataset"] = dataset
    deadline = time.monotonic() + max(0.0, wait)
    delay = poll
    while True:
        try:
            doc = _request(url, "GET", f"/importance/{job}/epochs/{epoch}", q, None, None, token, timeout, 2)
            return str(_field(doc, "version", "epochs"))
        except ImportanceError as e:
            if e.status != 404:
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise ImportanceTimeout(
                    f"brand: epoch {epoch} of job {job!r} not sealed after {wait:g} s: {e.message}", 404
                ) from e
        time.sleep(min(delay, left))
        delay = min(delay * 2, max_poll)


# -- helpers ---------------------------------------------------------------


def _check_job(job: str) -> None:
    if not valid_job(job):
        raise ValueError(
            f"brand: job name {job!r}: want 1 to 128 of A-Z, a-z, 0-9, '.', '_', '-' (not '.' or '..')"
        )


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


def _request(
    url: str,
    method: str,
    path: str,
    params: Mapping[str, str],
    body: Optional[bytes],
    ctype: Optional[str],
    token: Optional[str],
    timeout: float,
    max_retries: int,
) -> Any:
    """One JSON request with retries of 502/503/504 and transport errors;
    returns the decoded 2xx body or raises ImportanceError."""
    base = url if "://" in url else "http://" + url
    target = base.rstrip("/") + urllib.parse.quote(path)
    if params:
        target += "?" + urllib.parse.urlencode(params)
    headers = {"User-Agent": _USER_AGENT, "Accept": "application/json"}
    if ctype is not None:
        headers["Content-Type"] = ctype
    if token:
        headers["Authorization"] = "Bearer " + token
    attempt = 0
    while True:
        req = urllib.request.Request(target, data=body, headers=headers, method=method)
        retry_after = None
        try:
            with _OPENER.open(req, timeout=timeout) as r:
                raw = r.read()
            try:
                return json.loads(raw)
            except ValueError:
                raise ImportanceError(
                    f"brand: {method} {target}: the gateway's answer is not JSON: {raw[:200]!r}"
                ) from None
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
            err = ImportanceError(_message(status, raw, method, target), status)
            retry_after = _seconds(e.headers.get("Retry-After") if e.headers else None)
            if status not in _RETRY_STATUS:
                raise err from None
        except _TRANSPORT_ERRORS as e:
            err = ImportanceError(f"brand: {method} {target}: {type(e).__name__}: {e}")
            err.__cause__ = e
        if attempt >= max_retries:
            if attempt > 0:
                err.args = (f"{err.args[0]} (after {attempt + 1} attempts)",)
            raise err
        d = min(0.2 * 2**attempt, 10.0)
        time.sleep(min(retry_after, 10.0) if retry_after else d / 2 + random.random() * d / 2)
        attempt += 1


def _message(status: int, raw: bytes, method: str, target: str) -> str:
    try:
        doc = json.loads(raw)
        if isinstance(doc, dict) and isinstance(doc.get("error"), str):
            return doc["error"]
    except ValueError:
        pass
    text = raw[:200].decode("utf-8", "replace").strip()
    return f"{method} {target}: HTTP {status}" + (f": {text}" if text else "")


def _seconds(v: Optional[str]) -> Optional[float]:
    try:
        return float(v) if v else None
    except ValueError:
        return None
