"""brand.Options: the typed options, their checks, the flat keywords of the
first releases, and the query encoder pinned against the Go side's list of
job parameters. The classes before TestWire need no gateway."""

import dataclasses
import json
import os
import pickle
import re
import sys
import unittest
import urllib.parse
import warnings
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakecluster import Cluster  # noqa: E402
from gateway import REPO, gateway  # noqa: E402

import brand  # noqa: E402
from brand import _compat  # noqa: E402
from brand._options import job_query, resolve  # noqa: E402
from brand.client import _planned  # noqa: E402

# The public query parameters of a job, one a line, sorted: written from
# api.JobParams by the Go side's tests (internal/job/query), so that the gateway's
# parser, the Go client and this client agree on one list.
GOLDEN = os.path.join(REPO, "internal", "job", "query", "testdata", "job_params.golden")
URL = "http://127.0.0.1:1"  # nothing is sent by the tests that use it


def golden():
    with open(GOLDEN) as f:
        names = [line.strip() for line in f if line.strip()]
    assert names == sorted(set(names)), f"{GOLDEN} is not sorted and unique"
    return set(names)


# Jobs that set every field their kind allows: one dataset sampled by
# importance, and a mixture (which excludes dataset and importance, and is
# sent without index=).
ONE = brand.Job(dataset="t", seed=7, batch_size=8, window=2, world=4, rank=3, drop_last=True, offset=16,
                locality=False, name="run-1", weight=2.5,
                importance=brand.Importance("run-1", version="0123456789abcdef", hot=3), index="fedcba9876543210",
                members="0011223344556677", transform="imagenet-train")
MIX = brand.Job(seed=7, batch_size=8, window=2, world=4, rank=3, drop_last=True, offset=16, locality=False,
                name="run-1", weight=2.5, mix="web:0.7,code:0.3", mix_block=32, mix_samples=1000, index="a,b",
                columns=("image", "label"))
TOK = brand.Job(dataset="tok", seed=3, batch_size=8, seq=4096, pack="concat", pad=0, eos=2, balance="attention")
VIS = brand.Job(dataset="pairs", seed=3, batch_size=8, seq=4096, vision="size:448x448,patch:14,image:32000")
# A schedule given with the job, and one stored under its name.
SCHED = brand.Job(seed=7, mix_schedule="0:web:0.7,code:0.3;40~80:web:0,code:1", mix_block=32)
STORED = brand.Job(seed=7, name="run-1", schedule_version="latest", mix_block=32)
# Clip jobs: a tree of videos' clips, and a LeRobot dataset's windows.
CLIP = brand.Job(dataset="kinetics", seed=3, batch_size=8, clip=16, stride=2, fps=7.5, step=3, clip_start="first",
                 clip_layout="tchw")
ROBOT = brand.Job(dataset="aloha", seed=3, batch_size=8, delta_timestamps={"observation.images.top": [-0.1, 0]},
                  frames=[-2, 0], gop_window=4)
# Bucket jobs: a pixel budget with every option, and a latent-token one.
BUCKETS = brand.Job(dataset="photos", seed=3, world=4, rank=1, buckets="sdxl", budget=4 << 20, max_upscale=1.5,
                    small="fail", crop="random", flip=0.5, resume="4:10,3:2")
LATENT = brand.Job(dataset="photos", seed=3, buckets="512x512,384x640", budget_tokens=8192, vae=8, patch=2)
# A clip bucket job: its clip= and step= derived from its buckets.
CLIPBUCKETS = brand.Job(dataset="kinetics", seed=3, buckets="480x848x49,640x640x17", budget_tokens=1 << 20, vae_t=4,
                        fps=8)
# A run job: a dataset's samples as runs of consecutive records.
RUNS = brand.Job(dataset="steps", seed=3, batch_size=8, world=2, run=16)


def field_changes():
    """Each field of a Job, by name: a job without it and what sets it
    (beside what it needs)."""
    plain, mixed = brand.Job(), brand.Job(mix="web:1")
    return {
        "dataset": (plain, dict(dataset="t")),
        "seed": (plain, dict(seed=9)),
        "batch_size": (plain, dict(batch_size=8)),
        "window": (plain, dict(window=3)),
        "world": (plain, dict(world=3)),
        "rank": (brand.Job(world=3), dict(rank=2)),
        "drop_last": (plain, dict(drop_last=True)),
        "offset": (plain, dict(offset=5)),
        "locality": (plain, dict(locality=False)),
        "name": (plain, dict(name="n")),
        "weight": (plain, dict(weight=2)),
        "importance": (plain, dict(importance=brand.Importance("n"))),
        "index": (plain, dict(index="abc")),
        "members": (plain, dict(members="0011223344556677")),
        "mix": (plain, dict(mix="web:1")),
        "mix_block": (mixed, dict(mix_block=4)),
        "mix_samples": (mixed, dict(mix_samples=40)),
        "mix_schedule": (plain, dict(mix_schedule="0:web:1")),
        "schedule_version": (brand.Job(name="n"), dict(schedule_version="latest")),
        "transform": (plain, dict(transform="imagenet-eval")),
        "columns": (plain, dict(columns=("image",))),
        "seq": (plain, dict(seq=128)),
        "pack": (brand.Job(seq=128), dict(pack="concat")),
        "pad": (brand.Job(seq=128), dict(pad=5)),
        "eos": (brand.Job(seq=128, pack="concat"), dict(eos=2)),
        "vision": (brand.Job(seq=128), dict(vision="size:28x28,patch:14,image:1")),
        "balance": (brand.Job(seq=128), dict(balance="attention")),
        "clip": (plain, dict(clip=8)),
        "stride": (brand.Job(clip=8), dict(stride=2)),
        "fps": (brand.Job(clip=8), dict(fps=5)),
        "step": (brand.Job(clip=8), dict(step=3)),
        "clip_start": (brand.Job(clip=8), dict(clip_start="first")),
        "clip_layout": (brand.Job(clip=8), dict(clip_layout="tchw")),
        "gop_window": (brand.Job(clip=8), dict(gop_window=4)),
        "delta_timestamps": (plain, dict(delta_timestamps={"cam": [-0.1, 0]})),
        "frames": (plain, dict(frames=[-1, 0])),
        "buckets": (plain, dict(buckets="sdxl", budget=1 << 22)),
        "budget": (brand.Job(buckets="sdxl", budget_tokens=9000), dict(budget=1 << 22, budget_tokens=None)),
        "budget_tokens": (brand.Job(buckets="sdxl", budget=1 << 22), dict(budget_tokens=9000, budget=None)),
        "vae": (brand.Job(buckets="sdxl", budget_tokens=9000), dict(vae=4)),
        "patch": (brand.Job(buckets="sdxl", budget_tokens=9000), dict(patch=1)),
        "vae_t": (brand.Job(buckets="480x848x49", budget_tokens=90000), dict(vae_t=2)),
        "max_upscale": (brand.Job(buckets="sdxl", budget=1 << 22), dict(max_upscale=1.5)),
        "small": (brand.Job(buckets="sdxl", budget=1 << 22), dict(small="fail")),
        "crop": (brand.Job(buckets="sdxl", budget=1 << 22), dict(crop="random")),
        "flip": (brand.Job(buckets="sdxl", budget=1 << 22), dict(flip=0.5)),
        "resume": (brand.Job(buckets="sdxl", budget=1 << 22), dict(resume="1:3")),
        "run": (plain, dict(run=16)),
    }


