"""brand.tasks: the client of task streams (docs/tasks.md).

Two layers. The client's own behaviours against a fake of the gateway's
endpoints on loopback (``Fake``: each test says what it answers): a lease
asked again on 503 at the pace of ``Retry-After`` kept within the poll's
bounds, 410 as TasksDone, a feedback's 409 as LeaseExpired, a lease whose
answer was lost found among the open leases, the trainer's state and its
word to the gateway, a lease's samples decoded from their tar.

Then a real gateway (task_gateway(): 500 prompts) and a toy run: a
deterministic "model" whose pass rate on each prompt rises with the steps
it has trained, three generator threads leasing ahead, one trainer, under
the curriculum with dynamic sampling and retirement. The run is held to
the contract: every step holds B prompts, none counted twice in a pass,
the trainer's steps and the generators' leases are the log's replay, and
a model of the curriculum written here from docs/tasks.md alone, fed the
feedback the generators sent, retires the same prompts and weighs the
same number 1 as the gateway does.
"""

import hashlib
import http.server
import io
import json
import os
import sys
import tarfile
import threading
import time
import unittest
import unittest.mock
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import servetest  # noqa: E402,F401  (puts the package on the path)

import brand  # noqa: E402
from brand import tasks  # noqa: E402

# -- a fake of the gateway's task endpoints ---------------------------------


