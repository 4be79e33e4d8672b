"""Fake nodes of a Brand cluster, for the routing and failover tests.

Each node is an ``http.server`` on a thread that forwards every request to
one upstream gateway (the real ``brand serve`` of gateway.py), so that every
node answers every request with the same bytes, as a cluster's nodes do. A
node answers ``GET /cluster`` itself with the cluster's layout, logs the
requests that reach it, and fails on demand: an HTTP status, a body cut
short ("cut"), a connection closed before any answer ("abort"), no answer
at all until the client gives up ("hang"), or killed (its port refuses
connections and its open connections are cut).
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple

# Headers of an upstream answer that a node passes on.
_PASSED = ("Content-Type", "Content-Length", "ETag", "Retry-After")


class Cluster:
    def __init__(self, upstream: str, n: int) -> None:
        self.upstream = upstream
        self.lock = threading.Lock()
        self.log: List[Tuple[int, str]] = []  # (node, path?query) in arrival order
        self.faults: Dict[int, Any] = {}
        # Edits the /cluster answer of a node, (node, layout) -> layout.
        self.layout_edit: Optional[Callable[[int, Dict[str, Any]], Dict[str, Any]]] = None
        self.release = threading.Event()  # ends every "hang"
        # The Brand-Members header a node adds to each forwarded answer,
        # (node, path?query) -> version or None (none added): a cluster's
        # membership version, which a test can change between requests.
        self.members: Optional[Callable[[int, str], Optional[str]]] = None
        self.servers: List[_Server] = []
        slots: List[List[int]] = []
        for k in range(n):
            slot = [k]
            srv = _Server(("127.0.0.1", 0), _handler(self, slot))
            threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
            self.servers.append(srv)
            slots.append(slot)
        # Node k is the k-th by URL, as a cluster's membership sorts its
        # members: a rank's home is a position in that order.
        url = lambda s: f"http://127.0.0.1:{s.server_address[1]}"  # noqa: E731
        order = sorted(range(n), key=lambda i: url(self.servers[i]))
        for pos, i in enumerate(order):
            slots[i][0] = pos
        self.servers = [self.servers[i] for i in order]
        self.urls = [url(s) for s in self.servers]
        self.alive = [True] * n

    def fail(self, k: int, fault: Any) -> None:
        """Makes node k fail with fault (None: answer normally)."""
        if fault == "kill":
            self.kill(k)
            return
        with self.lock:
            self.faults[k] = fault

    def kill(self, k: int) -> None:
        if not self.alive[k]:
            return
        self.alive[k] = False
        srv = self.servers[k]
        srv.shutdown()
        srv.server_close()
        srv.cut_all()

    def hits(self, path: Optional[str] = None) -> List[int]:
        """The nodes that received requests (for path alone, if given), in
        order."""
        with self.lock:
            return [k for k, p in self.log if path is None or p.split("?")[0] == path]

    def requests(self) -> List[Tuple[int, str]]:
        with self.lock:
            return list(self.log)

    def clear(self) -> None:
        with self.lock:
            self.log.clear()

    def close(self) -> None:
        self.release.set()
        for k in range(len(self.servers)):
            self.kill(k)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *args: Any) -> None:
        self.open: set = set()
        self.open_lock = threading.Lock()
        super().__init__(*args)

    def process_request(self, request: socket.socket, client_address: Any) -> None:
        with self.open_lock:
            self.open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: socket.socket) -> None:
        with self.open_lock:
            self.open.discard(request)
        super().shutdown_request(request)

    def cut_all(self) -> None:
        with self.open_lock:
            socks = list(self.open)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _handler(cluster: Cluster, slot: List[int]) -> type:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            k = slot[0]
            with cluster.lock:
                cluster.log.append((k, self.path))
                fault = cluster.faults.get(k)
            if fault is not None and self.fault(fault):
                return
            if self.path.split("?")[0] == "/cluster":
                self.layout()
                return
            self.forward()

        def fault(self, fault: Any) -> bool:
            if isinstance(fault, int):
                self.send(fault, json.dumps({"error": "node unavailable", "status": fault}).encode(), "application/json")
                return True
            if fault == "cut":
                self.send_response(200)
                self.send_header("Content-Type", "application/x-tar")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                self.wfile.write(bytes(512))
                self.close_connection = True
                return True
            if fault == "abort":
                self.close_connection = True
                return True
            if fault == "hang":
                cluster.release.wait(10)
                self.close_connection = True
                return True
            if callable(fault):
                return fault(self)
            raise ValueError(f"unknown fault {fault!r}")

        def layout(self) -> None:
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            n = len(cluster.urls)
            k = slot[0]
            doc: Dict[str, Any] = {"nodes": [{"url": u, "up": True} for u in cluster.urls], "self": k}
            if "world" in q:
                w = int(q["world"][0])
                doc["homes"] = [r * n // w for r in range(w)]
            if cluster.layout_edit is not None:
                doc = cluster.layout_edit(k, doc)
            self.send(200, json.dumps(doc).encode(), "application/json")

        def forward(self) -> None:
            req = urllib.request.Request(cluster.upstream + self.path, headers={"Accept-Encoding": "identity"})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    status, headers, body = r.status, r.headers, r.read()
            except urllib.error.HTTPError as e:
                status, headers, body = e.code, e.headers, e.read()
            self.send_response(status)
            for name, value in headers.items():
                if name in _PASSED or name.startswith("Brand-"):
                    if name != "Content-Length":
                        self.send_header(name, value)
            members = cluster.members(slot[0], self.path) if cluster.members is not None else None
            if members is not None:
                self.send_header("Brand-Members", members)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler
