import http.server
import json
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import free_port, gateway  # noqa: E402

import brand  # noqa: E402
from brand._http import retry_after  # noqa: E402


class TestClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = gateway()

    def test_bytes_equal_source_files(self):
        with brand.Client(self.gw.url, dataset="t", seed=3, batch_size=17) as c:
            seen = set()
            for batch in c.epoch(0):
                for s in batch:
                    key = s.pop("__key__")
                    self.assertNotIn(key, seen)
                    seen.add(key)
                    self.assertEqual(s, self.gw.files[key], key)
        self.assertEqual(seen, set(self.gw.files))

    def test_member_views(self):
        """member_views: every member a memoryview of the batch's body, the
        same bytes, no copy in the client."""
        with brand.Client(self.gw.url, dataset="t", seed=3, batch_size=17) as c:
            c.member_views()
            batch = c.batch(0, 0)
            self.assertIsNotNone(batch.body)
            for s in batch:
                key = s.pop("__key__")
                for ext, v in s.items():
                    self.assertIsInstance(v, memoryview)
                    self.assertEqual(bytes(v), self.gw.files[key][ext])
            c.member_views(False)
            self.assertTrue(all(type(v) is bytes for s in c.batch(0, 1) for k, v in s.items() if k != "__key__"))

    def test_ranks_exactly_once_and_epochs_differ(self):
        orders = []
        for epoch in (0, 1):
            keys = []
            for rank in range(3):
                with brand.Client(self.gw.url, seed=9, batch_size=8, world=3, rank=rank, ahead=3) as c:
                    info = c.epoch_info(epoch)
                    got = [s["__key__"] for s in c.samples(epoch)]
                    self.assertEqual(len(got), info["rank_samples"])
                    keys += got
            self.assertEqual(len(keys), self.gw.samples)
            self.assertEqual(set(keys), set(self.gw.files))
            orders.append(keys)
        self.assertNotEqual(orders[0], orders[1])

    def test_no_read_ahead_same_order(self):
        a = brand.Client(self.gw.url, seed=5, batch_size=10, ahead=0)
        b = brand.Client(self.gw.url, seed=5, batch_size=10, ahead=4)
        self.assertEqual([s["__key__"] for s in a.samples(2)], [s["__key__"] for s in b.samples(2)])
        a.close()
        b.close()

    def test_bad_parameter(self):
        with self.assertRaises(brand.BrandError) as cm:
            with brand.Client(self.gw.url, batch_size=0) as c:
                c.epoch_info(0)
        e = cm.exception
        self.assertEqual(e.status, 400)
        self.assertIn("batch_size", e.message)
        self.assertIn("batch_size", str(e))

    def test_out_of_range_batch(self):
        with self.assertRaises(brand.BrandError) as cm:
            with brand.Client(self.gw.url) as c:
                c.batch(0, 10**6)
        self.assertEqual(cm.exception.status, 404)
        self.assertIn("out of range", cm.exception.message)

    def test_unknown_dataset(self):
        with self.assertRaises(brand.BrandError) as cm:
            with brand.Client(self.gw.url, dataset="nope") as c:
                list(c.samples(0))
        self.assertEqual(cm.exception.status, 404)
        self.assertIn("unknown dataset", cm.exception.message)

    def test_gateway_down(self):
        port = free_port()  # nothing listens there
        c = brand.Client(f"http://127.0.0.1:{port}", max_retries=3, backoff=0.05)
        t0 = time.monotonic()
        with self.assertRaises(brand.BrandConnectionError) as cm:
            c.epoch_info(0)
        self.assertLess(time.monotonic() - t0, 3)
        self.assertIsNone(cm.exception.status)
        self.assertIn("after 4 attempts", str(cm.exception))
        self.assertIsInstance(cm.exception, ConnectionError)

    def test_datasets(self):
        with brand.Client(self.gw.url) as c:
            ds = c.datasets()
        self.assertEqual([d["name"] for d in ds], ["t"])
        self.assertEqual(ds[0]["samples"], self.gw.samples)


