"""An epoch loop over an epoch that grows while it runs: when an append
record applies (POST /jobs/NAME/append), the gateway's batches from its
step on report the grown epoch (Brand-Epoch-Batches, Brand-Epoch-Samples)
and the plan asked for again from the same offset counts them. The loop
must go on to the new end: it stopped at the old count, leaving the
epoch's new batches unread without a word. A stub of the gateway on
loopback answers as the gateway does (the Go tests, gateway/append_test.go
and client/append_test.go, hold the gateway itself to the rule; this
package's fixtures cannot append to a dataset served in place)."""

import http.server
import io
import json
import os
import sys
import tarfile
import threading
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import servetest  # noqa: E402,F401  (puts the package on the path)

import brand  # noqa: E402

INDEX = "5be0c2d17a9e4f60"
BATCH = 4
OLD, NEW = 20, 28  # the epoch's samples before the append and after
FROM = 3  # the first batch of the grown epoch


def batch_tar(keys):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for k in keys:
            data = k.encode()
            ti = tarfile.TarInfo(k + ".txt")
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


class Stub(http.server.ThreadingHTTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.grown = threading.Event()  # set: the record applies


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        samples = NEW if self.server.grown.is_set() else OLD
        parts = u.path.strip("/").split("/")
        if parts[:2] == ["epoch", "0"] and len(parts) == 2:
            doc = {"epoch": 0, "dataset": "t", "seed": 5, "batch_size": BATCH, "window": 2, "world": 1, "rank": 0,
                   "drop_last": False, "offset": int(q.get("offset", 0)), "samples": samples,
                   "batches": (samples + BATCH - 1) // BATCH, "rank_samples": samples, "index": INDEX}
            body, ctype, extra = json.dumps(doc).encode(), "application/json", {"Brand-Index": INDEX}
        elif parts[:3] == ["epoch", "0", "batch"]:
            m = int(parts[3])
            if m >= FROM:
                self.server.grown.set()  # the record made before this step was served
            samples = NEW if m >= FROM else OLD
            if m * BATCH >= samples:
                return self.answer(404, b'{"error": "past the epoch", "status": 404}', "application/json", {})
            keys = [f"s{i:03d}" for i in range(m * BATCH, min((m + 1) * BATCH, samples))]
            body, ctype = batch_tar(keys), "application/x-tar"
            extra = {"Brand-Index": INDEX, "Brand-Epoch": "0", "Brand-Batch": str(m), "Brand-Dataset": "t",
                     "Brand-Batch-Samples": str(len(keys)), "Brand-Epoch-Samples": str(samples),
                     "Brand-Epoch-Batches": str((samples + BATCH - 1) // BATCH)}
        else:
            return self.answer(404, b'{"error": "not found", "status": 404}', "application/json", {})
        self.answer(200, body, ctype, extra)

    def answer(self, status, body, ctype, extra):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)


class TestEpochGrows(unittest.TestCase):
    def setUp(self):
        self.stub = Stub()
        threading.Thread(target=self.stub.serve_forever, daemon=True).start()
        self.addCleanup(self.stub.server_close)
        self.addCleanup(self.stub.shutdown)
        self.url = f"http://127.0.0.1:{self.stub.server_address[1]}"

    def test_the_loop_reads_to_the_new_end(self):
        for ahead in (0, 2):
            with self.subTest(ahead=ahead):
                self.stub.grown.clear()
                with brand.Client(self.url, dataset="t", seed=5, batch_size=BATCH, ahead=ahead) as c:
                    keys = [s["__key__"] for b in c.epoch(0) for s in b]
                self.assertEqual(keys, [f"s{i:03d}" for i in range(NEW)])


if __name__ == "__main__":
    unittest.main()
