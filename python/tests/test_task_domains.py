"""brand.tasks: a task job of domains and its edits (docs/tasks.md,
*Domains*, *Edits*).

First the client alone, against test_tasks' fake of the gateway: the
domains and edits as sent, what is refused before any request, a 409 of a
ratio edit as StepFull, results by key alone given their datasets from the
lease, and a lease's samples of one key in two datasets kept apart.

Then real gateways. domain_gateway() serves three prompt datasets of the
same keys (math, code, chat): a job at 0.5/0.3/0.2 of 10 whose every full
step holds 5/3/2 of them, leases holding one key twice answered by key
alone, an exclusion never leased after it, a ratio edit refused from a
full step (naming the plan's steps_full) and served from the next, the
steps after it at the new ratios. AppendGateway (appendgateway.py) serves
the one dataset an append can extend: appended prompts leased in the
job's next pass.
"""

import io
import os
import sys
import tarfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import servetest  # noqa: E402,F401  (puts the package on the path)

from brand import tasks  # noqa: E402
from servetest import shared  # noqa: E402
from test_tasks import Fake, error  # noqa: E402

RATIOS = {"math": 0.5, "code": 0.3, "chat": 0.2}
EDITED = {"math": 0.2, "code": 0.3, "chat": 0.5}
B = 10


def tar_of(samples):
    """A tar of ``(key, {ext: bytes})`` in order, a key possibly twice."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for key, members in samples:
            for ext, data in members.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def domain_lease(lid, prompts):
    """A lease's JSON of ``(dataset, key)`` prompts."""
    return {"lease": lid, "generator": "g", "step": 0, "expires": "2030-01-01T00:00:00.000Z",
            "prompts": [{"key": k, "id": i, "pass": 0, "dataset": d} for i, (d, k) in enumerate(prompts)]}


class FakeCase(unittest.TestCase):
    def fake(self, answer):
        srv = Fake(answer)
        self.addCleanup(srv.stop)
        job = tasks.TaskJob(srv.url, "rl", dataset="math", timeout=5, max_retries=0)
        self.addCleanup(job.close)
        return srv, job


