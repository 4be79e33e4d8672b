"""Client.append and Client.append_record: the wire of POST and GET
/jobs/NAME/append (docs/http-api.md "Appends") against a stub of the
gateway's endpoint on loopback that answers as the gateway does (the
Go tests, gateway/append_test.go and client/append_test.go, hold the
gateway itself to the rule: an append needs a dataset served in place
and files appended to it, which this package's fixtures do not make).
What the stub checks: the path under the job's name, the job's query
with the pinned index version, the body; what the client must give
back: the record, and each refusal as a BrandError with its status and
first editable step."""

import http.server
import json
import os
import sys
import threading
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import servetest  # noqa: E402,F401  (puts the package on the path)

import brand  # noqa: E402

PINNED = "5be0c2d17a9e4f60"
EXTENDS = "9c1f0a4e2b7d5c31"
EXTENDS2 = "3d5e7f9a1b2c4d6e"


class Stub(http.server.ThreadingHTTPServer):
    """The append endpoints of a gateway whose job "run" has read up to
    step 3 (batch size 8) of a dataset of 80 samples pinned at PINNED,
    extended by EXTENDS with 20 more."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests = []  # (method, path, query, body)
        self.record = None


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, doc):
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def parsed(self):
        u = urllib.parse.urlsplit(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        q = dict(urllib.parse.parse_qsl(u.query))
        self.server.requests.append((self.command, u.path, q, body))
        return u.path, q, body

    def do_GET(self):
        path, q, _ = self.parsed()
        if path != "/jobs/run/append" or q.get("index") != PINNED:
            return self.answer(400, {"error": f"unexpected {path} {q}", "status": 400})
        if self.server.record is None:
            return self.answer(404, {"error": "no append record: job run has no append record", "status": 404})
        self.answer(200, self.server.record)

    def do_POST(self):
        path, q, body = self.parsed()
        edit = json.loads(body)
        if path != "/jobs/run/append" or q.get("index") != PINNED or q.get("batch_size") != "8" or q.get("dataset") != "t":
            return self.answer(400, {"error": f"unexpected {path} {q}", "status": 400})
        if set(edit) not in ({"from_step", "index"}, {"from_step", "index", "previous"}):
            return self.answer(400, {"error": f"unexpected body {edit}", "status": 400})
        if "previous" in edit:
            cur = self.server.record
            if cur is None or edit["previous"] != cur["version"]:
                return self.answer(409, {"error": "append conflict: not the current record", "status": 409})
            if edit["index"] != EXTENDS2:
                return self.answer(422, {"error": "index does not extend the job's", "status": 422})
            rec = dict(cur, version="44ee55ff66aa77bb", index_id=cur["index"], index=EXTENDS2, from_step=edit["from_step"],
                       from_position=8 * edit["from_step"], samples=120, previous=cur["version"])
            self.server.record = rec
            return self.answer(201, rec)
        if edit["from_step"] < 4:
            return self.answer(409, {"error": "append conflict: this node has served job run up to position 32 of epoch 0",
                                     "status": 409, "first_editable_step": 4})
        if edit["index"] != EXTENDS:
            return self.answer(422, {"error": "index does not extend the job's", "status": 422})
        rec = {"job": "run", "version": "00aa11bb22cc33dd", "dataset": "t", "index_id": PINNED, "index": EXTENDS,
               "from_step": edit["from_step"], "step_samples": 8, "epoch": 0, "from_position": 8 * edit["from_step"],
               "new_samples": 20, "samples": 100}
        if self.server.record not in (None, rec):
            msg = "append conflict: job run has an append record, version 00aa11bb22cc33dd; a job has one"
            return self.answer(409, {"error": msg, "status": 409})
        self.server.record = rec
        self.answer(201, rec)


class TestAppend(unittest.TestCase):
    def setUp(self):
        self.stub = Stub()
        threading.Thread(target=self.stub.serve_forever, daemon=True).start()
        self.addCleanup(self.stub.server_close)
        self.addCleanup(self.stub.shutdown)
        self.url = f"http://127.0.0.1:{self.stub.server_address[1]}"

    def client(self, name="run"):
        return brand.Client(self.url, dataset="t", seed=4, batch_size=8, name=name, index=PINNED, max_retries=0)

    def test_append(self):
        with self.client() as c:
            with self.assertRaises(brand.BrandError) as cm:
                c.append_record()
            self.assertEqual(cm.exception.status, 404)
            with self.assertRaises(brand.BrandError) as cm:
                c.append(2, EXTENDS)
            self.assertEqual(cm.exception.status, 409)
            self.assertEqual(cm.exception.first_editable_step, 4)
            with self.assertRaises(brand.BrandError) as cm:
                c.append(4, PINNED)
            self.assertEqual(cm.exception.status, 422)
            rec = c.append(cm.exception.first_editable_step or 4, EXTENDS)
            self.assertEqual((rec["index_id"], rec["index"], rec["from_position"], rec["samples"]), (PINNED, EXTENDS, 32, 100))
            self.assertEqual(c.append_record(), rec)
            with self.assertRaises(brand.BrandError) as cm:
                c.append(6, EXTENDS)
            self.assertEqual(cm.exception.status, 409)
            self.assertIsNone(cm.exception.first_editable_step)
        method, path, query, body = self.stub.requests[-1]
        self.assertEqual((method, path, json.loads(body)), ("POST", "/jobs/run/append", {"from_step": 6, "index": EXTENDS}))
        self.assertEqual((query["dataset"], query["index"], query["seed"]), ("t", PINNED, "4"))

    def test_append_after(self):
        with self.client() as c:
            first = c.append(4, EXTENDS)
            with self.assertRaises(brand.BrandError) as cm:
                c.append(6, EXTENDS2, previous="0000000000000000")
            self.assertEqual(cm.exception.status, 409)
            rec = c.append(6, EXTENDS2, previous=first["version"])
            self.assertEqual((rec["previous"], rec["index_id"], rec["index"], rec["samples"]), (first["version"], EXTENDS, EXTENDS2, 120))
            self.assertEqual(c.append_record(), rec)
        _, _, _, body = self.stub.requests[-2]
        self.assertEqual(json.loads(body), {"from_step": 6, "index": EXTENDS2, "previous": first["version"]})
        with self.assertRaises(ValueError):
            self.client().append(6, EXTENDS2, previous=7)

    def test_refused_before_asking(self):
        for bad in (-1, 1.5, True, "next"):
            with self.subTest(from_step=bad), self.assertRaises(ValueError):
                self.client().append(bad, EXTENDS)
        with self.assertRaises(ValueError):
            self.client().append(4, None)
        with self.assertRaises(ValueError):
            self.client(None).append(4, EXTENDS)
        self.assertEqual(self.stub.requests, [])


if __name__ == "__main__":
    unittest.main()