class TestClipBuckets(unittest.TestCase):
    def test_clip_and_step_derived(self):
        q = job_query(CLIPBUCKETS)
        self.assertEqual((q["clip"], q["step"], q["vae_t"]), ("17", str(1 << 30), "4"))
        self.assertEqual(job_query(brand.Job(buckets="video-480", budget=1 << 30))["clip"], "17")
        self.assertNotIn("clip", job_query(brand.Job(buckets="sdxl", budget=1 << 22)))
        for kw in (dict(clip=9), dict(step=2), dict(frames=[-1, 0])):
            with self.assertRaises(ValueError):
                brand.Job(buckets="480x848x49", budget=1 << 30, **kw)


class TestQuery(unittest.TestCase):
    def test_the_parameters_are_the_golden_list(self):
        want = golden()
        one, mix, tok = set(job_query(ONE)), set(job_query(MIX)), set(job_query(TOK)) | set(job_query(VIS))
        sched = set(job_query(SCHED)) | set(job_query(STORED))
        clips = set(job_query(CLIP)) | set(job_query(ROBOT))
        buckets = set(job_query(BUCKETS)) | set(job_query(LATENT)) | set(job_query(CLIPBUCKETS))
        runs = set(job_query(RUNS))
        for sent in (one, mix, tok, sched, clips, buckets, runs):
            self.assertLessEqual(sent, want, "the client sends a job parameter the gateway does not list")
        self.assertEqual(one | mix | tok | sched | clips | buckets | runs, want,
                         "the client never sends some job parameter the gateway lists")
        # An epoch's requests are the job with its plan's values, encoded alike.
        plan = {"dataset": "t", "seed": 7, "batch_size": 8, "window": 2, "world": 4, "rank": 3,
                "drop_last": True, "samples": 300}
        self.assertEqual(set(job_query(_planned(ONE, plan))), one)
        mixplan = {**plan, "dataset": MIX.mix, "mix": {"block": 32, "components": []}}
        self.assertEqual(set(job_query(_planned(MIX, mixplan))), mix)

    def test_every_field_reaches_the_query(self):
        # A field the encoder ignored would be an option that changes
        # nothing. Each field set alone (beside what it needs) must change
        # the query; a new field needs a line in field_changes, and in the
        # encoder.
        changes = field_changes()
        self.assertEqual(set(changes), {f.name for f in dataclasses.fields(brand.Job)})
        for name, (base, kw) in changes.items():
            with self.subTest(field=name):
                self.assertNotEqual(job_query(dataclasses.replace(base, **kw)), job_query(base))
        imp = brand.Importance("n")
        for kw in (dict(version="v1"), dict(hot=2)):
            with self.subTest(importance=kw):
                self.assertNotEqual(job_query(brand.Job(importance=dataclasses.replace(imp, **kw))),
                                    job_query(brand.Job(importance=imp)))

    def test_readme_tables(self):
        """python/README.md's tables of the options name every field of each
        (and no other), and its table of a Job's fields and the parameters
        they send names every job parameter the gateway takes (the golden
        list), each field beside the parameters it changes. The
        reproduction: the tables left out members, columns, seq, pack, pad
        and eos."""
        with open(os.path.join(REPO, "python", "README.md")) as f:
            readme = f.read()
        rows = [line.split("|")[1:-1] for line in readme.splitlines() if line.startswith("| `")]
        ticked = lambda cell: [t.split("=")[0] for t in re.findall(r"`([^`]+)`", cell)]  # noqa: E731
        for cls in (brand.Job, brand.Importance, brand.Connection, brand.Options):
            row = [r for r in rows if r[0].strip() == f"`brand.{cls.__name__}`"]
            self.assertEqual(len(row), 1, f"python/README.md has no one row of brand.{cls.__name__}")
            self.assertEqual(ticked(row[0][-1]), [f.name for f in dataclasses.fields(cls)],
                             f"python/README.md's fields of brand.{cls.__name__}")
        sent = {}
        for r in rows:
            if len(r) == 2 and not r[0].strip().startswith("`brand."):
                for field in ticked(r[0]):
                    self.assertNotIn(field, sent, f"python/README.md names Job.{field} twice")
                    sent[field] = set(ticked(r[1]))
        self.assertEqual(set(sent), {f.name for f in dataclasses.fields(brand.Job)},
                         "python/README.md's table of a Job's parameters")
        self.assertEqual(set().union(*sent.values()), golden(),
                         "python/README.md's table of a Job's parameters names other parameters than the gateway takes")
        for name, (base, kw) in field_changes().items():
            with self.subTest(field=name):
                a, b = job_query(dataclasses.replace(base, **kw)), job_query(base)
                changed = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
                self.assertLessEqual(changed, sent[name], f"Job.{name} sends {changed}; the README says {sent[name]}")


    def test_values(self):
        q = job_query(ONE)
        self.assertEqual(q, {
            "dataset": "t", "seed": "7", "batch_size": "8", "window": "2", "world": "4", "rank": "3",
            "drop_last": "true", "offset": "16", "locality": "false", "job": "run-1", "sampling": "importance",
            "importance": "0123456789abcdef", "hot": "3", "weight": "2.5", "index": "fedcba9876543210",
            "members": "0011223344556677", "transform": "imagenet-train",
        })
        self.assertEqual(job_query(brand.Job()), {"seed": "0", "drop_last": "false"})
        self.assertEqual(job_query(ONE, "0000000000000001")["index"], "0000000000000001")  # a client's pin
        self.assertNotIn("index", job_query(MIX))  # a gateway refuses index= with mix=
        self.assertEqual(job_query(brand.Job(importance=brand.Importance("imp")))["job"], "imp")
        self.assertEqual(job_query(MIX)["columns"], "image,label")
        self.assertEqual(brand.Job(columns=["a", "b"]).columns, ("a", "b"))
        for bad in ((), ("a", "a"), ("",), ("a,b",)):
            with self.subTest(columns=bad), self.assertRaises(ValueError):
                brand.Job(columns=bad)
        with self.assertRaises(TypeError):
            brand.Job(columns="image")