class TestDomainsSent(FakeCase):
    def test_make_sends_the_domains_in_order(self):
        """A mapping, pairs or dicts: the same domains, in the order given;
        domain_passes as given."""
        srv, job = self.fake(lambda *a: (201, {}, {"job": "rl"}))
        as_dicts = [{"dataset": d, "ratio": r} for d, r in RATIOS.items()]
        for domains in (RATIOS, list(RATIOS.items()), as_dicts):
            job.make(B, seed=5, domains=domains, domain_passes="shared")
        for _, method, path, q, body, _ in srv.requests:
            self.assertEqual((method, path, q), ("PUT", "/tasks/rl", {"dataset": "math"}))
            self.assertEqual(body, {"step": B, "seed": 5, "policy": "uniform", "domains": as_dicts,
                                    "domain_passes": "shared"})
        job.make(B)
        self.assertNotIn("domains", srv.requests[-1][4])
        self.assertNotIn("domain_passes", srv.requests[-1][4])

    def test_bad_domains_refused_before_any_request(self):
        srv, job = self.fake(lambda *a: (201, {}, {}))
        for bad in ({"math": 0}, {"math": -0.5}, {"math": float("nan")}, {"math": float("inf")}, {"math": True},
                    {"math": "0.5"}, [("math", 0.5), ("math", 0.5)], {"": 1}, {}, [],
                    [{"dataset": "math"}], [{"dataset": "math", "ratio": 1, "index": "x"}]):
            with self.assertRaises(ValueError, msg=repr(bad)):
                job.make(B, domains=bad)
        for bad in ("math", [("math", 0.5, 1)], [3], 0.5):
            with self.assertRaises(TypeError, msg=repr(bad)):
                job.make(B, domains=bad)
        with self.assertRaises(ValueError):
            job.edit_ratios(3, {"math": -1, "code": 1})
        with self.assertRaises(ValueError):
            job.edit_ratios(-1, EDITED)
        with self.assertRaises(TypeError):
            job.exclude("c0/s0_0000", dataset="chat")  # a key, not a list of them
        with self.assertRaises(ValueError):
            job.exclude([], dataset="chat")
        self.assertEqual(srv.requests, [])

    def test_edits_sent_and_refused(self):
        answers = {
            "/tasks/rl/exclude": (200, {}, {"job": "rl", "excluded": 2, "prompts": 72, "excluded_total": 2}),
            "/tasks/rl/append": error(422, "index 0123456789abcdef of dataset code does not extend index x"),
            "/tasks/rl/ratios": (409, {}, {"error": "step 3 is full", "status": 409, "first_editable_step": 7}),
        }
        srv, job = self.fake(lambda m, path, q, body: answers[path])
        self.assertEqual(job.exclude(["a", "b"], dataset="chat")["excluded"], 2)
        with self.assertRaises(tasks.TaskRefused) as cm:
            job.append("0123456789abcdef", dataset="code")
        self.assertNotIsInstance(cm.exception, tasks.StepFull)
        self.assertEqual(cm.exception.status, 422)
        with self.assertRaises(tasks.StepFull) as full:
            job.edit_ratios(3, EDITED)
        self.assertIsInstance(full.exception, tasks.TaskRefused)
        self.assertEqual((full.exception.status, full.exception.first_editable_step), (409, 7))
        self.assertEqual([(r[1], r[2], r[3], r[4]) for r in srv.requests], [
            ("POST", "/tasks/rl/exclude", {"dataset": "math"}, {"keys": ["a", "b"], "dataset": "chat"}),
            ("POST", "/tasks/rl/append", {"dataset": "math"}, {"index": "0123456789abcdef", "dataset": "code"}),
            ("POST", "/tasks/rl/ratios", {"dataset": "math"}, {"from_step": 3, "ratios": EDITED}),
        ])

    def test_answer_names_a_shared_keys_datasets(self):
        """Results by key alone for a key two prompts share are given those
        prompts' datasets in the lease's order (one named already takes
        its own); answering some of them by key alone is refused unsent."""
        srv, job = self.fake(lambda *a: (200, {}, {"applied": 3}))
        gen = job.generator("g")
        lease = tasks._lease(domain_lease("L1", [("math", "a"), ("math", "b"), ("code", "a"), ("chat", "a")]))
        gen.answer(lease, [tasks.Result("a", passes=1, n=4), tasks.Result("b", passes=1, n=4),
                           {"key": "a", "passes": 2, "n": 4}, tasks.Result("a", passes=3, n=4)])
        self.assertEqual([(r.get("dataset"), r["passes"]) for r in srv.requests[-1][4]["results"]],
                         [("math", 1), (None, 1), ("code", 2), ("chat", 3)])
        gen.answer(lease, [tasks.Result("a", passes=1, n=4, dataset="code"), {"key": "a", "passes": 2, "n": 4},
                           tasks.Result("a", passes=3, n=4)])
        self.assertEqual([(r.get("dataset"), r["passes"]) for r in srv.requests[-1][4]["results"]],
                         [("code", 1), ("math", 2), ("chat", 3)])
        with self.assertRaisesRegex(ValueError, "name each its dataset"):
            gen.answer(lease, [tasks.Result("a", passes=1, n=4)])
        self.assertEqual(len(srv.requests), 2)

    def test_samples_of_one_key_in_two_datasets(self):
        """Paired with the lease's prompts in order, keyed DATASET/KEY; a
        lease answered in part since is paired with its open lease's
        prompts; a lease given by ID too."""
        prompts = [("math", "a"), ("code", "a"), ("math", "b")]
        files = [("a", {"txt": b"math a", "cls": b"0"}), ("a", {"txt": b"code a", "cls": b"1"}),
                 ("b", {"txt": b"math b", "cls": b"0"})]
        state = {"answered": 0}

        def answer(method, path, q, body):
            if path.endswith("/samples"):
                return 200, {"Content-Type": "application/x-tar"}, tar_of(files[state["answered"]:])
            return 200, {}, {"leases": [domain_lease("L1", prompts[state["answered"]:])]}

        srv, job = self.fake(answer)
        gen = job.generator("g")
        lease = tasks._lease(domain_lease("L1", prompts))
        self.assertEqual(lease.names, ["math/a", "code/a", "math/b"])
        want = {"math/a": files[0][1], "code/a": files[1][1], "math/b": files[2][1]}
        self.assertEqual(gen.samples(lease), want)
        self.assertEqual(srv.paths(), ["/tasks/rl/leases/L1/samples"])  # the lease's own prompts
        self.assertEqual(gen.samples("L1"), want)
        state["answered"] = 1
        self.assertEqual(gen.samples(lease), {"code/a": files[1][1], "math/b": files[2][1]})
        self.assertEqual(srv.paths()[-1], "/tasks/rl/leases")


