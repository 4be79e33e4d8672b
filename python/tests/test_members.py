"""The client pins a cluster membership version per epoch (members=), and
raises MembersUnknownError on a 409 naming the current one rather than move
the epoch to it on its own (each rank doing so split a step between two
layouts: some samples twice, some never)."""

import http.server
import json
import os
import sys
import threading
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import brand  # noqa: E402


class Members(http.server.BaseHTTPRequestHandler):
    """A gateway whose cluster changes: answers name ``current`` unless the
    request pins a version, and a pinned version in ``forgotten`` is 409
    naming ``current``. Records each request's members=."""

    protocol_version = "HTTP/1.1"
    current = "00000000000000a1"
    forgotten: set = set()
    sent: list = []

    def do_GET(self):
        cls = type(self)
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        pinned = q.get("members", [""])[0]
        cls.sent.append(pinned)
        if pinned in cls.forgotten:
            body = json.dumps({"error": f"unknown membership version {pinned}", "status": 409}).encode()
            self.send_response(409)
            self.send_header("Brand-Members", cls.current)
        else:
            body = json.dumps({"samples": 1, "batches": 1}).encode()
            self.send_response(200)
            self.send_header("Brand-Members", pinned or cls.current)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class TestMembers(unittest.TestCase):
    def test_pins_per_epoch_and_never_repins(self):
        handler = type("H", (Members,), {"forgotten": set(), "sent": []})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        with brand.Client(url, brand.Options(job=brand.Job(batch_size=2, world=2, rank=1))) as c:
            c.get("/epoch/0/batch/0", c.params())
            handler.current = "00000000000000b2"  # the cluster changes mid-epoch
            c.get("/epoch/0/batch/1", c.params())
            self.assertEqual(c.members, "00000000000000a1")
            c.get("/epoch/1/batch/0", c.params())  # the next epoch pins afresh
            self.assertEqual(c.members, "00000000000000b2")
            handler.forgotten.add("00000000000000b2")
            handler.current = "00000000000000c3"
            with self.assertRaises(brand.MembersUnknownError) as e:
                c.get("/epoch/1/batch/1", c.params())
            self.assertEqual(e.exception.status, 409)
            self.assertEqual(e.exception.members, "00000000000000c3")
            self.assertEqual(c.members, "00000000000000b2")  # the epoch keeps its pin
            with self.assertRaises(brand.MembersUnknownError):
                c.get("/epoch/1/batch/2", c.params())
            c.get("/datasets")  # not about an epoch: nothing pinned
        self.assertEqual(handler.sent, [
            "", "00000000000000a1",
            "", "00000000000000b2", "00000000000000b2",
            ""])

    def test_job_members_sent(self):
        q = brand.Client("http://127.0.0.1:1", brand.Options(job=brand.Job(members="0011223344556677"))).params()
        self.assertEqual(q["members"], "0011223344556677")


if __name__ == "__main__":
    unittest.main()