class Fake(http.server.ThreadingHTTPServer):
    """Answers each request with ``answer(method, path, query, body)``'s
    ``(status, headers, body)`` (a dict or list body is sent as JSON;
    ``None`` drops the connection unanswered), recording the requests with
    the time each arrived."""

    daemon_threads = True

    def __init__(self, answer):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer = answer
        self.requests = []  # (monotonic time, method, path, query, body, headers)
        self.thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def paths(self, method=None):
        return [r[2] for r in self.requests if method is None or r[1] == method]

    def stop(self):
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _any(self):
        u = urllib.parse.urlsplit(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        q = dict(urllib.parse.parse_qsl(u.query))
        doc = json.loads(body) if body else None
        self.server.requests.append((time.monotonic(), self.command, u.path, q, doc, dict(self.headers)))
        got = self.server.answer(self.command, u.path, q, doc)
        if got is None:
            self.close_connection = True
            return
        status, headers, out = got
        if isinstance(out, (dict, list)):
            out = json.dumps(out).encode()
            headers = {"Content-Type": "application/json", **headers}
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_PUT = do_POST = _any


def lease_doc(lid, keys, step=0, generator="g"):
    return {"lease": lid, "generator": generator, "step": step, "expires": "2030-01-01T00:00:00.000Z",
            "prompts": [{"key": k, "id": i, "pass": 0} for i, k in enumerate(keys)]}


def error(status, msg, **headers):
    return status, headers, {"error": msg, "status": status}


def tar_of(files):
    """A tar of key -> {ext: bytes}, in order, as the gateway writes one."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for key, members in files.items():
            for ext, data in members.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class FakeCase(unittest.TestCase):
    def fake(self, answer):
        srv = Fake(answer)
        self.addCleanup(srv.stop)
        job = tasks.TaskJob(srv.url, "rl", dataset="prompts", token="s3cret", timeout=5)
        self.addCleanup(job.close)
        return srv, job


class TestLease(FakeCase):
    def test_503_is_asked_again_at_retry_after(self):
        """A full window (503) is asked again after the gateway's
        Retry-After, kept within the poll's bounds: 0.2 s is waited, 30 s
        is not (MAX_POLL is)."""
        answers = [error(503, "window full", **{"Retry-After": "0.2"}),
                   error(503, "window full", **{"Retry-After": "30"}),
                   (201, {}, lease_doc("L1", ["p/1", "p/2"]))]

        srv, job = self.fake(lambda *a: answers.pop(0))
        gen = job.generator("g")
        got = gen.lease(4, wait=10)
        self.assertEqual(got.id, "L1")
        self.assertEqual(got.prompts, [tasks.Prompt("p/1", 0, 0), tasks.Prompt("p/2", 1, 0)])
        self.assertEqual(got.keys, ["p/1", "p/2"])
        t = [r[0] for r in srv.requests]
        self.assertEqual(len(t), 3)
        self.assertGreaterEqual(t[1] - t[0], 0.19)
        self.assertLess(t[1] - t[0], 0.45)
        self.assertGreaterEqual(t[2] - t[1], tasks.MAX_POLL - 0.01)
        self.assertLess(t[2] - t[1], tasks.MAX_POLL + 0.3)
        # Each ask the same: the generator's name, the count, the ask's ID,
        # the dataset and the token.
        ids = {r[4].get("request") for r in srv.requests}
        self.assertEqual(len(ids), 1)
        self.assertRegex(ids.pop(), "^[0-9a-f]{32}$")
        for _, method, path, q, body, headers in srv.requests:
            self.assertEqual((method, path, q, {**body, "request": ""}), ("POST", "/tasks/rl/leases", {"dataset": "prompts"},
                                                                         {"generator": "g", "prompts": 4, "request": ""}))
            self.assertEqual(headers["Authorization"], "Bearer s3cret")

    def test_503_without_wait_is_none(self):
        srv, job = self.fake(lambda *a: error(503, "window full", **{"Retry-After": "1"}))
        self.assertIsNone(job.generator("g").lease(4))
        self.assertEqual(len(srv.requests), 1)

    def test_wait_runs_out(self):
        """No Retry-After: polled from MIN_POLL, doubling, for the wait and
        no longer; then None."""
        srv, job = self.fake(lambda *a: error(503, "every prompt is leased"))
        t0 = time.monotonic()
        self.assertIsNone(job.generator("g").lease(4, wait=1.0))
        took = time.monotonic() - t0
        self.assertGreaterEqual(took, 0.99)
        self.assertLess(took, 1.5)
        t = [r[0] for r in srv.requests]
        gaps = [b - a for a, b in zip(t, t[1:])]
        self.assertGreaterEqual(len(t), 4)  # 0.05, 0.1, 0.2, 0.4 ...
        self.assertLess(len(t), 12)
        self.assertTrue(all(g >= tasks.MIN_POLL - 0.01 for g in gaps), gaps)
        self.assertTrue(all(g <= tasks.MAX_POLL + 0.2 for g in gaps), gaps)

    def test_every_prompt_retired_is_tasks_done(self):
        """A lease's 404 with every prompt retired (the plan says so) ends
        the generator's loop; not asked again."""
        def answer(method, path, q, body):
            if method == "GET":
                return 200, {}, {"job": "rl", "prompts": 500, "retired": 500, "spec": {"step": 4, "revisit": 0}}
            return error(404, "every prompt retired: all 500 prompts of the job are retired")

        srv, job = self.fake(answer)
        with self.assertRaises(tasks.TasksDone) as cm:
            job.generator("g").lease(4, wait=5)
        self.assertIsInstance(cm.exception, brand.BrandError)
        self.assertIs(brand.TasksDone, tasks.TasksDone)
        self.assertEqual(cm.exception.status, 404)
        self.assertIn("every prompt retired", cm.exception.message)
        self.assertEqual([r[1:3] for r in srv.requests], [("POST", "/tasks/rl/leases"), ("GET", "/tasks/rl")])

    def test_410_is_tasks_done(self):
        srv, job = self.fake(lambda *a: error(410, "every prompt is retired"))
        with self.assertRaises(tasks.TasksDone):
            job.generator("g").lease(4, wait=5)
        self.assertEqual(len(srv.requests), 1)

    def test_a_job_that_does_not_exist_is_not_done(self):
        """A 404 is also a job that does not exist (or, with revisits,
        prompts that may come back): not TasksDone."""
        for plan in (error(404, "no such task job"),
                     (200, {}, {"prompts": 5, "retired": 5, "spec": {"revisit": 0.1}}),
                     (200, {}, {"prompts": 5, "retired": 4, "spec": {}})):
            srv, job = self.fake(lambda m, *a: plan if m == "GET" else error(404, "no such task job"))
            with self.assertRaises(brand.BrandError) as cm:
                job.generator("g").lease(4, wait=5)
            self.assertNotIsInstance(cm.exception, tasks.TasksDone)
            self.assertEqual(cm.exception.status, 404)

    def test_unanswered_lease_sent_again_with_its_id(self):
        """A lease whose connection ends without an answer (a restarted
        gateway's stale connection: docs/tasks.md's generator loop died on
        every restart, its lease sent once) is sent again with the same
        request ID, which the gateway answers with the lease the first ask
        made, if it made one."""
        asks = []

        def answer(method, path, q, body):
            asks.append(body)
            if len(asks) == 1:
                return None  # no answer
            return 201, {}, lease_doc("L1", ["p/1", "p/2"])

        srv, job = self.fake(answer)
        got = job.generator("g").lease(2)
        self.assertEqual(got.id, "L1")
        self.assertEqual(len(asks), 2)
        self.assertEqual(asks[0], asks[1])
        self.assertTrue(asks[0]["request"])

    def test_lost_answer_found_among_open_leases(self):
        """Every ask unanswered (LEASE_TRIES): the lease one of them made,
        if any, is the generator's open lease not handed out yet."""
        state = {"leased": False}

        def answer(method, path, q, body):
            if method == "POST":
                state["leased"] = True
                return None  # made, then the connection is lost
            self.assertEqual(q, {"dataset": "prompts", "generator": "g"})
            old = lease_doc("L0", ["p/0"])
            return 200, {}, {"leases": [old, lease_doc("L1", ["p/1", "p/2"])] if state["leased"] else [old]}

        srv, job = self.fake(answer)
        gen = job.generator("g")
        gen._seen.add("L0")  # handed out before
        got = gen.lease(2)
        self.assertEqual(got.id, "L1")
        self.assertEqual(srv.paths("POST"), ["/tasks/rl/leases"] * tasks.LEASE_TRIES)
        self.assertEqual(len({r[4]["request"] for r in srv.requests if r[1] == "POST"}), 1)  # one ask, sent again

    def test_lost_answer_found_by_its_request_id(self):
        """The open leases name the asks that made them: the lease is the
        one naming this ask's ID, not another open lease of the generator
        (a second Generator object of the same name, say) this object has
        not handed out."""
        state = {"request": None}

        def answer(method, path, q, body):
            if method == "POST":
                state["request"] = body["request"]
                return None  # made, then the connection is lost
            other = dict(lease_doc("L2", ["p/3"]), request="another ask")
            mine = dict(lease_doc("L1", ["p/1", "p/2"]), request=state["request"])
            return 200, {}, {"leases": [other, mine]}

        srv, job = self.fake(answer)
        got = job.generator("g").lease(2)
        self.assertEqual((got.id, got.request), ("L1", state["request"]))

    def test_lost_lease_that_was_never_made(self):
        def answer(method, path, q, body):
            return None if method == "POST" else (200, {}, {"leases": []})

        srv, job = self.fake(answer)
        with self.assertRaises(brand.BrandConnectionError):
            job.generator("g").lease(2)
        self.assertEqual(len(srv.paths("POST")), tasks.LEASE_TRIES)


class TestAnswer(FakeCase):
    def test_feedback_body_and_answer(self):
        doc = {"lease": "L1", "applied": 3, "counted": 1, "redrawn": 1, "rested": 0, "retired": 0, "repeats": 0,
               "steps": [12]}
        srv, job = self.fake(lambda *a: (200, {}, doc))
        lease = tasks.Lease("L1", "g", 12, "", [tasks.Prompt("p/1", 1, 0)])
        got = job.generator("g").answer(lease, [
            tasks.Result("p/1", scores=[1, 0, 1, 1], version=12),
            tasks.Result("p/2", passes=0, n=8, version=12, counts=False),
            {"key": "p/3", "passes": 8, "n": 8, "version": 11},
        ])
        self.assertEqual(got, doc)
        _, method, path, q, body, _ = srv.requests[0]
        self.assertEqual((method, path, q), ("POST", "/tasks/rl/leases/L1/feedback", {"dataset": "prompts"}))
        self.assertEqual(body, {"results": [
            {"key": "p/1", "scores": [1.0, 0.0, 1.0, 1.0], "version": 12},
            {"key": "p/2", "passes": 0, "n": 8, "version": 12, "counts": False},
            {"key": "p/3", "passes": 8, "n": 8, "version": 11},
        ]})

    def test_results_that_cannot_be_sent(self):
        srv, job = self.fake(lambda *a: (200, {}, {}))
        gen = job.generator("g")
        for bad in (tasks.Result("p"), tasks.Result("p", scores=[1], passes=1, n=1), tasks.Result("p", passes=1),
                    tasks.Result("p", scores=[1, float("nan")]), {"key": "p", "scores": [float("inf")]}):
            with self.assertRaises(ValueError):
                gen.answer("L1", [bad])
        with self.assertRaises(TypeError):
            gen.answer("L1", tasks.Result("p", passes=1, n=1))  # one result, not a list
        self.assertEqual(srv.requests, [])

    def test_409_is_lease_expired(self):
        msg = "lease L1 expired at 2026-11-28T10:00:00.000Z"
        srv, job = self.fake(lambda *a: error(409, msg))
        with self.assertRaises(tasks.LeaseExpired) as cm:
            job.generator("g").answer("L1", [tasks.Result("p/1", passes=1, n=2)])
        e = cm.exception
        self.assertIsInstance(e, brand.BrandError)
        self.assertEqual((e.status, e.message), (409, msg))
        self.assertIn(msg, str(e))
        self.assertEqual(len(srv.requests), 1)  # not retried

    def test_422_is_refused(self):
        srv, job = self.fake(lambda *a: error(422, "p/9 is not in lease L1"))
        with self.assertRaises(tasks.TaskRefused) as cm:
            job.generator("g").answer("L1", [tasks.Result("p/9", passes=1, n=2)])
        self.assertNotIsInstance(cm.exception, tasks.LeaseExpired)
        self.assertEqual(cm.exception.status, 422)

    def test_samples_decoded_in_lease_order(self):
        files = {"c1/s1_0003": {"txt": b"two plus two", "cls": b"1"}, "c0/s0_0000": {"txt": b"why", "cls": b"0"}}
        srv, job = self.fake(lambda *a: (200, {"Content-Type": "application/x-tar"}, tar_of(files)))
        got = job.generator("g").samples(tasks.Lease("L7", "g", 0, "", []))
        self.assertEqual(got, files)
        self.assertEqual(list(got), list(files))
        self.assertEqual(srv.paths(), ["/tasks/rl/leases/L7/samples"])

    def test_open_leases(self):
        srv, job = self.fake(lambda *a: (200, {}, {"leases": [lease_doc("L3", ["p/4"], step=2, generator="g-1")]}))
        got = job.generator("g-1").open_leases()
        self.assertEqual(got, [tasks.Lease("L3", "g-1", 2, "2030-01-01T00:00:00.000Z", [tasks.Prompt("p/4", 0, 0)])])
        self.assertEqual(srv.requests[0][3], {"dataset": "prompts", "generator": "g-1"})


class TestMake(FakeCase):
    def test_spec_sent(self):
        srv, job = self.fake(lambda *a: (201, {}, {"job": "rl", "prompts": 500}))
        self.assertEqual(job.make(64, seed=7, policy="curriculum", ttl=1.5, band=(0.2, 0.8), retire=3),
                         {"job": "rl", "prompts": 500})
        _, method, path, q, body, _ = srv.requests[0]
        self.assertEqual((method, path, q), ("PUT", "/tasks/rl", {"dataset": "prompts"}))
        self.assertEqual(body, {"step": 64, "seed": 7, "policy": "curriculum", "ttl": "1500ms", "band": [0.2, 0.8],
                                "retire": 3})

    def test_another_spec_refused(self):
        srv, job = self.fake(lambda *a: error(409, "task job rl exists with another spec"))
        with self.assertRaises(brand.TaskRefused) as cm:
            job.make(64)
        self.assertEqual((cm.exception.status, cm.exception.message), (409, "task job rl exists with another spec"))
        self.assertIsInstance(cm.exception, brand.BrandError)

    def test_replay_lines(self):
        lines = [{"lease": "L1", "generator": "g", "prompts": ["a"]}, {"step": 0, "prompts": ["a"]},
                 {"digest": "9f", "equal": True}]
        body = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
        srv, job = self.fake(lambda *a: (200, {"Content-Type": "application/x-ndjson"}, body))
        self.assertEqual(job.replay(), lines)


class TestTrainer(FakeCase):
    def steps_fake(self, full, not_full_first=0):
        """Steps below ``full`` are full (prompts s/0, s/1), each answering
        503 ``not_full_first`` times first; the trainer's word recorded."""
        asked = {}

        def answer(method, path, q, body):
            if path == "/tasks/rl/trainer":
                return 200, {}, {"trainer": body["step"]}
            s = int(path.rsplit("/", 1)[1])
            asked[s] = asked.get(s, 0) + 1
            if s >= full or asked[s] <= not_full_first:
                return error(503, f"step {s} holds 3 of 4 prompts", **{"Retry-After": "1"})
            return 200, {}, {"step": s, "prompts": [{"key": f"{s}/{i}", "pass": 0} for i in range(2)]}

        return self.fake(answer)

    def test_steps_in_order_and_the_window_told(self):
        srv, job = self.steps_fake(full=10)
        tr = job.trainer(wait=5)
        got = [next(tr) for _ in range(3)]
        self.assertEqual([s.step for s in got], [0, 1, 2])
        self.assertEqual(got[1].prompts, [{"key": "1/0", "pass": 0}, {"key": "1/1", "pass": 0}])
        self.assertEqual(tr.state_dict(), {"job": "rl", "step": 3})
        # Asking for step s says the steps below it are consumed: once each.
        self.assertEqual([(r[2], r[4]) for r in srv.requests], [
            ("/tasks/rl/steps/0", None),
            ("/tasks/rl/trainer", {"step": 1}), ("/tasks/rl/steps/1", None),
            ("/tasks/rl/trainer", {"step": 2}), ("/tasks/rl/steps/2", None),
        ])

    def test_state_round_trip(self):
        srv, job = self.steps_fake(full=10)
        tr = job.trainer(wait=5)
        for _ in range(4):
            tr.next()
        state = json.loads(json.dumps(tr.state_dict()))  # as a checkpoint holds it
        ahead = tr.next()
        again = job.trainer(wait=5)
        again.load_state_dict(state)
        self.assertEqual(again.step, 4)
        self.assertEqual(again.next(), ahead)
        # The resumed trainer's first word is its step, which changes
        # nothing on a gateway that holds it already.
        self.assertEqual(srv.requests[-2][2:5:2], ("/tasks/rl/trainer", {"step": 4}))

    def test_another_jobs_state_refused(self):
        srv, job = self.fake(lambda *a: error(500, "not asked"))
        tr = job.trainer()
        with self.assertRaisesRegex(ValueError, "'other'"):
            tr.load_state_dict({"job": "other", "step": 3})
        for bad in ({"step": 3}, {"job": "rl", "step": -1}, {"job": "rl", "step": "3"}, [("job", "rl")]):
            with self.assertRaises(ValueError):
                tr.load_state_dict(bad)
        self.assertEqual(tr.step, 0)
        self.assertEqual(srv.requests, [])

    def test_waits_until_full(self):
        """A step not full yet (503, Retry-After 1) is asked again every
        MAX_POLL at most, not every second."""
        srv, job = self.steps_fake(full=10, not_full_first=2)
        t0 = time.monotonic()
        self.assertEqual(job.trainer(wait=5).next().step, 0)
        self.assertLess(time.monotonic() - t0, 2 * tasks.MAX_POLL + 0.4)
        self.assertEqual(srv.paths(), ["/tasks/rl/steps/0"] * 3)

    def test_wait_runs_out(self):
        srv, job = self.steps_fake(full=1)
        tr = job.trainer(wait=0.6)
        tr.next()
        t0 = time.monotonic()
        with self.assertRaises(tasks.StepTimeout) as cm:
            tr.next()
        self.assertLess(time.monotonic() - t0, 1.2)
        self.assertIn("step 1 holds 3 of 4 prompts", str(cm.exception))
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertEqual(tr.step, 1)  # still the step to read

    def test_ends_when_every_prompt_is_retired(self):
        """A step that will never fill (every prompt retired for good, the
        steps full end before it) ends the iteration; the plan is asked
        every DONE_EVERY seconds of the wait, no more."""
        def answer(method, path, q, body):
            if path.endswith("/steps/0"):
                return 200, {}, {"step": 0, "prompts": []}
            if path.endswith("/trainer"):
                return 200, {}, {}
            if path == "/tasks/rl":
                over = len(srv.paths()) > 8
                return 200, {}, {"prompts": 5, "retired": 5 if over else 4, "steps_full": 1, "spec": {}}
            return error(503, "step 1 not full", **{"Retry-After": "1"})

        srv, job = self.fake(answer)
        with unittest.mock.patch.object(tasks, "DONE_EVERY", 0.3):
            t0 = time.monotonic()
            self.assertEqual([s.step for s in job.trainer(wait=5)], [0])
        self.assertLess(time.monotonic() - t0, 3)
        asked = srv.paths().count("/tasks/rl")
        self.assertGreaterEqual(asked, 2)
        self.assertLessEqual(asked, srv.paths().count("/tasks/rl/steps/1") // 2 + 1)


# -- a real gateway ---------------------------------------------------------

N = 8  # answers a prompt
B = 16  # prompts a step
STEPS = 30  # steps the toy trainer reads
K = 8  # prompts a lease asks for
SPEC = dict(policy="curriculum", seed=11, ahead=2, ttl="60s", redraws=2, retire=2, history=2, band=[0.2, 0.8],
            pass_score=0.5, temperature=0.1)


def unit(*parts):
    """A number in [0, 1) drawn from ``parts`` alone."""
    h = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") / 2**64


def toy_passes(key, version):
    """The toy model's answers to ``key`` after ``version`` steps of
    training: which of its N answers pass. Its pass rate starts at a
    number drawn from the key (0 to 0.9) and rises 0.02 a step: a run of
    STEPS steps solves and retires some prompts, and leaves most with
    some variance, so that steps keep filling."""
    p = min(1.0, 0.9 * unit("base", key) + 0.02 * version)
    return [unit(key, version, i) < p for i in range(N)]


class Curriculum:
    """docs/tasks.md's curriculum as written there, apart from its draws:
    each prompt's pass rates (answers passing over answers), its weight 1
    while it has none or the mean of its last ``history`` is in ``band``,
    its solves (answers whose every answer passes), retired at ``retire``
    solves."""

    def __init__(self, keys, history, band, pass_score, retire):
        self.rates = {k: [] for k in keys}
        self.solves = dict.fromkeys(keys, 0)
        self.retired = set()
        self.history, (self.lo, self.hi), self.pass_score, self.retire = history, band, pass_score, retire

    def apply(self, result):
        key = result["key"]
        assert key not in self.retired, f"{key} answered after it was retired"
        if "scores" in result:
            passed = sum(1 for s in result["scores"] if s >= self.pass_score)
            n = len(result["scores"])
        else:
            passed, n = result["passes"], result["n"]
        self.rates[key].append(passed / n)
        if passed == n:
            self.solves[key] += 1
            if self.retire and self.solves[key] >= self.retire:
                self.retired.add(key)

    def in_band(self, key):
        last = self.rates[key][-self.history:]
        return not last or self.lo <= sum(last) / len(last) <= self.hi


class Toy:
    """Generators and a trainer over one task job: the generators' leases
    and answers, the trainer's steps, each as it happened."""

    def __init__(self, job):
        self.job = job
        self.version = 0  # steps the trainer has trained on
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.leases = {}  # lease -> (generator, keys)
        self.passes = {}  # lease -> its prompts' passes
        self.answers = []  # (lease, [result], the gateway's answer)
        self.errors = []

    def generate(self, name, scores, job=None):
        """A generator's loop: lease, read, answer, until told to stop or
        every prompt is retired. ``scores``: answers as scores (else as
        passes of N). ``job``: through another node's TaskJob."""
        gen = (job or self.job).generator(name)
        try:
            while not self.stop.is_set():
                try:
                    lease = gen.lease(K, wait=0.5)
                except tasks.TasksDone:
                    return
                if lease is None:
                    continue
                with self.lock:
                    self.leases[lease.id] = (name, lease.keys)
                    self.passes[lease.id] = [p.pass_ for p in lease.prompts]
                texts = gen.samples(lease)
                assert list(texts) == lease.keys, (list(texts), lease.keys)
                assert all(t["txt"] for t in texts.values())
                version = self.version
                results = []
                for p in lease.prompts:
                    passed = toy_passes(p.key, version)
                    if scores:
                        results.append({"key": p.key, "scores": [0.9 if x else 0.1 for x in passed],
                                        "version": version})
                    else:
                        results.append({"key": p.key, "passes": sum(passed), "n": N, "version": version})
                got = gen.answer(lease, results)
                with self.lock:
                    self.answers.append((lease.id, results, got))
        except BaseException as e:  # noqa: BLE001  (reported by the test)
            self.errors.append((name, e))

    def run(self, generators, steps, trainer, jobs=None):
        """The generators (generator g through ``jobs[g]``, if given) and
        the trainer until it has read ``steps`` steps; those steps."""
        threads = [threading.Thread(target=self.generate, args=(f"gen-{g}", g == 0, jobs[g] if jobs else None),
                                    daemon=True) for g in range(generators)]
        for t in threads:
            t.start()
        seen = []
        try:
            for step in trainer:
                seen.append(step)
                self.version = step.step + 1
                if len(seen) == steps or self.errors:
                    break
        finally:
            self.stop.set()
            for t in threads:
                t.join(30)
        assert not any(t.is_alive() for t in threads), "a generator did not stop"
        return seen


def split(replay):
    leases = [x for x in replay if "lease" in x]
    steps = [x for x in replay if "step" in x and "lease" not in x]
    return leases, steps, replay[-1]


class TestTaskRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from gateway import task_gateway  # noqa: PLC0415

        cls.gw = task_gateway()

    def job(self, name):
        job = tasks.TaskJob(self.gw.url, name, dataset="prompts", timeout=30)
        self.addCleanup(job.close)
        return job

    def test_dapo_rule(self):
        """flat="passes" (DAPO's rule): a group whose answers all fail by
        pass_score is drawn again though its scores differ; one whose
        answers pass and fail counts. Another rule is refused, saying so."""
        job = self.job("py-tasks-dapo")
        job.make(2, seed=3, redraws=1, pass_score=0.5, flat="passes")
        gen = job.generator("g")
        lease = gen.lease(2)
        a, b = lease.keys
        got = gen.answer(lease, [tasks.Result(a, scores=[0.1, 0.3]), tasks.Result(b, scores=[0.2, 0.7])])
        self.assertEqual((got["counted"], got["redrawn"]), (1, 1), got)
        with self.assertRaisesRegex(tasks.TaskRefused, "flat=\"variance\""):
            self.job("py-tasks-dapo-bad").make(2, flat="variance")

    def test_curriculum_run(self):
        job = self.job("py-tasks-curriculum")
        made = job.make(B, **SPEC)
        self.assertEqual(made["prompts"], 500)
        self.assertEqual(job.make(B, **SPEC)["spec"], made["spec"])  # the same spec again: the same job
        with self.assertRaises(tasks.TaskRefused) as cm:
            job.make(B + 1, **SPEC)
        self.assertEqual(cm.exception.status, 409)

        toy = Toy(job)
        deadline = time.monotonic() + 240
        seen = toy.run(3, STEPS, job.trainer(wait=60))
        self.assertEqual(toy.errors, [])
        self.assertLess(time.monotonic(), deadline)

        # The trainer's steps: in order, each of B prompts, each counted
        # for an answer with variance (dynamic sampling), none twice in a
        # pass.
        self.assertEqual([s.step for s in seen], list(range(STEPS)))
        counted = set()
        for s in seen:
            self.assertEqual(len(s.prompts), B, s.step)
            for p in s.prompts:
                self.assertNotIn((p["pass"], p["key"]), counted, f"{p['key']} counted twice in pass {p['pass']}")
                counted.add((p["pass"], p["key"]))
                passed = p["passes"] if "passes" in p else sum(1 for x in p["scores"] if x >= 0.5)
                self.assertTrue(0 < passed < N, p)
                self.assertLessEqual(p["version"], s.step)  # answered before step s was full
        self.assertGreater(len({p for p, _ in counted}), 1, "the run stayed in one pass")

        # Settled: no lease open, the log replayed equal.
        plan = job.plan()
        self.assertEqual(plan["open_leases"], 0, plan)
        leases, steps, last = split(job.replay())
        self.assertTrue(last["equal"], last)
        self.assertEqual(last["digest"], plan["digest"])

        # The steps the trainer saw are the log's, and so is every full
        # step after them (a trainer resumed at STEPS reads them).
        self.assertEqual(plan["steps_full"], len(steps))
        self.assertEqual([x["step"] for x in steps], list(range(len(steps))))
        self.assertEqual([x["prompts"] for x in steps[:STEPS]], [[p["key"] for p in s.prompts] for s in seen])
        rest = job.trainer(wait=5)
        rest.load_state_dict({"job": job.job, "step": STEPS})
        for x in steps[STEPS:]:
            s = rest.next()
            self.assertEqual([p["key"] for p in s.prompts], x["prompts"])
            for p in s.prompts:
                self.assertNotIn((p["pass"], p["key"]), counted)
                counted.add((p["pass"], p["key"]))

        # The leases the generators got are the log's, and only those.
        self.assertEqual({x["lease"]: (x["generator"], x["prompts"]) for x in leases}, toy.leases)
        order = {x["lease"]: i for i, x in enumerate(leases)}
        self.assertEqual(plan["leases"], len(leases))

        # Every answer applied once; the counts add up.
        for lid, results, got in toy.answers:
            self.assertEqual((got["applied"], got["repeats"]), (len(results), 0), got)
        self.assertEqual(sum(a[2]["counted"] for a in toy.answers), plan["counted"])
        self.assertEqual(plan["feedback_rows"], sum(len(a[1]) for a in toy.answers))
        self.assertGreaterEqual(plan["counted"], len(steps) * B)
        self.assertLess(plan["counted"], (len(steps) + 1) * B)

        # Each result is of its lease's prompts, in order; a prompt is
        # answered at most 1 + redraws times in the pass it was drawn in.
        times = {}
        for lid, results, _ in toy.answers:
            self.assertEqual([r["key"] for r in results], toy.leases[lid][1])
            for key, pass_ in zip(toy.leases[lid][1], toy.passes[lid]):
                times[(pass_, key)] = times.get((pass_, key), 0) + 1
        self.assertLessEqual(max(times.values()), 1 + SPEC["redraws"])

        # The curriculum, modelled from docs/tasks.md: the same feedback,
        # each prompt's in the order its leases were made, gives the same
        # retired prompts and the same count in the band.
        model = Curriculum([f"c{c}/s{c}_{i:04d}" for c in range(5) for i in range(100)], SPEC["history"],
                           SPEC["band"], SPEC["pass_score"], SPEC["retire"])
        self.assertEqual(set(model.rates), set(self.gw.datasets["prompts"]))
        for lid, results, _ in sorted(toy.answers, key=lambda a: order[a[0]]):
            for r in results:
                model.apply(r)
        self.assertGreater(len(model.retired), 0, "the toy run retired nothing: no test of retirement")
        self.assertLess(len(model.retired), 500)
        self.assertEqual(plan["retired"], len(model.retired), plan)
        self.assertEqual(plan["in_band"], sum(1 for k in model.rates if model.in_band(k)), plan)
        for field in ("retired_keys", "retired_prompts"):  # a list, if the gateway gives one
            if isinstance(plan.get(field), list):
                self.assertEqual(set(plan[field]), model.retired)
        self.assertEqual(sum(a[2]["retired"] for a in toy.answers), len(model.retired))

    def test_a_cluster_shares_one_account(self):
        """Three nodes over one store: a generator on each, the trainer
        on the last. The trainer's steps and the generators' leases are
        every node's replay, and every node replays the same log to the
        same digest, equal to its own plan's."""
        from gateway import ServeCluster  # noqa: PLC0415

        cluster = ServeCluster(self.gw, 3, dataset="prompts")
        self.addCleanup(cluster.stop)
        jobs = [tasks.TaskJob(u, "py-tasks-cluster", dataset="prompts", timeout=30) for u in cluster.urls]
        for j in jobs:
            self.addCleanup(j.close)
        made = jobs[0].make(B, **SPEC)
        self.assertEqual(jobs[1].make(B, **SPEC)["spec"], made["spec"])  # another node knows the job
        toy = Toy(jobs[0])
        seen = toy.run(3, 12, jobs[2].trainer(wait=60), jobs=jobs)
        self.assertEqual(toy.errors, [])
        self.assertEqual([s.step for s in seen], list(range(12)))
        for s in seen:
            self.assertEqual(len(s.prompts), B)
        replays = [j.replay() for j in jobs]
        for r in replays:
            self.assertTrue(r[-1]["equal"], r[-1])
            self.assertEqual(r[:-1], replays[0][:-1])
            self.assertEqual(r[-1]["digest"], replays[0][-1]["digest"])
        leases, steps, _ = split(replays[0])
        self.assertEqual([x["prompts"] for x in steps[:12]], [[p["key"] for p in s.prompts] for s in seen])
        self.assertEqual({x["lease"]: (x["generator"], x["prompts"]) for x in leases}, toy.leases)
        self.assertEqual(len({toy.leases[x["lease"]][0] for x in leases}), 3)  # every node leased

    def test_resumed_trainer_reads_the_same_steps(self):
        job = self.job("py-tasks-resume")
        job.make(8, seed=3, ahead=2)
        toy = Toy(job)
        first = job.trainer(wait=60)
        threads = [threading.Thread(target=toy.generate, args=(f"gen-{g}", False), daemon=True) for g in range(2)]
        for t in threads:
            t.start()
        try:
            before = [first.next() for _ in range(3)]
            state = first.state_dict()
            self.assertEqual(state, {"job": "py-tasks-resume", "step": 3})
            after = [first.next() for _ in range(2)]
            resumed = job.trainer(wait=60)
            resumed.load_state_dict(state)
            self.assertEqual([resumed.next() for _ in range(2)], after)
        finally:
            toy.stop.set()
            for t in threads:
                t.join(30)
        self.assertEqual(toy.errors, [])
        self.assertEqual([s.step for s in before + after], list(range(5)))
        for s in before + after:
            self.assertEqual(len(s.prompts), 8)

    def test_every_prompt_retired_ends_the_run(self):
        """A model that solves every prompt at once (retire=1): each is
        retired at its first answer; then a lease raises TasksDone and the
        trainer's iteration ends after the last full step."""
        job = self.job("py-tasks-done")
        job.make(16, policy="curriculum", retire=1, ahead=4)
        gen = job.generator("g")
        ended = []

        def generate():
            try:
                while True:
                    lease = gen.lease(64, wait=30)
                    if lease is None:
                        ended.append("no lease in 30 s")
                        return
                    gen.answer(lease, [tasks.Result(p.key, passes=4, n=4, version=0) for p in lease.prompts])
            except tasks.TasksDone as e:
                ended.append(e)
            except BaseException as e:  # noqa: BLE001  (reported by the test)
                ended.append(e)

        t = threading.Thread(target=generate, daemon=True)
        t.start()
        t0 = time.monotonic()
        steps = [s.step for s in job.trainer(wait=30)]
        self.assertLess(time.monotonic() - t0, 30)
        t.join(30)
        self.assertEqual(len(ended), 1)
        self.assertIsInstance(ended[0], tasks.TasksDone)
        self.assertEqual(ended[0].status, 404)
        plan = job.plan()
        self.assertEqual(plan["retired"], 500)
        self.assertEqual(steps, list(range(plan["steps_full"])))
        self.assertEqual(plan["counted"] // 16, plan["steps_full"])

    def test_open_leases_and_expiry(self):
        """A killed generator's lease is its open lease after a restart,
        with the prompts not answered yet; an answer after the deadline is
        refused and its prompts are leased again first."""
        job = self.job("py-tasks-expire")
        job.make(4, seed=5, ttl=0.4)
        gen = job.generator("g-a")
        held = gen.lease(3, wait=10)
        self.assertEqual(len(held.prompts), 3)
        restarted = job.generator("g-a")
        self.assertEqual([x.id for x in restarted.open_leases()], [held.id])
        self.assertEqual(restarted.open_leases()[0].keys, held.keys)
        restarted.answer(held, [tasks.Result(held.keys[0], passes=1, n=2, version=0)])
        self.assertEqual(restarted.open_leases()[0].keys, held.keys[1:])
        again = restarted.answer(held, [tasks.Result(held.keys[0], passes=2, n=2, version=0)])
        self.assertEqual(again["repeats"], 1)
        time.sleep(0.8)
        with self.assertRaises(tasks.LeaseExpired) as cm:
            restarted.answer(held, [tasks.Result(held.keys[1], passes=1, n=2, version=0)])
        self.assertEqual(cm.exception.status, 409)
        other = job.generator("g-b").lease(2, wait=10)
        self.assertEqual(set(other.keys), set(held.keys[1:]))  # the front of the plan
        self.assertGreater(job.plan()["expired"], 0)


if __name__ == "__main__":
    unittest.main()