# -- real gateways ------------------------------------------------------------

#: domain_gateway()'s datasets: 24 prompts each, under the same keys
#: (c0/s0_0000 ... c1/s1_0011), their bytes each dataset's own.
DOMAIN_SPECS = ("math", "code", "chat")


@shared
def domain_gateway():
    """The shared gateway of DOMAIN_SPECS, started on first use."""
    from gateway import Gateway, Spec  # noqa: PLC0415

    return Gateway({name: Spec(2, 12, "8KiB", 400, ext="txt") for name in DOMAIN_SPECS})


class TestDomainsRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = domain_gateway()

    def test_domains_and_edits(self):
        job = tasks.TaskJob(self.gw.url, "py-task-domains", dataset="math", timeout=30)
        self.addCleanup(job.close)
        made = job.make(B, seed=5, ahead=3, domains=RATIOS)
        self.assertEqual(made["prompts"], 72)
        self.assertEqual([d["dataset"] for d in made["domains"]], list(RATIOS))
        self.assertEqual(job.make(B, seed=5, ahead=3, domains=list(RATIOS.items()))["spec"], made["spec"])

        gen = job.generator("g")
        trainer = job.trainer(wait=30)
        read, after_exclusion, shared_keys = [], [], []
        gone = set()

        def run(until):
            """Leases, reads and answers by key alone until ``until`` steps
            are full, the trainer reading each step a full window holds."""
            for _ in range(400):
                if job.plan()["steps_full"] >= until:
                    return
                lease = gen.lease(B)
                if lease is None:
                    read.append(trainer.next())
                    continue
                for p in lease.prompts:
                    self.assertNotIn((p.dataset, p.key), gone, f"excluded prompt leased in {lease.id}")
                after_exclusion.extend(lease.prompts if gone else ())
                texts = gen.samples(lease)
                self.assertEqual(list(texts), lease.names)
                for p in lease.prompts:
                    self.assertEqual(texts[p.name], self.gw.datasets[p.dataset][p.key], p)
                keys = [p.key for p in lease.prompts]
                twice = sorted({k for k in keys if keys.count(k) > 1})
                if twice:
                    shared_keys.append(twice)
                    # Without the lease's prompts, the gateway cannot tell
                    # which prompt a key means.
                    with self.assertRaisesRegex(tasks.TaskRefused, "name its dataset"):
                        gen.answer(lease.id, [tasks.Result(twice[0], passes=1, n=4)])
                got = gen.answer(lease, [tasks.Result(p.key, passes=1, n=4) for p in lease.prompts])
                self.assertEqual((got["applied"], got["counted"], got["excluded"]), (len(keys), len(keys), 0), got)
            self.fail(f"{until} steps not full after 400 leases: {job.plan()}")

        def shares(steps, ratios):
            for s in steps:
                self.assertEqual(len(s.prompts), B, s.step)
                n = {d: sum(1 for p in s.prompts if p["dataset"] == d) for d in ratios}
                for d, r in ratios.items():
                    self.assertLess(abs(n[d] - B * r), 1, f"step {s.step}: {n}, the ratios {ratios}")

        # A lease answered in part: its samples are those of the prompts
        # left, paired with them.
        lease = gen.lease(B)
        first, rest = lease.prompts[0], lease.prompts[1:]
        gen.answer(lease, [tasks.Result(first.key, passes=1, n=4, dataset=first.dataset)])
        texts = gen.samples(lease)
        self.assertEqual(list(texts), [p.name for p in rest])
        for p in rest:
            self.assertEqual(texts[p.name], self.gw.datasets[p.dataset][p.key], p)
        gen.answer(lease, [tasks.Result(p.key, passes=1, n=4, dataset=p.dataset) for p in rest])

        run(4)
        self.assertTrue(shared_keys, "no lease held a key twice: no test of answers by key alone")
        while trainer.step < 4:
            read.append(trainer.next())
        shares(read[:4], RATIOS)

        # An exclusion: never leased after it, in any pass.
        keys = ["c0/s0_0001", "c1/s1_0002", "c0/s0_0003"]
        got = job.exclude(keys, dataset="chat")
        self.assertEqual((got["excluded"], got["excluded_total"], got["prompts"]), (3, 3, 72), got)
        gone.update(("chat", k) for k in keys)
        self.assertEqual(job.plan()["excluded"], 3)
        with self.assertRaises(tasks.TaskRefused) as cm:
            job.exclude(["nope"], dataset="chat")
        self.assertEqual(cm.exception.status, 422)
        with self.assertRaises(tasks.TaskRefused) as cm:
            job.exclude(keys[:1])  # a key of which domain?
        self.assertEqual(cm.exception.status, 400)

        # A ratio edit: refused from a full step, naming the first not full;
        # served from the step after it.
        full = job.plan()["steps_full"]
        with self.assertRaises(tasks.StepFull) as cm:
            job.edit_ratios(1, EDITED)
        self.assertEqual((cm.exception.status, cm.exception.first_editable_step), (409, full))
        self.assertEqual(job.edit_ratios(full + 1, EDITED)["from_step"], full + 1)
        phases = job.plan()["ratios"]
        self.assertEqual([p["from_step"] for p in phases], [0, full + 1])
        for d, r in EDITED.items():
            self.assertAlmostEqual(phases[1]["ratios"][d], r)

        # chat's 21 prompts at 5 a step: several of its passes.
        run(full + 13)
        while trainer.step < full + 13:
            read.append(trainer.next())
        self.assertEqual([s.step for s in read], list(range(full + 13)))
        shares(read[full + 1:], EDITED)
        self.assertGreater(sum(1 for p in after_exclusion if p.dataset == "chat"), 21)
        self.assertTrue(job.replay()[-1]["equal"])


