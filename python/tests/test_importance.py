"""brand.importance against a fake gateway that implements the importance
endpoints' contract (feedback, seal, epochs) in a thread."""

import hashlib
import http.server
import json
import math
import os
import struct
import sys
import threading
import time
import unittest
import urllib.parse
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import free_port, gateway, rank_at  # noqa: E402

import brand  # noqa: E402
from brand import importance  # noqa: E402

KEYS = [f"cls/{c}/{i:05d}" for c in range(3) for i in range(4)]  # sample ID = position


class FakeGateway:
    """The importance endpoints on loopback: per (job, epoch) the largest
    loss per sample, sealed into a content-addressed version. ``fail``
    queues statuses answered before the real handling (e.g. 503s)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.losses = {}  # (job, epoch) -> {id: loss}
        self.sealed = {}  # (job, epoch) -> version
        self.requests = []  # (method, path, query, headers, body)
        self.fail = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                fake.handle(self)

            def do_POST(self):
                fake.handle(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def handle(self, h):
        u = urllib.parse.urlsplit(h.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n else b""
        with self.lock:
            self.requests.append((h.command, u.path, q, dict(h.headers), body))
            fail = self.fail.pop(0) if self.fail else None
        if fail is not None:
            return self.reply(h, fail, {"error": f"injected {fail}"}, {"Retry-After": "0"})
        parts = u.path.strip("/").split("/")
        if len(parts) < 3 or parts[0] != "importance":
            return self.reply(h, 404, {"error": "no such endpoint"})
        job = parts[1]
        if h.command == "POST" and parts[2] == "feedback":
            return self.feedback(h, job, int(q["epoch"]), body)
        if h.command == "POST" and parts[2] == "seal":
            return self.seal(h, job, int(q["epoch"]), q.get("prev"))
        if h.command == "GET" and parts[2] == "epochs" and len(parts) == 4:
            with self.lock:
                v = self.sealed.get((job, int(parts[3])))
            if v is None:
                return self.reply(h, 404, {"error": f"epoch {parts[3]} of job {job} is not sealed"})
            return self.reply(h, 200, {"version": v})
        return self.reply(h, 404, {"error": "no such endpoint"})

    def feedback(self, h, job, epoch, body):
        if h.headers.get("Content-Type") == "application/octet-stream":
            if len(body) % 8:
                return self.reply(h, 400, {"error": f"binary feedback of {len(body)} bytes: not 8-byte records"})
            pairs = list(struct.iter_unpack("<If", body))
        else:
            doc = json.loads(body)
            if len(doc["keys"]) != len(doc["losses"]):
                return self.reply(h, 400, {"error": "keys and losses differ in length"})
            pairs = []
            for k, loss in zip(doc["keys"], doc["losses"]):
                if k not in KEYS:
                    return self.reply(h, 400, {"error": f"unknown sample key {k!r}"})
                pairs.append((KEYS.index(k), loss))
        for sid, loss in pairs:
            if sid >= len(KEYS):
                return self.reply(h, 400, {"error": f"sample ID {sid} out of range [0, {len(KEYS)})"})
            if math.isnan(loss) or loss < 0:
                return self.reply(h, 400, {"error": f"loss {loss} of sample {sid}"})
        with self.lock:
            acc = self.losses.setdefault((job, epoch), {})
            for sid, loss in pairs:
                acc[sid] = max(acc.get(sid, loss), loss)
        self.reply(h, 200, {"accepted": len(pairs)})

    def seal(self, h, job, epoch, prev):
        with self.lock:
            if prev is not None and prev not in self.sealed.values():
                return self.reply(h, 400, {"error": f"unknown importance version {prev!r}"})
            acc = self.losses.get((job, epoch), {})
            enc = json.dumps([job, epoch, prev, sorted(acc.items())]).encode()
            v = hashlib.sha256(enc).hexdigest()[:16]
            self.sealed[(job, epoch)] = v
        self.reply(h, 200, {"version": v, "epoch": epoch, "reported": len(acc),
                            "object": f"_brand/importance/{job}/{v}.brandimp"})

    @staticmethod
    def reply(h, status, doc, headers=None):
        b = json.dumps(doc).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(b)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(b)


class Losses:
    """A stand-in for a tensor or array: only ``tolist()``."""

    def __init__(self, v):
        self.v = v

    def tolist(self):
        return list(self.v)


class TestImportance(unittest.TestCase):
    def setUp(self):
        self.gw = FakeGateway()
        self.addCleanup(self.gw.close)

    def last(self):
        return self.gw.requests[-1]

    def test_feedback_keys_sends_json(self):
        n = importance.feedback(self.gw.url, "job-1", 3, keys=KEYS[:3], losses=[0.5, 1.25, 0.0], dataset="d", token="tok")
        self.assertEqual(n, 3)
        method, path, q, headers, body = self.last()
        self.assertEqual((method, path, q), ("POST", "/importance/job-1/feedback", {"dataset": "d", "epoch": "3"}))
        self.assertEqual(headers["Content-Type"], "application/json")
        self.assertEqual(headers["Authorization"], "Bearer tok")
        self.assertEqual(json.loads(body), {"keys": KEYS[:3], "losses": [0.5, 1.25, 0.0]})
        self.assertEqual(self.gw.losses[("job-1", 3)], {0: 0.5, 1: 1.25, 2: 0.0})

    def test_feedback_ids_sends_binary_records(self):
        n = importance.feedback(self.gw.url, "j", 0, ids=Losses([11, 0, 11]), losses=Losses([2.5, 0.25, 4.0]))
        self.assertEqual(n, 3)
        _, path, q, headers, body = self.last()
        self.assertEqual((path, q), ("/importance/j/feedback", {"epoch": "0"}))
        self.assertEqual(headers["Content-Type"], "application/octet-stream")
        want = struct.pack("<If", 11, 2.5) + struct.pack("<If", 0, 0.25) + struct.pack("<If", 11, 4.0)
        self.assertEqual(body, want)
        self.assertEqual(self.gw.losses[("j", 0)], {11: 4.0, 0: 0.25})  # the largest loss kept

    def test_feedback_empty_batch(self):
        self.assertEqual(importance.feedback(self.gw.url, "j", 0, ids=[], losses=[]), 0)
        self.assertEqual(self.last()[4], b"")

    def test_feedback_refused_carries_the_server_message(self):
        with self.assertRaises(importance.ImportanceError) as cm:
            importance.feedback(self.gw.url, "j", 0, keys=["cls/9/nope"], losses=[1.0])
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("unknown sample key 'cls/9/nope'", cm.exception.message)
        self.assertIn("HTTP 400", str(cm.exception))
        with self.assertRaises(importance.ImportanceError) as cm:
            importance.feedback(self.gw.url, "j", 0, ids=[len(KEYS)], losses=[1.0])
        self.assertIn("out of range", cm.exception.message)
        self.assertEqual(len(self.gw.requests), 2)  # refusals are not retried

    def test_feedback_bad_arguments_send_nothing(self):
        cases = [
            ("both keys and ids", dict(keys=KEYS[:1], ids=[0], losses=[1.0]), "exactly one"),
            ("neither", dict(losses=[1.0]), "exactly one"),
            ("length mismatch", dict(keys=KEYS[:2], losses=[1.0]), "2 keys and 1 losses"),
            ("nan", dict(ids=[0, 1], losses=[1.0, float("nan")]), "loss 1 is nan"),
            ("negative", dict(ids=[0], losses=[-0.5]), "loss 0 is -0.5"),
            ("infinite", dict(keys=KEYS[:1], losses=[float("inf")]), "loss 0 is inf"),
            ("not a number", dict(ids=[0], losses=["x"]), "not a number"),
            ("float32 overflow", dict(ids=[0], losses=[1e39]), "float32"),
            ("negative id", dict(ids=[-1], losses=[1.0]), "uint32"),
            ("id too large", dict(ids=[1 << 32], losses=[1.0]), "uint32"),
            ("float id", dict(ids=[1.5], losses=[1.0]), "not an integer"),
            ("bool id", dict(ids=[True], losses=[1.0]), "not an integer"),
            ("key not str", dict(keys=[3], losses=[1.0]), "not str"),
        ]
        for name, kw, msg in cases:
            with self.subTest(name):
                with self.assertRaises(ValueError) as cm:
                    importance.feedback(self.gw.url, "j", 0, **kw)
                self.assertIn(msg, str(cm.exception))
        self.assertEqual(self.gw.requests, [])

    def test_job_names(self):
        for job, ok in [("a", True), ("A.b_c-9", True), ("x" * 128, True), ("", False), ("x" * 129, False),
                        (".", False), ("..", False), ("a/b", False), ("a b", False), ("é", False), (None, False)]:
            with self.subTest(job=job):
                self.assertEqual(importance.valid_job(job), ok)
                if not ok:
                    with self.assertRaises(ValueError):
                        importance.seal(self.gw.url, job, 0)
        for epoch in (-1, 1.0, True, "1"):
            with self.subTest(epoch=epoch):
                with self.assertRaises(ValueError):
                    importance.seal(self.gw.url, "j", epoch)
        self.assertEqual(self.gw.requests, [])

    def test_integer_like_ids_and_epochs(self):
        class Index:  # as NumPy's integers: __index__, not int
            def __init__(self, v):
                self.v = v

            def __index__(self):
                return self.v

        importance.feedback(self.gw.url, "j", Index(2), ids=[Index(7)], losses=[1.5])
        _, _, q, _, body = self.last()
        self.assertEqual((q["epoch"], body), ("2", struct.pack("<If", 7, 1.5)))

    def test_seal_and_version_for(self):
        importance.feedback(self.gw.url, "j", 0, ids=[0, 1], losses=[1.0, 2.0])
        v0 = importance.seal(self.gw.url, "j", 0, dataset="d")
        self.assertRegex(v0, "^[0-9a-f]{16}$")
        _, path, q, _, _ = self.last()
        self.assertEqual((path, q), ("/importance/j/seal", {"dataset": "d", "epoch": "0"}))
        self.assertEqual(importance.seal(self.gw.url, "j", 0), v0)  # idempotent
        self.assertEqual(importance.version_for(self.gw.url, "j", 0, wait=0), v0)

        importance.feedback(self.gw.url, "j", 1, ids=[2], losses=[0.5])
        v1 = importance.seal(self.gw.url, "j", 1, prev=v0)
        self.assertEqual(self.last()[2], {"epoch": "1", "prev": v0})
        self.assertNotEqual(v1, v0)
        self.assertEqual(importance.version_for(self.gw.url, "j", 1), v1)

    def test_the_name_is_name(self):
        """The job's name is name=, as in brand.Job; the first releases'
        job= still works, warns at the caller, and is refused beside a
        name; a positional name is unchanged."""
        calls = {
            "feedback": lambda **kw: importance.feedback(self.gw.url, epoch=0, ids=[1], losses=[1.0], **kw),
            "seal": lambda **kw: importance.seal(self.gw.url, epoch=0, **kw),
            "version_for": lambda **kw: importance.version_for(self.gw.url, epoch=0, wait=0, **kw),
        }
        for fn, call in calls.items():
            with self.subTest(fn=fn):
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    call(name="by-name")
                self.assertEqual(self.last()[1].split("/")[2], "by-name")
                with self.assertWarnsRegex(DeprecationWarning,
                                           rf"importance\.{fn}\(job=\.\.\.\) is deprecated.*name=") as w:
                    call(job="by-job")
                self.assertEqual(w.filename, os.path.abspath(__file__))
                self.assertEqual(self.last()[1].split("/")[2], "by-job")
                n = len(self.gw.requests)
                with self.assertRaisesRegex(TypeError, "both name= and job="):
                    call(name="a", job="b")
                self.assertEqual(len(self.gw.requests), n)
        with self.assertRaisesRegex(TypeError, "both a name and job="):
            importance.seal(self.gw.url, "a", 0, job="b")

    def test_seal_unknown_prev(self):
        with self.assertRaises(importance.ImportanceError) as cm:
            importance.seal(self.gw.url, "j", 1, prev="0123456789abcdef")
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("unknown importance version", cm.exception.message)

    def test_version_for_waits_for_the_seal(self):
        def later():
            time.sleep(0.3)
            importance.seal(self.gw.url, "j", 4)

        t = threading.Thread(target=later)
        start = time.monotonic()
        t.start()
        v = importance.version_for(self.gw.url, "j", 4, wait=10, poll=0.02, max_poll=0.1)
        t.join()
        self.assertEqual(v, self.gw.sealed[("j", 4)])
        self.assertLess(time.monotonic() - start, 5)
        polls = [r for r in self.gw.requests if r[0] == "GET"]
        self.assertGreater(len(polls), 2)
        self.assertTrue(all(r[1] == "/importance/j/epochs/4" for r in polls))

    def test_version_for_times_out(self):
        start = time.monotonic()
        with self.assertRaises(importance.ImportanceTimeout) as cm:
            importance.version_for(self.gw.url, "j", 7, wait=0.3, poll=0.05, max_poll=0.1)
        took = time.monotonic() - start
        self.assertGreaterEqual(took, 0.3)
        self.assertLess(took, 3)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertIn("not sealed after 0.3 s", str(cm.exception))
        self.assertIn("epoch 7 of job j is not sealed", str(cm.exception))

    def test_version_for_other_errors_are_not_waited_on(self):
        self.gw.fail = [400]
        with self.assertRaises(importance.ImportanceError) as cm:
            importance.version_for(self.gw.url, "j", 0, wait=30)
        self.assertNotIsInstance(cm.exception, importance.ImportanceTimeout)
        self.assertEqual(cm.exception.status, 400)
        self.assertEqual(len(self.gw.requests), 1)

    def test_retries_unavailable_then_succeeds(self):
        self.gw.fail = [503, 502]
        self.assertEqual(importance.feedback(self.gw.url, "j", 0, ids=[1], losses=[1.0]), 1)
        self.assertEqual(len(self.gw.requests), 3)

    def test_retries_exhausted(self):
        self.gw.fail = [503] * 5
        with self.assertRaises(importance.ImportanceError) as cm:
            importance.seal(self.gw.url, "j", 0, max_retries=1)
        self.assertEqual(cm.exception.status, 503)
        self.assertIn("injected 503", cm.exception.message)
        self.assertIn("after 2 attempts", str(cm.exception))
        self.assertEqual(len(self.gw.requests), 2)

    def test_no_answer(self):
        url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
        with self.assertRaises(importance.ImportanceError) as cm:
            importance.feedback(url, "j", 0, ids=[0], losses=[1.0], max_retries=0)
        self.assertIsNone(cm.exception.status)
        self.assertIn("/importance/j/feedback", str(cm.exception))


class TestAgainstGateway(unittest.TestCase):
    """The same calls against a real `brand serve` (tests/gateway.py)."""

    @classmethod
    def setUpClass(cls):
        cls.gw = gateway()
        cls.keys = sorted(cls.gw.files)

    def test_feedback_seal_and_the_next_epoch(self):
        url, job = self.gw.url, "pytest-imp-cycle"
        n = len(self.keys)
        # Hard samples: the first class's; a second report of a key keeps its largest loss.
        losses = [3.0 if k.startswith("c0/") else 0.1 for k in self.keys]
        self.assertEqual(importance.feedback(url, job, 0, keys=self.keys, losses=losses, dataset="t"), n)
        self.assertEqual(importance.feedback(url, job, 0, keys=self.keys[:5], losses=[0.0] * 5, dataset="t"), 5)
        v0 = importance.seal(url, job, 0, dataset="t")
        self.assertRegex(v0, "^[0-9a-f]{16}$")
        self.assertEqual(importance.seal(url, job, 0, dataset="t"), v0)
        self.assertEqual(importance.version_for(url, job, 0, wait=5, dataset="t"), v0)

        q = {"dataset": "t", "seed": "4", "batch_size": "50", "sampling": "importance", "job": job,
             "importance": v0, "hot": "0"}
        with brand.Client(url, dataset="t") as c:
            _, body = c.get("/epoch/1", q)
            info = json.loads(body)
            drawn = [s["__key__"] for m in range(int(info["batches"])) for s in c.batch(1, m, q)]
        self.assertEqual(len(drawn), n)  # the epoch keeps its length
        self.assertTrue(set(drawn) <= set(self.keys))
        hard = sum(k.startswith("c0/") for k in drawn) / n
        self.assertGreater(hard, 0.25 + 0.1, "the high-loss class is not drawn more often than its share")

        # The next epoch's feedback, by ID, seals onto the first snapshot.
        ids = list(range(10))
        self.assertEqual(importance.feedback(url, job, 1, ids=ids, losses=[5.0] * 10, dataset="t"), 10)
        v1 = importance.seal(url, job, 1, prev=v0, dataset="t")
        self.assertNotEqual(v1, v0)
        self.assertEqual(importance.version_for(url, job, 1, dataset="t"), v1)

    def test_the_client_loop(self):
        """brand.Client's feedback, seal, version_for and set_importance:
        the loop a trainer runs, with two ranks."""
        job = "pytest-imp-client"
        clients = [brand.Client(self.gw.url, dataset="t", seed=2, batch_size=25, world=2, rank=r,
                                importance_job=job, hot=1) for r in range(2)]
        try:
            uniform = []
            for c in clients:
                for batch in c.epoch(0):  # no version yet: the uniform order
                    keys = [s["__key__"] for s in batch]
                    uniform += keys
                    c.feedback(0, keys, [3.0 if k.startswith("c0/") else 0.1 for k in keys])
            self.assertEqual(sorted(uniform), self.keys)
            v = clients[0].seal(0)
            self.assertEqual(clients[1].version_for(0, wait=5), v)
            drawn = []
            for c in clients:
                c.set_importance(v)
                for batch in c.epoch(1):
                    drawn += [s["__key__"] for s in batch]
            self.assertEqual(len(drawn), len(self.keys))  # the epoch keeps its length
            self.assertLess(len(set(drawn)), len(self.keys), "an importance epoch repeats some samples")
            self.assertGreater(sum(k.startswith("c0/") for k in drawn) / len(drawn), 0.35)
        finally:
            for c in clients:
                c.close()
        with self.assertRaises(ValueError):
            brand.Client(self.gw.url, importance="0123456789abcdef")

    def test_the_client_fails_over(self):
        """A client's feedback, seal and version_for go where its batches
        go: the home node first (here, one that refuses connections), then
        the next."""
        dead = f"http://127.0.0.1:{free_port()}"
        with brand.Client("", peers=[dead, self.gw.url], world=2, rank=rank_at([dead, self.gw.url], dead), dataset="t",
                          importance_job="pytest-imp-failover") as c:
            self.assertEqual(c.feedback(0, self.keys[:2], [1.0, 2.0]), 2)
            v = c.seal(0)
            self.assertEqual(c.version_for(0, wait=5), v)
            self.assertEqual(c.served, {self.gw.url: 3})

    def test_refusals(self):
        url = self.gw.url
        job = "pytest-imp-bad"
        cases = [
            ("unknown key", lambda: importance.feedback(url, job, 0, keys=["nope/x"], losses=[1.0], dataset="t"),
             "unknown sample key"),
            ("id out of range", lambda: importance.feedback(url, job, 0, ids=[len(self.keys)], losses=[1.0], dataset="t"),
             str(len(self.keys))),
            ("unknown dataset", lambda: importance.seal(url, job, 0, dataset="nosuch"), "nosuch"),
            ("unknown prev", lambda: importance.seal(url, job, 1, prev="0123456789abcdef", dataset="t"),
             "0123456789abcdef"),
        ]
        for name, call, msg in cases:
            with self.subTest(name):
                with self.assertRaises(importance.ImportanceError) as cm:
                    call()
                self.assertTrue(400 <= cm.exception.status < 500, cm.exception)
                self.assertIn(msg, cm.exception.message)

    def test_version_for_an_unsealed_epoch_times_out(self):
        with self.assertRaises(importance.ImportanceTimeout):
            importance.version_for(self.gw.url, "pytest-imp-unsealed", 3, wait=0.2, dataset="t")


if __name__ == "__main__":
    unittest.main()
