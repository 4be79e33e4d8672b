"""`brand serve` processes on loopback, for the tests' fixtures and the
benchmarks: the one way to find the binary, start a gateway on a free
port, wait until it is ready and stop it.

- :func:`brand_binary`: ``$BRAND_BIN`` (or another variable), else brand
  built from this repository with ``go build``.
- :class:`Serve`: one ``brand serve`` on a free loopback port, ready when
  ``/readyz`` answers 200; another port is tried when the process exits
  first (another process may take a free port before it binds).
- :class:`Fixture`: a temporary directory and the gateway a fixture
  serves from it, both gone after :meth:`Fixture.stop`, which also runs
  when starting fails.
- :func:`shared`: a fixture made on first use and stopped when the
  process exits.

What a fixture serves (generated datasets, Megatron prefixes, videos) and
its flags stay with it: gateway.py, tokengateway.py, videogateway.py and
python/bench/importance_train.py.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Callable, List, Optional, Sequence, TypeVar

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))  # the package, without installing it

#: The flags every gateway started here is given before its own: quiet
#: JSON logs, and a stop that does not wait for requests of a test that
#: has gone.
QUIET = ["--log-level", "warn", "--log-format", "json", "--shutdown-timeout", "1s"]

#: A test gateway's cache: small, not faulted in, windows of 2 chunks.
SMALL_CACHE = ["--cache-size", "32MiB", "--cache-prefault=false", "--window", "2"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 when asked (it may be taken before it
    is bound: :class:`Serve` tries again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def brand_binary(tmp: str, env: str = "BRAND_BIN", tags: Sequence[str] = ()) -> str:
    """The brand binary named by ``$env``, else one built from this
    repository into ``tmp`` (with build ``tags``)."""
    binary = os.environ.get(env)
    if binary:
        return binary
    binary = os.path.join(tmp, "brand")
    tag = ["-tags", ",".join(tags)] if tags else []
    subprocess.run(["go", "build", *tag, "-o", binary, "./cmd/brand"], cwd=REPO, check=True, timeout=600)
    return binary


class Serve:
    """``brand serve flags...`` on a free port of 127.0.0.1, its output
    written to ``log``; made when ``/readyz`` answers 200.

    Raises:
        RuntimeError: not ready within ``ready_within`` seconds, or exited
            first, on ``tries`` ports.
    """

    url: str
    proc: subprocess.Popen

    def __init__(self, binary: str, flags: List[str], log: str, ready_within: float = 30.0, tries: int = 5) -> None:
        self.log = open(log, "wb")
        try:
            for _ in range(tries):
                port = free_port()
                self.url = f"http://127.0.0.1:{port}"
                self.proc = subprocess.Popen(
                    [binary, "serve", "--listen", f"127.0.0.1:{port}", *QUIET, *flags],
                    stdout=self.log, stderr=subprocess.STDOUT,
                )
                if self._ready(ready_within):
                    return
                self._end()
            raise RuntimeError(f"brand serve did not become ready; see {log}")
        except BaseException:
            self.stop()
            raise

    def _ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # e.g. the port was taken meanwhile
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def _end(self) -> None:
        """Ends the process: asked to stop, then killed after 10 s."""
        if getattr(self, "proc", None) is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def stop(self) -> None:
        self._end()
        self.log.close()


class Fixture:
    """A temporary directory (``tmp``, named with ``prefix``) and the
    gateway that :meth:`start`, a subclass's, serves from it with
    :meth:`serve`. :meth:`stop` ends the gateway and removes the
    directory; it runs when :meth:`start` fails, too."""

    url: str

    def __init__(self, prefix: str) -> None:
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.server: Optional[Serve] = None
        try:
            self.start()
        except BaseException:
            self.stop()
            raise

    def start(self) -> None:
        raise NotImplementedError

    def serve(self, binary: str, flags: List[str]) -> None:
        """Starts ``brand serve`` with ``flags`` and :data:`SMALL_CACHE`
        before them, logging to ``tmp/serve.log``."""
        self.server = Serve(binary, [*SMALL_CACHE, *flags], os.path.join(self.tmp, "serve.log"))
        self.url = self.server.url

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


F = TypeVar("F", bound=Fixture)


def shared(make: Callable[..., F]) -> Callable[..., F]:
    """``make`` called once for each of its arguments, on first use, each
    fixture stopped when the process exits: the gateways the tests of a
    process share."""

    @functools.cache
    def once(*args: str) -> F:
        fx = make(*args)
        atexit.register(fx.stop)
        return fx

    return functools.wraps(make)(once)