class TestOptions(unittest.TestCase):
    def test_checked_when_made(self):
        bad = [
            (brand.Job, dict(world=2, rank=2)),
            (brand.Job, dict(world=0)),
            (brand.Job, dict(rank=-1)),
            (brand.Job, dict(offset=-1)),
            (brand.Job, dict(seed=True)),  # was sent as seed=True, refused by the gateway at the first request
            (brand.Job, dict(seed=-1)),
            (brand.Job, dict(seed=1 << 64)),
            (brand.Job, dict(seed="7")),
            (brand.Job, dict(name="a b")),
            (brand.Job, dict(weight=0)),
            (brand.Job, dict(name="a", importance=brand.Importance("b"))),
            (brand.Job, dict(mix="web:1", mix_samples=0)),
            (brand.Job, dict(mix_block=0)),
            (brand.Job, dict(mix="web:1,code:1", index="a")),
            (brand.Job, dict(transform="ImageNet")),
            (brand.Job, dict(transform="")),
            (brand.Job, dict(transform="a" * 65)),
            (brand.Job, dict(seq=128, balance="pixels")),
            (brand.Job, dict(seq=0)),
            (brand.Job, dict(seq=128, pack="first")),
            (brand.Job, dict(seq=128, pad=-1)),
            (brand.Job, dict(seq=128, pack="concat", eos=1 << 31)),
            (brand.Job, dict(seq=128, eos=2)),  # eos without pack="concat": the gateway's rule beside the table
            (brand.Job, dict(clip=0)),
            (brand.Job, dict(clip=8, fps=0)),
            (brand.Job, dict(clip=8, clip_layout="hwc")),
            (brand.Job, dict(delta_timestamps={"cam": [0]}, stride=2)),  # a tree's parameter, LeRobot windows
            (brand.Job, dict(name="n", schedule_version="v1")),
            (brand.Job, dict(schedule_version="latest")),  # the stored schedule is the named job's
            (brand.Importance, dict(name="..")),
            (brand.Importance, dict(name="j", hot=-1)),
            (brand.Connection, dict(timeout=0)),
            (brand.Connection, dict(max_retries=-1)),
            (brand.Connection, dict(backoff=float("nan"))),
            (brand.Connection, dict(home_retry=-1)),
            (brand.Connection, dict(probe_after=0)),
            (brand.Connection, dict(peers=["http://a:1"], discover=True)),
            (brand.Connection, dict(peers=["http://a:1", "http://a:1"])),
            (brand.Options, dict(ahead=-1)),
        ]
        for cls, kw in bad:
            with self.subTest(cls=cls.__name__, **kw):
                with self.assertRaises(ValueError):
                    cls(**kw)
        with self.assertRaisesRegex(TypeError, "Importance"):
            brand.Job(importance="0123456789abcdef")  # the version alone is Importance.version
        with self.assertRaisesRegex(TypeError, "brand.Job"):
            brand.Options(job={"batch_size": 8})

    def test_normalised_and_frozen(self):
        job = brand.Job(mix={"web": 0.70, "code": 0.3}, weight=2)
        self.assertEqual((job.mix, job.weight, job.components), ("web:0.7,code:0.3", 2.0, ("web", "code")))
        conn = brand.Connection(peers="http://n-{0..2}:8080/")
        self.assertEqual(conn.peers, ("http://n-0:8080", "http://n-1:8080", "http://n-2:8080"))
        with self.assertRaises(dataclasses.FrozenInstanceError):
            job.seed = 3
        # replace checks again.
        with self.assertRaises(ValueError):
            dataclasses.replace(brand.Job(world=2), rank=2)
        opts = brand.Options(job=job, connection=conn)
        self.assertEqual(pickle.loads(pickle.dumps(opts)), opts)  # to DataLoader workers
        self.assertEqual(hash(opts), hash(dataclasses.replace(opts)))

    def test_token_is_never_shown(self):
        opts = brand.Options(connection=brand.Connection(token="s3cr3t-token"))
        self.assertNotIn("s3cr3t-token", repr(opts))
        self.assertNotIn("s3cr3t-token", str(opts))

    def test_sent_name(self):
        self.assertIsNone(brand.Job().sent_name)
        self.assertEqual(brand.Job(name="a").sent_name, "a")
        self.assertEqual(brand.Job(importance=brand.Importance("b")).sent_name, "b")
        self.assertEqual(brand.Job(name="b", importance=brand.Importance("b")).sent_name, "b")