class TestTaskAppend(unittest.TestCase):
    def test_appended_prompts_join_the_next_pass(self):
        """A job of one dataset: an append's prompts are leased in the pass
        after the one under way, none before it ends."""
        from appendgateway import FILES, ROWS, AppendGateway, row_keys  # noqa: PLC0415

        gw = AppendGateway()
        self.addCleanup(gw.stop)
        job = tasks.TaskJob(gw.url, "py-task-append", dataset="d", timeout=30)
        self.addCleanup(job.close)
        self.assertEqual(job.make(40, seed=2, ahead=8)["prompts"], FILES * ROWS)
        gen = job.generator("g")
        first = gen.lease(7)
        self.assertEqual({p.dataset for p in first.prompts}, {""})
        index = gw.append("extra", 16)
        got = job.append(index)
        self.assertEqual((got["appended"], got["prompts"]), (16, FILES * ROWS + 16), got)
        with self.assertRaises(tasks.TaskRefused) as cm:
            job.append(index)  # extends the job's index no more
        self.assertEqual(cm.exception.status, 422)

        new = set(row_keys("extra", 16))
        passes = {}
        lease = first
        for _ in range(100):
            if lease is not None:
                for p in lease.prompts:
                    passes.setdefault(p.pass_, set()).add(p.key)
                gen.answer(lease, [tasks.Result(p.key, passes=1, n=4) for p in lease.prompts])
            if new <= passes.get(1, set()):
                break
            lease = gen.lease(32)
        self.assertEqual(len(passes[0]), FILES * ROWS)
        self.assertFalse(passes[0] & new, "an appended prompt leased in the pass under way")
        self.assertLessEqual(new, passes[1])


if __name__ == "__main__":
    unittest.main()
