"""Which job features go together: the gateway's table, read from
``compat.json``.

The gateway decides whether two features of a job go together from one
table (Go's ``internal/job/features``), which it publishes as this package's
``compat.json`` (``go test ./internal/job/features -update`` writes it, and a
test holds it to the table) and as docs/http-api.md's "Features and how
they combine". The client checks a job against that file rather than a
copy of the rules of its own, so a pair is refused here exactly as the
gateway refuses it, with the same message.

A job's features are read from the query parameters it sends
(:func:`brand._options.job_query`), by the rules the file states
(:func:`features`, Go's ``spec.Detect``); :func:`check` refuses them as
Go's ``spec.CheckParams`` does (:func:`refusal`): its exclusive groups,
companions, pairs and rules, every refusal of the kind the gateway makes. Features only the
server knows (``resolved``: a stored edit, a dataset served in place, a
plan's resize) are not detected here: the gateway adds them, and refuses
what they do not go with itself; :func:`admits` says whether a job could
have one (a dataset asks whether an edit can change its epoch).

The file is read once, on first use; nothing here changes afterwards.
Standard library only, below every other module of the package.
"""

from __future__ import annotations

import functools
import json
import pkgutil
from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = ["Refused", "admits", "check", "features", "refusal", "refused", "table"]

#: The version of compat.json this module reads (2: with its rules).
VERSION = 2


@functools.lru_cache(maxsize=None)
def table() -> Dict[str, Any]:
    """The table as ``compat.json`` holds it: ``error`` (the refusals'
    prefix), ``features`` (each with its ``name`` and the parameters that
    name it, ``set_by`` or ``default_unless``, or ``resolved``), ``pairs``
    (every pair of features once, ``a`` before ``b`` in the features'
    order, its ``kind``: ``compose``, ``refuse`` or ``downgrade``, and a
    ``message``), ``companions`` (``params`` that apply only with one of
    the features ``needs``), ``exclusives`` (``params`` of which a job
    gives one) and ``rules`` (what no pair says: a job with every one of
    a rule's ``features`` that gives a parameter of its ``given``, if it
    names any, and none of its ``unless`` is refused with its
    ``message``). Callers must not change it.

    Raises:
        RuntimeError: a file of another version than this client reads.
    """
    raw = pkgutil.get_data(__package__ or "brand", "compat.json")
    if raw is None:  # a loader that cannot read package data
        raise RuntimeError("brand: compat.json, the gateway's table of features, is not in the package")
    doc = json.loads(raw)
    if doc.get("version") != VERSION:
        raise RuntimeError(f"brand: compat.json is version {doc.get('version')!r}; this client reads {VERSION}")
    return doc


def _given(params: Mapping[str, str], p: Mapping[str, str]) -> bool:
    """Whether ``params`` give the parameter ``p`` names (with its value,
    if it names one). An empty value is no value, as on the gateway."""
    v = params.get(p["param"])
    return bool(v) and ("value" not in p or v == p["value"])


def features(params: Mapping[str, str]) -> Tuple[str, ...]:
    """The features a job's query parameters name, in the table's order:
    a feature ``set_by`` parameters is named when any of them is given; one
    with ``default_unless`` unless one of those is. Resolved features are
    the server's and never named here."""
    out = []
    for d in table()["features"]:
        if d.get("resolved"):
            continue
        on = any(_given(params, p) for p in d.get("set_by", ()))
        if d.get("default_unless"):
            on = not any(_given(params, p) for p in d["default_unless"])
        if on:
            out.append(d["name"])
    return tuple(out)


class Refused(ValueError):
    """A job's parameters the table refuses (:func:`check`): a
    ``ValueError`` whose text is the gateway's, carrying what was refused.

    Attributes:
        what: the two features of a refused pair (``("tokens",
            "transform")``, in the table's order), the exclusive parameters
            given together, the one companion parameter given without
            its feature, or what a rule holds: its features and the
            parameter of its ``given`` the job gave (``("mix", "vision",
            "balance-cost")``, ``("tokens", "eos")``).
        message: the table's message.
    """

    def __init__(self, what: Tuple[str, ...], message: str) -> None:
        super().__init__(f"brand: {table()['error']}: {message}")
        self.what = what
        self.message = message


def _met(rule: Mapping[str, Any], have: Tuple[str, ...], params: Mapping[str, str]) -> Optional[Tuple[str, ...]]:
    """What of ``rule`` a job of features ``have`` and query parameters
    ``params`` meets (its features, and the parameter of its ``given``
    given), or ``None`` if it does not meet it all."""
    if not all(f in have for f in rule.get("features", ())):
        return None
    given = [p["param"] for p in rule.get("given", ()) if _given(params, p)]
    if rule.get("given") and not given:
        return None
    if any(_given(params, p) for p in rule.get("unless", ())):
        return None
    return tuple(rule.get("features", ())) + tuple(given[:1])


def refused(params: Mapping[str, str]) -> Optional[Tuple[Tuple[str, ...], str]]:
    """What the table refuses of a job's query parameters and its
    message, or ``None`` if it takes them. In the gateway's order: a group
    of exclusive parameters given two ways; then a companion parameter
    given without a feature it applies to (``{param}`` in its message is
    the parameter's name), the groups and their parameters in the table's
    order; then the first refused pair of the features the parameters
    name; then the first rule they and the parameters meet (``{param}``
    in its message is the parameter of its ``given`` given)."""
    t = table()
    for e in t["exclusives"]:
        given = tuple(p for p in e["params"] if params.get(p))
        if len(given) > 1:
            return given, e["message"]
    have = features(params)
    for c in t["companions"]:
        if any(f in have for f in c["needs"]):
            continue
        for p in c["params"]:
            # A companion with a value is the parameter given that value.
            if params.get(p) and ("value" not in c or params.get(p) == c["value"]):
                return (p,), c["message"].replace("{param}", p)
    for cell in t["pairs"]:
        if cell["kind"] == "refuse" and cell["a"] in have and cell["b"] in have:
            return (cell["a"], cell["b"]), cell["message"]
    for rule in t["rules"]:
        what = _met(rule, have, params)
        if what is not None:
            param = what[-1] if rule.get("given") else ""
            return what, rule["message"].replace("{param}", param)
    return None


def refusal(params: Mapping[str, str]) -> Optional[str]:
    """The table's message refusing a job's query parameters
    (:func:`refused`), or ``None`` if it takes them."""
    got = refused(params)
    return None if got is None else got[1]


def check(params: Mapping[str, str]) -> None:
    """Refuses a job's query parameters the gateway's table refuses.

    Raises:
        Refused: a ``ValueError``, ``"brand: features do not go together: "``
            (the table's ``error``) and the table's message, with what was
            refused (:func:`refused`).
    """
    got = refused(params)
    if got is not None:
        raise Refused(*got)


def admits(params: Mapping[str, str], feature: str) -> bool:
    """Whether a job of query parameters ``params`` could have ``feature``
    beside its own (a resolved one: a stored edit, a dataset served in
    place): no pair of it and a feature the parameters name is refused,
    and no rule holding it is met with it."""
    have = features(params)
    for cell in table()["pairs"]:
        if cell["kind"] == "refuse" and (cell["a"] == feature and cell["b"] in have
                                         or cell["b"] == feature and cell["a"] in have):
            return False
    for rule in table()["rules"]:
        if feature in rule.get("features", ()) and _met(rule, have + (feature,), params) is not None:
            return False
    return True