# A Job naming each feature of the gateway's table that a job's parameters
# name (the resolved ones are the server's): a new feature needs a line.
FEATURE_FIELDS = {
    "dataset": dict(dataset="t"),
    "mix": dict(mix="web:1"),
    "schedule": dict(mix_schedule="0:web:1"),
    "index": dict(index="0123456789abcdef"),
    "importance": dict(importance=brand.Importance("j")),
    "samples": dict(),
    "tokens": dict(seq=64),
    "clips": dict(clip=8),
    "transform": dict(transform="imagenet-train"),
    "columns": dict(columns=("image",)),
    "locality": dict(),
    "balance-bytes": dict(balance="bytes"),
    "balance-cost": dict(balance="attention"),
    "buckets": dict(buckets="sdxl", budget=1 << 22),
    "runs": dict(run=4),
    # None: no Job field sends it yet (the gateway does not serve vision=);
    # its pairs are checked on the parameters (VISION_QUERY).
    "vision": None,
}
# The parameters of a vision job, for the table's checks of its pairs.
VISION_QUERY = {"seq": "64", "vision": "size:448x448,patch:14,pad:1"}
# And a Job field sending each parameter of the table's companions and
# exclusive groups; None: a Job cannot send it alone (an Importance always
# sends sampling=importance beside its version and hot).
PARAM_FIELDS = {
    "pack": dict(pack="concat"), "pad": dict(pad=5), "eos": dict(eos=2),
    "stride": dict(stride=2), "fps": dict(fps=5), "step": dict(step=3), "clip_start": dict(clip_start="first"),
    "clip_layout": dict(clip_layout="tchw"), "gop_window": dict(gop_window=4),
    "mix_block": dict(mix_block=4), "mix_samples": dict(mix_samples=40),
    "importance": None, "hot": None,
    "dataset": dict(dataset="t"), "mix": dict(mix="web:1"), "mix_schedule": dict(mix_schedule="0:web:1"),
    "schedule": dict(name="n", schedule_version="latest"),
    "clip": dict(clip=8), "delta_timestamps": dict(delta_timestamps={"cam": [0]}), "frames": dict(frames=[0]),
    "vision": None, "balance": dict(balance="vision"),
}


# What the table's rules ask beside a companion parameter and its feature:
# eos= is concatenated (pack=concat), sampling=importance is named (job=).
RULES_ASK = {"eos": {"pack": "concat"}, "importance": {"job": "j"}, "hot": {"job": "j"}}


# For each rule of the table, in its order: query parameters that meet it,
# and the fields of a Job that send them (None: a Job cannot; an
# Importance always names its job).
RULE_JOBS = [
    ({"schedule": "latest"}, dict(schedule_version="latest")),
    ({"seq": "64", "eos": "2"}, dict(seq=64, eos=2)),
    ({"sampling": "importance"}, None),
    ({"delta_timestamps": "cam:0", "stride": "2"}, dict(delta_timestamps={"cam": [0]}, stride=2)),
    ({"mix": "pairs:1,web:1", **VISION_QUERY, "balance": "vision"},
     dict(mix="pairs:1,web:1", seq=64, vision=VISION_QUERY["vision"], balance="vision")),
    ({"mix_schedule": "0:pairs:1,web:1", **VISION_QUERY, "balance": "tokens"},
     dict(mix_schedule="0:pairs:1,web:1", seq=64, vision=VISION_QUERY["vision"], balance="tokens")),
    ({**VISION_QUERY, "pack": "concat"}, dict(dataset="pairs", seq=64, vision=VISION_QUERY["vision"], pack="concat")),
    ({"buckets": "sdxl", "budget": "4194304", "batch_size": "4"}, dict(buckets="sdxl", budget=1 << 22, batch_size=4)),
    ({"buckets": "480x848x49", "budget": "1073741824", "clip": "49", "gop_window": "2"}, dict(buckets="480x848x49", budget=1 << 30, gop_window=2)),
    ({"buckets": "video-480", "budget": "4194304", "delta_timestamps": "cam:0"}, dict(buckets="video-480", budget=1 << 22, delta_timestamps={"cam": [0]})),
    ({"buckets": "sdxl", "budget": "4194304", "clip": "8"}, dict(buckets="sdxl", budget=1 << 22, clip=8)),
    ({"buckets": "sdxl"}, dict(buckets="sdxl")),
    ({"budget": "4194304"}, dict(budget=1 << 22)),
    ({"mix": "a:1,b:1", "clip": "8"}, dict(mix="a:1,b:1", clip=8)),
    ({"mix_schedule": "0:a:1,b:1", "clip": "8"}, dict(mix_schedule="0:a:1,b:1", clip=8)),
]


def refused(message):
    """The error text of the table's refusal with ``message``."""
    return f"brand: {_compat.table()['error']}: {message}"


def cell(a, b):
    """The table's cell of features a and b."""
    for c in _compat.table()["pairs"]:
        if {c["a"], c["b"]} == {a, b}:
            return c
    raise KeyError((a, b))


