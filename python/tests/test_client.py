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


if __name__ == "__main__":
    unittest.main()