class TestJob(unittest.TestCase):
    """name= names a job (sent as job=) and weight= weighs it; neither changes a
    byte."""

    @classmethod
    def setUpClass(cls):
        cls.gw = gateway()

    def read(self, **kw):
        """Every rank's plan and samples of epoch 1 at world 2."""
        out = []
        for rank in (0, 1):
            with brand.Client(self.gw.url, dataset="t", seed=6, batch_size=9, world=2, rank=rank, **kw) as c:
                out.append((c.epoch_info(1), list(c.samples(1))))
        return out

    def test_a_named_job_reads_the_same_bytes(self):
        want = self.read()
        self.assertEqual(sum(len(s) for _, s in want), self.gw.samples)
        for kw in (dict(name="pytest-named"), dict(name="pytest-named", weight=2.5), dict(weight=100),
                   dict(name="pytest-other.2_b", weight=0.01)):
            with self.subTest(**kw):
                self.assertEqual(self.read(**kw), want)

    def test_parameters(self):
        cases = [
            (dict(), {}),
            (dict(name="a"), {"job": "a"}),
            (dict(weight=2), {"weight": "2"}),
            (dict(weight=2.0), {"weight": "2"}),
            (dict(weight=0.5), {"weight": "0.5"}),
            (dict(weight=1e-5), {"weight": "1e-05"}),
            (dict(weight=100), {"weight": "100"}),
            (dict(weight=1 / 3), {"weight": "0.3333333333333333"}),
            (dict(name="j", weight=1), {"job": "j", "weight": "1"}),
        ]
        for kw, want in cases:
            with self.subTest(**kw):
                with brand.Client(self.gw.url, dataset="t", **kw) as c:
                    got = {k: v for k, v in c.params().items() if k in ("job", "weight", "sampling")}
                    self.assertEqual(got, want)
                    self.assertEqual(c.options.job.sent_name, kw.get("name"))
                    c.epoch_info(0)  # the gateway takes them as written

    def test_invalid_job_and_weight(self):
        cases = [
            (dict(name=""), "job name"),
            (dict(name="x" * 129), "job name"),
            (dict(name="."), "job name"),
            (dict(name=".."), "job name"),
            (dict(name="a/b"), "job name"),
            (dict(name="a b"), "job name"),
            (dict(name="é"), "job name"),
            (dict(name=3), "job name"),
            (dict(weight=0), "weight"),
            (dict(weight=-1), "weight"),
            (dict(weight=100.0001), "weight"),
            (dict(weight=float("nan")), "weight"),
            (dict(weight=float("inf")), "weight"),
            (dict(weight="2"), "weight"),
            (dict(weight=True), "weight"),
        ]
        url = f"http://127.0.0.1:{free_port()}"  # nothing listens: nothing may be sent
        for kw, msg in cases:
            with self.subTest(**kw):
                with self.assertRaises(ValueError) as cm:
                    brand.Client(url, **kw)
                self.assertIn(msg, str(cm.exception))
        for kw in (dict(name="x" * 128), dict(name="A.b_c-9"), dict(weight=1e-9), dict(weight=100)):
            with self.subTest(**kw):
                brand.Client(url, **kw).close()

    def test_importance_job_is_the_name(self):
        job = "pytest-imp-name"
        with brand.Client(self.gw.url, dataset="t", importance_job=job, hot=1) as c:
            only = c.params()
            self.assertEqual(c.options.job.sent_name, job)
        self.assertEqual((only["sampling"], only["job"], only["hot"]), ("importance", job, "1"))
        with brand.Client(self.gw.url, dataset="t", name=job, importance_job=job, hot=1) as c:
            self.assertEqual(c.params(), only)
        with brand.Client(self.gw.url, dataset="t", name=job, importance_job=job, weight=3) as c:
            self.assertEqual(c.params()["weight"], "3")
            first = list(c.samples(0))  # an importance job's first epoch is the uniform order
        with brand.Client(self.gw.url, dataset="t", importance_job=job) as c:
            self.assertEqual(list(c.samples(0)), first)
        with self.assertRaises(ValueError) as cm:
            brand.Client(self.gw.url, name="a", importance_job="b")
        self.assertIn("differ", str(cm.exception))
        # A named uniform job is no importance job.
        with brand.Client(self.gw.url, dataset="t", name=job) as c:
            self.assertNotIn("sampling", c.params())
            with self.assertRaises(ValueError):
                c.seal(0)
        with self.assertRaises(ValueError):
            brand.Client(self.gw.url, name=job, hot=1)


class Flaky(http.server.BaseHTTPRequestHandler):
    """503 with Retry-After for the first `fail` requests, then a plan."""

    protocol_version = "HTTP/1.1"
    fail = 2
    calls = 0

    def do_GET(self):
        cls = type(self)
        cls.calls += 1
        if cls.calls <= cls.fail:
            body = json.dumps({"error": "indexes loading", "status": 503}).encode()
            self.send_response(503)
            self.send_header("Retry-After", "0.1")
        else:
            body = json.dumps({"samples": 1, "batches": 1}).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class TestRetry(unittest.TestCase):
    def serve(self, fail):
        handler = type("H", (Flaky,), {"fail": fail, "calls": 0})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        return f"http://127.0.0.1:{srv.server_address[1]}", handler

    def test_retry_after_honoured(self):
        url, h = self.serve(fail=2)
        t0 = time.monotonic()
        with brand.Client(url, backoff=5, max_backoff=5) as c:  # Retry-After beats backoff
            info = c.epoch_info(0)
        self.assertEqual(info["samples"], 1)
        self.assertEqual(h.calls, 3)
        self.assertLess(time.monotonic() - t0, 2)

    def test_retries_bounded(self):
        url, h = self.serve(fail=100)
        with self.assertRaises(brand.BrandError) as cm:
            with brand.Client(url, max_retries=2, max_backoff=0.05) as c:
                c.epoch_info(0)
        self.assertEqual(cm.exception.status, 503)
        self.assertEqual(cm.exception.message, "indexes loading")
        self.assertAlmostEqual(cm.exception.retry_after, 0.1)
        self.assertEqual(h.calls, 3)

    def test_retry_after_values(self):
        now = 1_700_000_000.0  # Tue, 14 Nov 2023 22:13:20 GMT
        cases = [
            (None, None), ("", None), ("0", 0.0), ("2", 2.0), (" 1.5 ", 1.5), ("-1", None), ("nan", None),
            ("soon", None),
            ("Tue, 14 Nov 2023 22:13:30 GMT", 10.0),  # an HTTP date: seconds from now
            ("Tue, 14 Nov 2023 22:13:00 GMT", 0.0),  # in the past
            ("Tue, 14 Nov 2023 22:13:30 -0000", None),  # no zone: not an HTTP date
        ]
        for v, want in cases:
            with self.subTest(v=v):
                self.assertEqual(retry_after(v, now), want)


if __name__ == "__main__":
    unittest.main()