class TestCompat(unittest.TestCase):
    """A Job is checked against the gateway's table of features
    (brand/compat.json, written by internal/job/features): what it refuses,
    with its messages, in its order, from the parameters the job sends."""

    def assertRefused(self, kw, message):
        with self.assertRaises(ValueError) as cm:
            brand.Job(**kw)
        self.assertEqual(str(cm.exception), refused(message))

    def test_the_table_is_the_packaged_golden(self):
        """The table read is the package's compat.json (go test
        ./internal/job/features holds it to the Go table), and this test knows
        a Job of every feature and parameter it names."""
        t = _compat.table()
        with open(os.path.join(REPO, "python", "brand", "compat.json")) as f:
            self.assertEqual(t, json.load(f))
        expressed = {d["name"] for d in t["features"] if not d.get("resolved")}
        self.assertEqual(set(FEATURE_FIELDS), expressed, "a feature a job's parameters name has no Job here")
        params = {p for g in t["companions"] + t["exclusives"] for p in g["params"]}
        self.assertEqual(set(PARAM_FIELDS), params, "a parameter of the table's companions or groups has no Job here")

    def test_detection(self):
        """Go's spec.Detect: TestRequested's jobs name the same features."""
        self.assertEqual(_compat.features(job_query(brand.Job(dataset="a", seq=64, balance="attention"))),
                         ("dataset", "tokens", "locality", "balance-cost"))
        self.assertEqual(_compat.features(job_query(brand.Job(mix="a:1", locality=False))), ("mix", "samples"))
        self.assertEqual(_compat.features({"seed": "1"}), ("dataset", "samples", "locality"))
        self.assertEqual(_compat.features({"sampling": "uniform", "balance": "tokens", "locality": "true"}),
                         ("dataset", "samples", "locality", "balance-cost"))
        self.assertEqual(_compat.features({"delta_timestamps": "cam:0", "index": ""}), ("dataset", "clips", "locality"))

    def test_the_gateways_cases(self):
        """Go's TestCheckParams, read by this client from the same table."""
        exclusives, companions = _compat.table()["exclusives"], _compat.table()["companions"]
        for query, want in [
            ("dataset=a&seed=1", None),
            ("mix=a:1,b:1&seq=128&balance=attention", None),
            ("seq=128&pack=concat&eos=2", None),
            ("dataset=a&mix=a:1,b:1", exclusives[0]["message"]),
            ("mix=a:1&mix_schedule=0:a:1", exclusives[0]["message"]),
            ("clip=8&frames=0,1", exclusives[2]["message"]),
            ("pack=concat", "pack applies only to a token job (seq=)"),
            ("stride=2", "stride applies only to a clip job (clip=, or delta_timestamps= or frames= over a LeRobot "
                         "dataset)"),
            ("mix_block=4", companions[2]["message"]),
            ("hot=3", companions[3]["message"]),
            ("seq=128&sampling=importance&job=j", cell("importance", "tokens")["message"]),
            ("mix=a:1,b:1&sampling=importance&job=j", cell("mix", "importance")["message"]),
            ("balance=attention", cell("samples", "balance-cost")["message"]),
            ("seq=64&balance=bytes", cell("tokens", "balance-bytes")["message"]),
            ("clip=8&balance=bytes", cell("clips", "balance-bytes")["message"]),
            ("seq=64&transform=imagenet-train", cell("tokens", "transform")["message"]),
            ("seq=64&clip=8", cell("tokens", "clips")["message"]),
            ("seq=64&locality=true", None),  # a downgrade: served
            ("seq=64&vision=size:448x448,patch:14,pad:1&balance=vision", None),
            ("seq=64&vision=size:448x448,patch:14,pad:1&balance=attention", None),
            ("seq=64&balance=vision", companions[5]["message"]),
        ]:
            with self.subTest(query=query):
                self.assertEqual(_compat.refusal(dict(urllib.parse.parse_qsl(query))), want)

    def test_every_refused_pair(self):
        """Every pair the table refuses, of features a job's parameters
        name, refuses a Job naming both with the pair's message; or, where
        the two are one group of exclusive parameters (two sources), with
        the group's, which the gateway checks first; or the Job cannot
        send both (a mixture's index is its own pin, not sent; one balance=)."""
        t = _compat.table()
        resolved = {d["name"] for d in t["features"] if d.get("resolved")}
        pairs = [c for c in t["pairs"] if c["kind"] == "refuse" and not {c["a"], c["b"]} & resolved]
        self.assertGreater(len(pairs), 15)
        for c in pairs:
            a, b = FEATURE_FIELDS[c["a"]], FEATURE_FIELDS[c["b"]]
            with self.subTest(pair=(c["a"], c["b"])):
                if a is None or b is None:  # vision: on the parameters
                    job = object.__new__(brand.Job)
                    for f in dataclasses.fields(brand.Job):
                        object.__setattr__(job, f.name, (a or b).get(f.name, f.default))
                    q = {**job_query(job), **VISION_QUERY}
                    self.assertEqual(_compat.refusal(q), c["message"])
                    continue
                if set(a) & set(b):  # one field: a job is balanced by one cost
                    self.assertEqual((c["a"], c["b"]), ("balance-bytes", "balance-cost"))
                    continue
                kw = {**a, **b}
                if "index" in kw and ("mix" in kw or "mix_schedule" in kw):
                    q = job_query(brand.Job(**kw))
                    self.assertNotIn("index", q, "a mixture's index is the client's pin, never sent")
                    continue
                group = [e for e in t["exclusives"] if sum(p in self.params_of(kw) for p in e["params"]) > 1]
                self.assertRefused(kw, group[0]["message"] if group else c["message"])

    @staticmethod
    def params_of(kw):
        """The parameters a Job of fields ``kw`` sends, without checking
        it (the job_query of a Job that skipped its checks)."""
        job = object.__new__(brand.Job)
        for f in dataclasses.fields(brand.Job):
            object.__setattr__(job, f.name, kw.get(f.name, f.default))
        return set(job_query(job))

    def test_every_companion(self):
        """Each companion parameter without a feature it applies to is
        refused with its group's message, naming the parameter: as the
        gateway's parameters, and from a Job of the field that sends it."""
        for c in _compat.table()["companions"]:
            for p in c["params"]:
                with self.subTest(param=p):
                    want = c["message"].replace("{param}", p)
                    given = c.get("value", "1")  # a companion with a value: the parameter given it
                    self.assertEqual(_compat.refusal({p: given}), want)
                    if PARAM_FIELDS[p] is not None:
                        self.assertRefused(PARAM_FIELDS[p], want)
                    for f in c["needs"]:  # and taken beside a feature it applies to
                        named = self.set_by(f)[0]
                        beside = VISION_QUERY if f == "vision" else {named["param"]: named.get("value", "1")}
                        # and what the table's rules ask of the job beside
                        # it: an EOS is concatenated, importance is named.
                        beside.update(RULES_ASK.get(p, {}))
                        self.assertIsNone(_compat.refusal({p: given, **beside}))
        # Importance's version and hot are sent only with sampling=importance.
        q = job_query(brand.Job(importance=brand.Importance("j", version="0123456789abcdef", hot=2)))
        self.assertEqual((q["sampling"], q["importance"], q["hot"]), ("importance", "0123456789abcdef", "2"))

    @staticmethod
    def set_by(feature):
        """The parameters that name ``feature``."""
        return next(d for d in _compat.table()["features"] if d["name"] == feature)["set_by"]

    def test_every_exclusive_group(self):
        """Any two parameters of an exclusive group are refused with the
        group's message, before any other refusal."""
        for e in _compat.table()["exclusives"]:
            for i, p in enumerate(e["params"]):
                for r in e["params"][i + 1:]:
                    with self.subTest(params=(p, r)):
                        self.assertEqual(_compat.refusal({p: "1", r: "1", "pack": "concat"}), e["message"])
                        self.assertRefused({**PARAM_FIELDS[p], **PARAM_FIELDS[r]}, e["message"])

    def test_every_rule(self):
        """Every rule of the table beyond pairs refuses, with its message,
        the parameters that meet it, and a Job that sends them; giving a
        parameter of its ``unless`` lifts it. The parser's companion rules
        that used to be this client's own (eos= only with pack=concat,
        schedule= only with job=, a tree of videos' parameters not with a
        LeRobot job's windows), the one of a vision job's packing and of
        a vision mixture balanced, which the gateway's layout used to
        refuse where no client saw it, are all here."""
        rules = _compat.table()["rules"]
        self.assertEqual(len(rules), len(RULE_JOBS))
        for rule, (params, kw) in zip(rules, RULE_JOBS):
            given = [p["param"] for p in rule.get("given", ())]
            want = rule["message"].replace("{param}", given[0] if given else "")
            with self.subTest(rule=rule["message"]):
                self.assertEqual(_compat.refused(params), (tuple(rule.get("features", ())) + tuple(given[:1]), want))
                if kw is not None:
                    self.assertRefused(kw, want)
                for p in rule.get("unless", ()):
                    self.assertNotEqual(_compat.refusal({**params, p["param"]: p.get("value", "j")}), want)

    def test_the_companion_rules(self):
        """Each rule the gateway's parser kept of its own before, and this
        client copied by hand, now the table's: refused with its message
        as the gateway refuses it, and taken where it is met no more."""
        eos = "eos applies only with pack=concat: bestfit puts no token between documents"
        self.assertRefused(dict(dataset="t", seq=64, eos=2), eos)
        self.assertRefused(dict(dataset="t", seq=64, eos=2, pack="bestfit"), eos)
        brand.Job(dataset="t", seq=64, eos=2, pack="concat")
        self.assertRefused(dict(schedule_version="latest"),
                           "schedule= reads the schedule stored under the job's name: give job=NAME")
        brand.Job(schedule_version="latest", name="run")
        for name, kw in (("stride", dict(stride=2)), ("fps", dict(fps=5)), ("step", dict(step=3)),
                         ("clip_start", dict(clip_start="first"))):
            with self.subTest(param=name):
                self.assertRefused(dict(dataset="r", frames=[0, 1], **kw),
                                   f"{name} shapes a tree of videos' clips (clip=T); a LeRobot job's windows are "
                                   "delta_timestamps= or frames=")
                brand.Job(dataset="v", clip=8, **kw)
        self.assertEqual(_compat.refusal({"sampling": "importance"}),
                         "sampling=importance needs job=NAME, the name the job's feedback is sent under")
        self.assertIsNone(_compat.refusal({"sampling": "importance", "job": "j"}))
        # A vision job's packing, which the gateway refused only once its
        # batch was laid out.
        self.assertRefused(dict(dataset="pairs", seq=64, vision=VISION_QUERY["vision"], pack="concat"),
                           "a vision job packs whole samples best fit, never cut: pack=concat and eos= do not apply")

    def test_a_vision_mixture_balanced(self):
        """A mixture (or schedule) of a vision job balanced by cost: three
        features every two of which go together, refused by a rule of the
        table, before any request; the same mixture unbalanced, and a
        vision job of one dataset balanced, are taken."""
        msg = "balance= does not weigh a mixture of image-text and text sequences: its sequences take the plain cut"
        vis = VISION_QUERY["vision"]
        for source in (dict(mix="pairs:1,web:1"), dict(mix_schedule="0:pairs:1,web:1")):
            for balance in ("vision", "tokens", "attention"):
                with self.subTest(balance=balance, **source):
                    self.assertRefused(dict(seq=64, vision=vis, balance=balance, **source), msg)
            brand.Job(seq=64, vision=vis, **source)
        brand.Job(dataset="pairs", seq=64, vision=vis, balance="vision")
        with self.assertRaises(_compat.Refused) as cm:
            brand.Client(URL, seq=64, vision=vis, mix="pairs:1,web:1", balance="vision")
        self.assertEqual(cm.exception.what, ("mix", "vision", "balance-cost"))

    def test_refusals_the_old_client_missed(self):
        """Pairs the gateway's table refuses that this client's own copy of
        the rules took: importance sampling of a token job, and
        balance=bytes of a clip job."""
        self.assertRefused(dict(seq=64, importance=brand.Importance("j")), cell("importance", "tokens")["message"])
        self.assertRefused(dict(clip=8, balance="bytes"), cell("clips", "balance-bytes")["message"])

    def test_order(self):
        """Exclusive groups first, then companions, then the first refused
        pair in the table's order, as the gateway refuses."""
        exclusive = _compat.table()["exclusives"][0]["message"]
        self.assertRefused(dict(dataset="t", mix="web:1", pack="concat", clip=8, seq=64), exclusive)
        self.assertRefused(dict(pack="concat", clip=8, columns=("a",)), "pack applies only to a token job (seq=)")
        # tokens × clips comes before clips × columns in the table.
        self.assertRefused(dict(seq=64, clip=8, columns=("a",)), cell("tokens", "clips")["message"])

    def test_which_jobs_take_an_edit(self):
        """A stored edit (an exclusion list, an append record) is a resolved
        feature: a job takes one unless the table refuses it beside a
        feature the job's parameters name."""
        for kw, takes in [(dict(dataset="t"), True), (dict(balance="bytes", transform="imagenet-train"), True),
                          (dict(mix="web:1"), False), (dict(mix_schedule="0:web:1"), False), (dict(seq=64), False),
                          (dict(clip=8), False), (dict(importance=brand.Importance("j")), False)]:
            with self.subTest(**kw):
                q = job_query(brand.Job(**kw))
                self.assertEqual((_compat.admits(q, "exclusion"), _compat.admits(q, "append")), (takes, takes))

    def test_the_keywords_are_checked_alike(self):
        with self.assertRaises(ValueError) as cm:
            brand.Client(URL, seq=64, importance_job="j")
        self.assertEqual(str(cm.exception), refused(cell("importance", "tokens")["message"]))


