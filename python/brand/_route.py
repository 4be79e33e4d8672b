"""Which node of a Brand cluster each request goes to.

A cluster of gateways (``brand serve --peers``) answers any request from any
node with the same bytes, but rank ``r`` of a world of ``W`` ranks has its
samples cached on its home node ``r * N // W`` of the ``N`` nodes. A client
sends its requests there; an attempt that fails as a retry would (connection
refused or reset, timeout, 502/503/504) goes on at once to the next nodes in
order, ``home+1, home+2, ...`` mod ``N``, and the failed node is passed over
for ``home_retry`` seconds, after which requests return to it.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.parse
from typing import Callable, List, NamedTuple, Optional, Sequence

__all__ = ["Node", "Router", "home", "parse_node", "parse_peers"]

_RANGE = re.compile(r"\{(\d+)\.\.(\d+)\}")
_MAX_NODES = 4096


class Node(NamedTuple):
    """A gateway: its URL as the peer list names it, and how to reach it."""

    url: str  # normalised, without a trailing slash
    https: bool
    host: str
    port: Optional[int]
    base: str  # path prefix, without a trailing slash
    origin: str  # scheme://host[:port], for messages


def parse_node(url: str, what: str = "gateway URL", strict: bool = True) -> Node:
    """Checks an ``http(s)://host[:port][/path]`` URL (``http://`` assumed
    when no scheme is given); ``strict`` rejects a query or fragment rather
    than ignore it."""
    u = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
    if u.scheme not in ("http", "https"):
        raise ValueError(f"brand: {what} {url!r}: scheme must be http or https")
    if not u.hostname:
        raise ValueError(f"brand: {what} {url!r} has no host")
    if strict and (u.query or u.fragment):
        raise ValueError(f"brand: {what} {url!r} must not have a query or fragment")
    try:
        port = u.port
    except ValueError as e:
        raise ValueError(f"brand: {what} {url!r}: {e}") from None
    base = u.path.rstrip("/")
    origin = f"{u.scheme}://{u.netloc}"
    return Node(origin + base, u.scheme == "https", u.hostname, port, base, origin)


def parse_peers(peers: Sequence[str]) -> List[Node]:
    """The nodes of a peer list as ``brand serve --peers`` takes it: URLs in
    order (node ``k`` the ``k``-th), each possibly holding one ``{a..b}``
    range, so that ``http://brand-{0..3}.brand.ns.svc:8080`` names a
    StatefulSet's four pods in ordinal order. Elements are split at commas,
    so one comma-separated string is a list too."""
    if isinstance(peers, str):
        peers = [peers]
    peers = [el for p in peers for el in p.split(",")]
    out: List[Node] = []
    seen = set()
    for el in peers:
        el = el.strip()
        if not el:
            continue
        for u in _expand(el):
            n = parse_node(u, "peer")
            if n.url in seen:
                raise ValueError(f"brand: peer {n.url} is listed twice")
            seen.add(n.url)
            out.append(n)
            if len(out) > _MAX_NODES:
                raise ValueError(f"brand: more than {_MAX_NODES} peers")
    if not out:
        raise ValueError(f"brand: the peer list {list(peers)!r} names no peer")
    return out


def _expand(el: str) -> List[str]:
    m = list(_RANGE.finditer(el))
    if not m:
        return [el]
    if len(m) > 1:
        raise ValueError(f"brand: peer {el!r} holds more than one {{a..b}} range")
    lo, hi = int(m[0].group(1)), int(m[0].group(2))
    if hi < lo or hi - lo >= _MAX_NODES:
        raise ValueError(f"brand: range in peer {el!r} must be {{a..b}} with a <= b")
    return [el[: m[0].start()] + str(i) + el[m[0].end():] for i in range(lo, hi + 1)]


def home(rank: int, world: int, nodes: int) -> int:
    """The home node of ``rank`` of ``world`` ranks over ``nodes`` nodes:
    contiguous blocks, ``rank * nodes // world`` (the gateway's layout)."""
    return rank * nodes // world


class Router:
    """Chooses the node of each attempt; safe for use from many threads.

    ``pick`` returns the first node in the order ``home, home+1, ...`` that
    has not failed within the last ``retry`` seconds, or, when all have,
    the one whose mark ends first (the one marked first on a tie), so that a
    request keeps cycling through the nodes in order. A router of one node
    always picks it.
    """

    def __init__(self, nodes: Sequence[Node], home_node: int, retry: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.nodes = list(nodes)
        self.home = home_node
        self.retry = retry
        self.clock = clock
        self._down_until = [float("-inf")] * len(self.nodes)
        self._marked = [0] * len(self.nodes)
        self._marks = 0
        self._lock = threading.Lock()

    def pick(self) -> int:
        n = len(self.nodes)
        if n == 1:
            return 0
        with self._lock:
            now = self.clock()
            best = -1
            for i in range(n):
                k = (self.home + i) % n
                if now >= self._down_until[k]:
                    return k
                if best < 0 or (self._down_until[k], self._marked[k]) < (self._down_until[best], self._marked[best]):
                    best = k
            return best

    def next(self, k: int) -> int:
        """The node a request to node ``k`` is hedged on: the first in the
        order ``k+1, k+2, ...`` that has not failed within the last
        ``retry`` seconds, or -1 (a single node, or every other node failed
        recently)."""
        n = len(self.nodes)
        with self._lock:
            now = self.clock()
            for i in range(1, n):
                j = (k + i) % n
                if now >= self._down_until[j]:
                    return j
        return -1

    def order(self) -> List[int]:
        """The nodes in the order ``home, home+1, ...``."""
        n = len(self.nodes)
        return [(self.home + i) % n for i in range(n)]

    def fail(self, k: int) -> int:
        """Passes node ``k`` over for ``retry`` seconds; returns the mark,
        for :meth:`unfail`."""
        if len(self.nodes) == 1:
            return 0
        with self._lock:
            self._down_until[k] = self.clock() + self.retry
            self._marks += 1
            self._marked[k] = self._marks
            return self._marks

    def unfail(self, k: int, mark: int) -> None:
        """Takes node ``k`` back if ``mark`` (:meth:`fail`'s) is still its
        last: a node passed over on a guess (a hedge that won before the
        node answered its probe) that its probe then found alive."""
        with self._lock:
            if mark and self._marked[k] == mark:
                self._down_until[k] = float("-inf")

    def __getstate__(self) -> dict:
        # Marks are liveness, which does not travel to another process.
        return {"nodes": self.nodes, "home": self.home, "retry": self.retry}

    def __setstate__(self, s: dict) -> None:
        self.__init__(s["nodes"], s["home"], s["retry"])