class TestKeywords(unittest.TestCase):
    """The flat keywords of the first releases, each onto its field."""

    # Every keyword Client.__init__ took before brand.Options (but url, and
    # job=, now name=), a value (not the default), and where it lands.
    KEYWORDS = {
        "dataset": ("t", lambda o: o.job.dataset),
        "seed": (7, lambda o: o.job.seed),
        "batch_size": (64, lambda o: o.job.batch_size),
        "window": (4, lambda o: o.job.window),
        "world": (8, lambda o: o.job.world),
        "rank": (5, lambda o: o.job.rank),
        "drop_last": (True, lambda o: o.job.drop_last),
        "offset": (128, lambda o: o.job.offset),
        "locality": (False, lambda o: o.job.locality),
        "name": ("run", lambda o: o.job.name),
        "weight": (3.0, lambda o: o.job.weight),
        "importance_job": ("imp", lambda o: o.job.importance.name),
        "index": ("0123456789abcdef", lambda o: o.job.index),
        "mix": ("web:1", lambda o: o.job.mix),
        "mix_block": (16, lambda o: o.job.mix_block),
        "mix_samples": (100, lambda o: o.job.mix_samples),
        "ahead": (0, lambda o: o.ahead),
        "tune_malloc": (True, lambda o: o.tune_malloc),
        "max_retries": (1, lambda o: o.connection.max_retries),
        "backoff": (0.5, lambda o: o.connection.backoff),
        "max_backoff": (2.0, lambda o: o.connection.max_backoff),
        "timeout": (9.0, lambda o: o.connection.timeout),
        "probe_after": (None, lambda o: o.connection.probe_after),
        "token": ("tok", lambda o: o.connection.token),
        "ca_file": ("/ca.pem", lambda o: o.connection.ca_file),
        "peers": (["http://a:1"], lambda o: list(o.connection.peers)),
        "discover": (True, lambda o: o.connection.discover),
        "home_retry": (1.0, lambda o: o.connection.home_retry),
    }
    # Those that need another beside them.
    NEEDS = {"rank": dict(world=8), "mix_block": dict(mix="web:1"), "mix_samples": dict(mix="web:1"),
             "importance": dict(importance_job="imp"), "hot": dict(importance_job="imp")}

    def test_each_lands_on_its_field(self):
        for k, (v, where) in self.KEYWORDS.items():
            with self.subTest(keyword=k):
                self.assertEqual(where(resolve(None, {k: v, **self.NEEDS.get(k, {})}, "Client")), v)
        o = resolve(None, dict(importance_job="imp", importance="v1", hot=2), "Client")
        self.assertEqual(o.job.importance, brand.Importance("imp", "v1", 2))

    def test_same_as_the_typed_form(self):
        kw = dict(dataset="t", batch_size=64, seed=7, world=4, rank=2, name="run", weight=2, importance_job="run",
                  hot=1, token="tok", peers="http://a:1,http://b:1", ahead=3)
        typed = brand.Options(
            job=brand.Job(dataset="t", batch_size=64, seed=7, world=4, rank=2, name="run", weight=2,
                          importance=brand.Importance("run", hot=1)),
            connection=brand.Connection(token="tok", peers=["http://a:1", "http://b:1"]),
            ahead=3,
        )
        self.assertEqual(resolve(None, kw, "Client"), typed)
        self.assertEqual(brand.Client(URL, **kw).options, brand.Client(URL, typed).options)

    def test_job_for_the_name_is_deprecated(self):
        """job= means the brand.Job (Options.job); the first releases' job=
        for the name still works, as name=, and warns at the caller."""
        with self.assertWarnsRegex(DeprecationWarning, r"job=.*deprecated.*name=") as w:
            c = brand.Client(URL, job="run", seed=7)
        self.assertEqual(w.filename, os.path.abspath(__file__))
        self.assertEqual(c.options, brand.Client(URL, name="run", seed=7).options)
        c.close()
        with self.assertRaisesRegex(TypeError, "name= and job="):
            brand.Client(URL, job="a", name="b")
        with self.assertRaisesRegex(TypeError, r"options=brand.Options\(job=...\)"):
            brand.Client(URL, job=brand.Job(seed=7))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            brand.Client(URL, name="run").close()  # the name's own keyword: no warning

    def test_importance_names_the_job_by_name(self):
        """brand.Importance's job name is name, as brand.Job's; job= and
        .job, the first releases' spellings, still work and warn."""
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            imp = brand.Importance(name="run", hot=2)
            self.assertEqual(imp, brand.Importance("run", None, 2))
            self.assertEqual(imp.name, "run")
            self.assertEqual(dataclasses.replace(imp, version="v1"), brand.Importance("run", "v1", 2))
        with self.assertWarnsRegex(DeprecationWarning, r"Importance\(job=\.\.\.\) is deprecated.*name=") as w:
            self.assertEqual(brand.Importance(job="run", hot=2), imp)
        self.assertEqual(w.filename, os.path.abspath(__file__))
        with self.assertWarnsRegex(DeprecationWarning, r"Importance\.job is deprecated.*Importance\.name") as w:
            self.assertEqual(imp.job, "run")
        self.assertEqual(w.filename, os.path.abspath(__file__))
        with self.assertRaisesRegex(TypeError, "both name= and job="):
            brand.Importance(name="a", job="b")
        with self.assertRaisesRegex(TypeError, "both a name and job="):
            brand.Importance("a", job="b")
        with self.assertRaisesRegex(ValueError, "job name"):
            brand.Importance(name="a b")

    def test_malloc_tuning_is_opt_in(self):
        """Making a client leaves the process's malloc alone unless asked."""
        self.assertFalse(brand.Options().tune_malloc)
        with mock.patch("brand.client.tune_malloc") as tune:
            brand.Client(URL).close()
            brand.Client(URL, brand.Options(job=brand.Job(seed=7))).close()
            tune.assert_not_called()
            brand.Client(URL, tune_malloc=True).close()
            tune.assert_called_once_with()

    def test_applied_over_options(self):
        base = brand.Options(job=brand.Job(batch_size=64, seed=7, world=4, importance=brand.Importance("imp")),
                             connection=brand.Connection(timeout=5))
        o = resolve(base, dict(rank=3, importance="v2", max_retries=1), "Client")
        self.assertEqual((o.job.batch_size, o.job.seed, o.job.world, o.job.rank), (64, 7, 4, 3))
        self.assertEqual(o.job.importance, brand.Importance("imp", "v2"))
        self.assertEqual((o.connection.timeout, o.connection.max_retries), (5, 1))

    def test_mistakes(self):
        with self.assertRaisesRegex(TypeError, "batchsize.*did you mean 'batch_size'"):
            brand.Client(URL, batchsize=64)
        with self.assertRaisesRegex(TypeError, "brand.Options"):
            brand.Client(URL, "imagenet")  # the first releases' positional dataset
        with self.assertRaisesRegex(ValueError, "importance_job"):
            brand.Client(URL, hot=1)
        with self.assertRaisesRegex(ValueError, "out of range"):
            brand.Client(URL, rank=1)  # a client's world is 1 unless given

    def test_client_fills_in_one_reader(self):
        with brand.Client(URL, brand.Options(job=brand.Job(batch_size=8))) as c:
            self.assertEqual((c.options.job.world, c.options.job.rank), (1, 0))
            self.assertEqual((c.params()["world"], c.params()["rank"]), ("1", "0"))


class TestWire(unittest.TestCase):
    """What a client sends over a real gateway, read where it arrives."""

    def test_only_listed_parameters_are_sent(self):
        gw = gateway()
        fc = Cluster(gw.url, 1)
        self.addCleanup(fc.close)
        job = dataclasses.replace(ONE, world=2, rank=1, offset=4, index=None,
                                  importance=brand.Importance("run-1", hot=1), transform=None)
        with brand.Client("", brand.Options(job=job, connection=brand.Connection(peers=fc.urls))) as c:
            n = sum(len(b) for b in c.epoch(0))
        self.assertGreater(n, 0)
        sent = set()
        for _, path in fc.requests():
            u = urllib.parse.urlsplit(path)
            if u.path.startswith("/epoch/"):
                sent |= set(urllib.parse.parse_qs(u.query))
        # All but a mixture's or a schedule's, a snapshot version (an
        # importance job's first epoch has none), a pipeline (the test
        # dataset's images are not real JPEGs) and fields (it is tar chunks,
        # whose samples are served whole), nor a token job's (the test
        # dataset is no token dataset), nor a clip job's (nor a video
        # dataset), nor a run job's; index= is the version the plan named.
        self.assertEqual(sent, golden() - {"mix", "mix_block", "mix_samples", "mix_schedule", "schedule",
                                           "importance", "transform", "columns", "seq", "pack", "pad", "eos", "vision",
                                           "clip", "stride", "fps", "step", "clip_start", "clip_layout",
                                           "gop_window", "delta_timestamps", "frames", "balance", "buckets", "budget",
                                           "budget_tokens", "vae", "patch", "vae_t", "max_upscale", "small", "crop", "flip",
                                           "resume", "run"})


if __name__ == "__main__":
    unittest.main()


class TestRuns(unittest.TestCase):
    def test_runs_refused_in_the_tables_words(self):
        # A run job's pairs are the table's row (compat.json): a mixture
        # of runs is refused with the gateway's own message.
        with self.assertRaisesRegex(ValueError, "a run job reads one dataset's runs, not a mixture"):
            brand.Job(mix="web:1,code:1", run=4)
        for bad in (1, 4097, True, "8"):
            with self.assertRaises(ValueError):
                brand.Job(run=bad)
        self.assertEqual(job_query(RUNS)["run"], "16")
