"""Task streams: prompts leased to generators, their rewards fed back, and
the steps the trainer reads (docs/tasks.md).

Post-training reads its prompts differently from pre-training: generators
take prompts steps ahead of the trainer, answer each ``N`` times, score the
answers, and which prompts count toward a step depends on those scores.
The gateway holds that sampler as a **task job**, one exact account of
every prompt kept as a log in the dataset's store; this module is its
client:

* :class:`TaskJob` makes the job (:meth:`TaskJob.make`: its step size
  and policy) and reads it back (:meth:`TaskJob.plan`,
  :meth:`TaskJob.replay`);
* a :class:`Generator` (one per generating process, by name) leases
  prompts (:meth:`Generator.lease`), reads their bytes
  (:meth:`Generator.samples`) and answers them (:meth:`Generator.answer`);
* the :class:`Trainer` iterates over the job's full steps, in order, and
  tells the gateway which it has consumed, so that the generators may run
  ahead of it by the job's ``ahead`` steps and no more.

A generator's loop and the trainer's::

    from brand import tasks

    job = tasks.TaskJob("http://brand:8080", "rl", dataset="prompts")
    job.make(step=64, policy="curriculum", redraws=2, retire=3)

    gen = job.generator("gen-0")                      # in each generator
    while True:
        try:
            lease = gen.lease(16, wait=60)
        except tasks.TasksDone:
            break
        texts = gen.samples(lease)                    # p.name -> {ext: bytes}
        results = [tasks.Result(p.key, scores=score(texts[p.name]["txt"]), version=model_step)
                   for p in lease.prompts]
        gen.answer(lease, results)

    trainer = job.trainer()                           # in the trainer
    trainer.load_state_dict(checkpoint["tasks"])      # when resuming
    for step in trainer:
        train(step.prompts)                           # each with its scores
        checkpoint["tasks"] = trainer.state_dict()

A job of **domains** reads several prompt datasets, each at a ratio of
every step (docs/tasks.md, *Domains*): ``make(..., domains={"math": 0.5,
"code": 0.3, "chat": 0.2})``, its log kept in ``dataset``. Its prompts
name their dataset (:attr:`Prompt.dataset`), keys may repeat across
datasets, and :meth:`Generator.samples` keys a job of domains' samples by
:attr:`Prompt.name` (``DATASET/KEY``) so that they do not collide. A run
is edited while it goes (docs/tasks.md, *Edits*): prompts excluded at
once (:meth:`TaskJob.exclude`), appended to a domain's next pass
(:meth:`TaskJob.append`), the ratios changed from a step not yet full
(:meth:`TaskJob.edit_ratios`, refused with :class:`StepFull`).

A lease is not idempotent (asked twice, it leases twice), so it is never
retried blindly: a lease whose answer was lost in transport is looked for
among the generator's open leases (:meth:`Generator.open_leases`, which a
restarted generator reads too) before the error is raised. Every other
request is: reading changes nothing, a repeated answer of a prompt changes
nothing (the first wins), and the trainer's step only ever moves forward.

Standard library only.
"""

from __future__ import annotations

import json
import math
import random
import secrets
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Type, Union

from ._http import BrandError, Session
from ._options import Connection
from ._route import Router, parse_node
from ._tar import decode_tar

__all__ = [
    "Generator",
    "Lease",
    "LeaseExpired",
    "Prompt",
    "Result",
    "Step",
    "StepFull",
    "StepTimeout",
    "TaskJob",
    "TaskRefused",
    "Trainer",
    "TasksDone",
]

#: How often a wait for prompts or a step asks again, in seconds: from
#: MIN_POLL, doubling to MAX_POLL, or the gateway's ``Retry-After`` kept
#: between the two. A window frees a step's prompts the moment the trainer
#: moves, and a step fills with the answer that completes it, so waiting a
#: whole ``Retry-After`` second would idle a generator or the trainer for
#: nothing; polling faster than 20 times a second would only load the node.
MIN_POLL = 0.05
MAX_POLL = 0.5
#: A lease that gets no answer (a connection a restarted gateway closed) is
#: sent again, with its request ID, ``LEASE_TRIES`` times in all, after
#: ``LEASE_PAUSE`` seconds, doubling: 1.5 s for a gateway restarting.
LEASE_TRIES = 5
LEASE_PAUSE = 0.1
#: How often a trainer waiting for a step asks the plan whether the run is
#: over (every prompt retired, so that no step fills again), in seconds.
DONE_EVERY = 2.0


class TaskRefused(BrandError):
    """A request of a task job the gateway refused (4xx): a job made again
    with another spec (409), a spec it cannot take (400, 422; the message
    says which field), feedback it cannot take (422: a key not in the
    lease, a score out of ``[0, 1]``, ``passes > n``), an edit it cannot
    take (422: a key that is no prompt of the job, an index that does not
    extend the domain's; 400: no domain named for a job of domains)."""

    @classmethod
    def of(cls, e: BrandError) -> "TaskRefused":
        """``e`` as this type, its fields kept (a ratio edit's
        ``first_editable_step``)."""
        err = cls(e.message, e.status, e.retry_after, e.members, e.schedule_version, e.first_editable_step,
                  e.exclusion_version, e.edit_version)
        err.args = e.args
        return err


class StepFull(TaskRefused):
    """A ratio edit from a step already full (409): the steps before
    :attr:`first_editable_step` keep their prompts. It is the first step
    not full when the edit was refused; generators may have filled it
    since, so an edit from a step ahead of it is the one that holds."""


class LeaseExpired(TaskRefused):
    """Feedback for a lease past its deadline, or one this job never made
    (409; the message names the deadline). Nothing of it was applied: the
    lease's unanswered prompts go to the front of the plan, to be leased
    again."""


class TasksDone(BrandError):
    """Every prompt of the task job is retired, and none is revisited
    (``revisit`` 0): there is nothing left to lease, now or later. The
    gateway answers a lease 404 then, which the plan (every prompt
    retired) tells from a job that does not exist."""


class StepTimeout(BrandError, TimeoutError):
    """The trainer waited its whole ``wait`` and the step was still not
    full: the generators are gone or stalled (the message has the gateway's
    count so far)."""


class Prompt(NamedTuple):
    """A prompt of a lease: its sample key, its ID (the job's: a job of
    domains numbers its domains' prompts one after another), the pass it
    was drawn in (``pass`` in the JSON: a keyword here) and, for a job of
    domains, its domain's dataset (``""`` for a job of one dataset)."""

    key: str
    id: int
    pass_: int
    dataset: str = ""

    @property
    def name(self) -> str:
        """What tells the prompt apart within its job: ``DATASET/KEY`` for
        a job of domains (two datasets may hold a key), else its key. The
        key of :meth:`Generator.samples`'s answer, as the replay names a
        prompt."""
        return f"{self.dataset}/{self.key}" if self.dataset else self.key


@dataclass(frozen=True)
class Lease:
    """Prompts leased to a generator (``POST /tasks/{job}/leases``).

    Attributes:
        id: the lease's ID, which its feedback names.
        generator: the generator it was leased to.
        step: the step its prompts are drawn for (they may count toward a
            later one: steps fill in the order answers are applied).
        expires: its deadline (RFC 3339, the gateway's clock); an answer
            after it is refused (:class:`LeaseExpired`).
        prompts: in the lease's order, which :meth:`Generator.samples`
            keeps.
        request: the ID the lease was asked with (``""`` if none): a
            generator whose ask got no answer finds the lease it made by
            it among its open leases.
    """

    id: str
    generator: str
    step: int
    expires: str
    prompts: List[Prompt] = field(default_factory=list)
    request: str = ""

    @property
    def keys(self) -> List[str]:
        return [p.key for p in self.prompts]

    @property
    def names(self) -> List[str]:
        """The prompts' :attr:`Prompt.name`, in order: the keys of
        :meth:`Generator.samples`'s answer."""
        return [p.name for p in self.prompts]


@dataclass(frozen=True)
class Result:
    """One prompt's answer (docs/tasks.md, *Feedback*): its group's
    ``scores`` (each in ``[0, 1]``; at ``pass_score`` or over passes), or
    ``passes`` of ``n``; the ``version`` of the policy (the model's step)
    that answered it; ``counts`` to override the policy's verdict (``None``:
    the policy judges). ``dataset`` names the prompt's domain, needed only
    where two prompts of a lease share the key; :meth:`Generator.answer`
    names it from the lease when the results answer each of them."""

    key: str
    scores: Optional[Sequence[float]] = None
    passes: Optional[int] = None
    n: Optional[int] = None
    version: int = 0
    counts: Optional[bool] = None
    dataset: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        if (self.scores is None) == (self.passes is None):
            raise ValueError(f"brand: result for {self.key!r}: give scores or passes (with n), one of the two")
        d: Dict[str, Any] = {"key": self.key}
        if self.dataset:
            d["dataset"] = self.dataset
        if self.scores is not None:
            d["scores"] = [float(s) for s in self.scores]
            if not all(math.isfinite(s) for s in d["scores"]):
                # JSON has no NaN: the gateway would refuse the whole body
                # as unreadable, without naming the prompt.
                raise ValueError(f"brand: result for {self.key!r}: a score that is not a number: {self.scores!r}")
        else:
            if self.n is None:
                raise ValueError(f"brand: result for {self.key!r}: passes without n")
            d["passes"], d["n"] = int(self.passes), int(self.n)  # type: ignore[arg-type]
        d["version"] = int(self.version)
        if self.counts is not None:
            d["counts"] = bool(self.counts)
        return d


class Step(NamedTuple):
    """A full step: its number and its ``B`` counted prompts, as the
    gateway gives them (dicts with ``key``, ``id``, ``lease``, ``pass``,
    ``version`` and ``scores``, or ``passes`` and ``n``; and, for a job of
    domains, ``dataset``: ``p.get("dataset", "")`` reads either kind)."""

    step: int
    prompts: List[Dict[str, Any]]


def _lease(doc: Mapping[str, Any]) -> Lease:
    return Lease(
        id=str(doc["lease"]), generator=str(doc.get("generator", "")), step=int(doc.get("step", 0)),
        expires=str(doc.get("expires", "")),
        prompts=[Prompt(str(p["key"]), int(p.get("id", -1)), int(p.get("pass", 0)), str(p.get("dataset") or ""))
                 for p in doc.get("prompts") or ()],
        request=str(doc.get("request") or ""),
    )


def _result(r: Union[Result, Mapping[str, Any]]) -> Dict[str, Any]:
    if isinstance(r, Result):
        return r.to_json()
    if isinstance(r, Mapping) and "key" in r:
        return dict(r)
    raise TypeError(f"brand: a result is a tasks.Result or a dict with a key, not {type(r).__name__}")


def _named(prompts: Sequence[Prompt], body: List[Dict[str, Any]]) -> None:
    """Names the dataset of ``body``'s results (in place) whose key two or
    more of ``prompts`` share and which name none: the prompts no result
    names, in the lease's order, when the results answer each of them.
    Else the pairing is a guess, one that could answer a prompt twice and
    another never, so it is refused."""
    of: Dict[str, List[str]] = {}
    for p in prompts:
        of.setdefault(p.key, []).append(p.dataset)
    for key, datasets in of.items():
        if len(datasets) < 2:
            continue
        unnamed = [r for r in body if r["key"] == key and not r.get("dataset")]
        if not unnamed:
            continue
        named = {r["dataset"] for r in body if r["key"] == key and r.get("dataset")}
        left = [d for d in datasets if d not in named]
        if len(unnamed) != len(left):
            raise ValueError(f"brand: key {key!r} is of {len(datasets)} prompts of the lease, of datasets {datasets}: "
                             f"{len(unnamed)} results name no dataset for {len(left)} prompts; name each its dataset")
        for r, d in zip(unnamed, left):
            r["dataset"] = d


def _domains(domains: Any) -> List[Dict[str, Any]]:
    """``domains`` as ``PUT /tasks/{job}`` takes them, in their order:
    refused here what needs no gateway to refuse (a name twice, a ratio
    not above 0), so that a typo costs no request."""
    if isinstance(domains, Mapping):
        pairs = list(domains.items())
    elif isinstance(domains, (str, bytes)) or not isinstance(domains, Sequence):
        raise TypeError(f"brand: domains {domains!r}: a mapping of dataset to ratio, or a list of (dataset, ratio) "
                        "or of {\"dataset\": D, \"ratio\": R}")
    else:
        pairs = []
        for d in domains:
            if isinstance(d, Mapping):
                if set(d) - {"dataset", "ratio"} or "dataset" not in d or "ratio" not in d:
                    raise ValueError(f"brand: domain {dict(d)!r}: a dataset and a ratio, no more")
                pairs.append((d["dataset"], d["ratio"]))
            elif isinstance(d, Sequence) and not isinstance(d, (str, bytes)) and len(d) == 2:
                pairs.append((d[0], d[1]))
            else:
                raise TypeError(f"brand: domain {d!r}: (dataset, ratio) or {{\"dataset\": D, \"ratio\": R}}")
    if not pairs:
        raise ValueError("brand: domains: none given (leave domains out for a job of one dataset)")
    out: List[Dict[str, Any]] = []
    for name, ratio in pairs:
        if not isinstance(name, str) or not name:
            raise ValueError(f"brand: domain {name!r}: a dataset's name")
        if any(d["dataset"] == name for d in out):
            raise ValueError(f"brand: dataset {name!r} is two domains of the job")
        out.append({"dataset": name, "ratio": _ratio(name, ratio, zero=False)})
    return out


def _ratio(name: str, ratio: Any, zero: bool) -> float:
    """``ratio`` of domain ``name`` as sent: a finite number above 0 (or
    0 too, where ``zero``: a ratio edit may leave a domain out)."""
    ok = isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and math.isfinite(ratio)
    if not ok or ratio < 0 or (ratio == 0 and not zero):
        raise ValueError(f"brand: domain {name!r}: ratio {ratio!r}: a number " + ("0 or more" if zero else "more than 0"))
    return float(ratio)


def _ttl(v: Any) -> Any:
    """A lease's ttl as the gateway reads it: a Go duration; a number is
    seconds."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{int(round(v * 1000))}ms"
    return v


def _all_retired(plan: Mapping[str, Any]) -> bool:
    """Whether ``plan`` (``GET /tasks/{job}``) has retired every prompt for
    good: none may be revisited."""
    spec = plan.get("spec") or {}
    return (int(plan.get("prompts", 0)) > 0 and int(plan.get("retired", 0)) >= int(plan["prompts"])
            and not spec.get("revisit"))


def _pause(waits: int, retry_after: Optional[float]) -> float:
    """Seconds before asking again after ``waits`` waits: the gateway's
    ``Retry-After`` kept within [MIN_POLL, MAX_POLL], else MIN_POLL doubled
    per wait up to MAX_POLL, jittered so that generators started together
    spread out."""
    if retry_after is not None:
        return min(max(retry_after, MIN_POLL), MAX_POLL)
    d = min(MIN_POLL * (2 ** min(waits, 8)), MAX_POLL)
    return max(MIN_POLL, d * (0.75 + 0.25 * random.random()))


class TaskJob:
    """A task job on a gateway, by name (``PUT``/``GET /tasks/{job}``), and
    the generators and trainer that read it.

    Args:
        url: the gateway's base URL.
        job: the job's name.
        dataset: the dataset of its prompts, when the gateway serves several.
        token: a bearer token (writing needs one that may edit jobs).
        timeout: socket timeout of each request, in seconds.
        max_retries: retries of a request that may be repeated (everything
            but a lease) after a refused connection, a timeout or a
            502/503/504.
    """

    def __init__(self, url: str, job: str, dataset: Optional[str] = None, token: Optional[str] = None,
                 timeout: float = 30.0, max_retries: int = 5) -> None:
        if not isinstance(job, str) or not job:
            raise ValueError(f"brand: task job {job!r}: a name")
        self.url = url
        self.job = job
        self.dataset = dataset
        self._router = Router([parse_node(url)], 0, 0.0)
        self._session = Session(Connection(timeout=timeout, max_retries=max_retries, token=token))
        # Leases, and polls that answer 503 themselves: one attempt each,
        # the waiting done here (_pause), not by the session's backoff.
        self._once = Session(Connection(timeout=timeout, max_retries=0, token=token))

    def close(self) -> None:
        self._session.close()
        self._once.close()

    def __enter__(self) -> "TaskJob":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TaskJob({self.url!r}, {self.job!r}, dataset={self.dataset!r})"

    # -- requests ---------------------------------------------------------

    def _path(self, *parts: str) -> str:
        return "/".join(["/tasks", urllib.parse.quote(self.job, safe="")] +
                        [urllib.parse.quote(p, safe="") for p in parts])

    def _params(self, **more: str) -> Dict[str, str]:
        p = {"dataset": self.dataset} if self.dataset else {}
        p.update(more)
        return p

    def _send(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None, once: bool = False,
              params: Optional[Mapping[str, str]] = None) -> Any:
        """The answer to ``method path`` (``body`` sent as JSON): its body's
        bytes. ``once``: a single attempt (a lease, a poll)."""
        data = None if body is None else json.dumps(body, allow_nan=False).encode()
        s = self._once if once else self._session
        a = s.send(self._router, method, path, params if params is not None else self._params(), data,
                   None if data is None else "application/json")
        return a.body

    def _json(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None, once: bool = False,
              params: Optional[Mapping[str, str]] = None) -> Any:
        raw = self._send(method, path, body, once, params)
        try:
            return json.loads(raw)
        except ValueError:
            raise BrandError(f"brand: {method} {path}: the gateway's answer is not JSON: {bytes(raw[:200])!r}") \
                from None

    # -- the job ----------------------------------------------------------

    def make(self, step: int, seed: int = 0, policy: str = "uniform", *, domains: Any = None,
             domain_passes: Optional[str] = None, **spec: Any) -> Dict[str, Any]:
        """Make the job (``PUT /tasks/{job}``): steps of ``step`` prompts,
        drawn with ``seed`` under ``policy`` (``uniform``, ``curriculum``,
        ``importance``). ``spec`` holds the rest of docs/tasks.md's fields
        (``ahead``, ``ttl`` (a Go duration, or seconds), ``redraws``,
        ``pass_score``, ``flat`` (``"scores"``, or DAPO's ``"passes"``), ``history``, ``band``, ``temperature``, ``retire``,
        ``revisit``, ``max_lease``). Making it again with the same spec is a
        no-op, so every process of a run may call this; returns the plan.

        ``domains`` makes a job of domains (docs/tasks.md, *Domains*): its
        prompt datasets in order, each with its ratio of every step, as a
        mapping ``{dataset: ratio}``, or a list of ``(dataset, ratio)`` or
        of ``{"dataset": D, "ratio": R}``; the log is kept in this
        object's ``dataset``. ``domain_passes``: ``"own"`` (the gateway's
        default: a domain whose pass runs out starts its next) or
        ``"shared"`` (the job's pass ends).

        Raises:
            ValueError: ``domains`` names a dataset twice, or a ratio that
                is not a number above 0 (nothing is sent).
            TaskRefused: the job exists with another spec (409), or the
                spec is not one the gateway can take (4xx, its message
                says why).
        """
        if not isinstance(step, int) or isinstance(step, bool) or step < 1:
            raise ValueError(f"brand: step {step!r}: the prompts of a step (a whole number, 1 or more)")
        body: Dict[str, Any] = {"step": step, "seed": seed, "policy": policy}
        for k, v in spec.items():
            body[k] = _ttl(v) if k == "ttl" else list(v) if k == "band" else v
        if domains is not None:
            body["domains"] = _domains(domains)
        if domain_passes is not None:
            body["domain_passes"] = domain_passes
        return self._refused("PUT", self._path(), body)

    def _refused(self, method: str, path: str, body: Mapping[str, Any], full: Type[TaskRefused] = TaskRefused) -> Any:
        """The JSON answer to a request that makes or edits the job; its
        4xx as ``TaskRefused`` (a 409 as ``full``)."""
        try:
            return self._json(method, path, body)
        except BrandError as e:
            if e.status is not None and 400 <= e.status < 500:
                raise (full if e.status == 409 else TaskRefused).of(e) from None
            raise

    # -- edits (docs/tasks.md, *Edits*) -----------------------------------

    def exclude(self, keys: Sequence[str], dataset: Optional[str] = None) -> Dict[str, Any]:
        """Take the prompts ``keys`` out of the job at once (``POST
        /tasks/{job}/exclude``): none is leased after it, in any pass. A
        prompt a lease holds now is answered but never counted (the
        feedback's ``excluded``). ``dataset`` names the domain of a job of
        domains (a key is a dataset's). Returns what it did: ``excluded``
        (those not excluded before), ``prompts``, ``excluded_total``.

        Raises:
            TaskRefused: a key that is no prompt of the job (422), no
                ``dataset`` for a job of domains (400).
        """
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
            raise TypeError(f"brand: keys {keys!r}: a list of the prompts' keys")
        if not keys:
            raise ValueError("brand: keys: an exclusion names 1 key or more")
        body: Dict[str, Any] = {"keys": [str(k) for k in keys]}
        if dataset:
            body["dataset"] = dataset
        return self._refused("POST", self._path("exclude"), body)

    def append(self, index: str, dataset: Optional[str] = None) -> Dict[str, Any]:
        """Take the new prompts of ``index``, an index version extending the
        domain's (the one ``brand index --append`` printed), into the
        domain's next pass (``POST /tasks/{job}/append``): a pass under
        way keeps its prompts. ``dataset`` names the domain of a job of
        domains. Returns what it did: ``appended``, ``prompts``.

        Raises:
            TaskRefused: an index that does not extend the domain's (422).
        """
        if not isinstance(index, str) or not index:
            raise ValueError(f"brand: index {index!r}: the index version brand index --append printed")
        body: Dict[str, Any] = {"index": index}
        if dataset:
            body["dataset"] = dataset
        return self._refused("POST", self._path("append"), body)

    def edit_ratios(self, from_step: int, ratios: Mapping[str, float]) -> Dict[str, Any]:
        """A job of domains' ratios from step ``from_step`` on (``POST
        /tasks/{job}/ratios``): every domain named, 0 for none. The steps
        before keep their prompts. Returns what it did: ``from_step``.

        Raises:
            StepFull: ``from_step`` is full (409);
                :attr:`~StepFull.first_editable_step` is the first that
                was not.
            TaskRefused: ratios the gateway cannot take (400: a domain
                left out or not the job's, a job of one dataset).
        """
        if not isinstance(from_step, int) or isinstance(from_step, bool) or from_step < 0:
            raise ValueError(f"brand: from_step {from_step!r}: a step (a whole number, 0 or more)")
        if not isinstance(ratios, Mapping) or not ratios:
            raise TypeError(f"brand: ratios {ratios!r}: a mapping of every domain's dataset to its ratio")
        body = {"from_step": from_step, "ratios": {str(k): _ratio(k, v, zero=True) for k, v in ratios.items()}}
        return self._refused("POST", self._path("ratios"), body, full=StepFull)

    def plan(self) -> Dict[str, Any]:
        """The job's plan as the answering node holds it (``GET
        /tasks/{job}``): its counts of prompts pending, leased, counted,
        retired, excluded, in the band, its steps and the trainer's; for a
        job of domains, ``domains`` (each one's ``dataset``, ``index``,
        ``prompts``, ``pass``, ``counted``) and ``ratios`` (``from_step``
        and the ratios by dataset, a phase each edit)."""
        return self._json("GET", self._path())

    def replay(self) -> List[Dict[str, Any]]:
        """The run replayed from the log by the answering node (``GET
        /tasks/{job}/replay``): one dict a decision (a lease, a full step),
        then ``{"digest": ..., "equal": ...}``, ``equal`` saying whether
        the node's live plan decided the same."""
        raw = bytes(self._send("GET", self._path("replay")))
        return [json.loads(line) for line in raw.splitlines() if line.strip()]

    def _done(self, e: BrandError) -> bool:
        """Whether ``e``, a lease's or a step's refusal, says every prompt
        is retired: a 404 the plan confirms (every prompt retired,
        ``revisit`` 0), since a 404 also answers a job that does not
        exist; or a 410, which the first drafts of docs/tasks.md named."""
        if e.status == 410:
            return True
        if e.status != 404:
            return False
        try:
            plan = self.plan()
        except BrandError:
            return False
        return _all_retired(plan)

    def generator(self, name: str) -> "Generator":
        """The generator ``name``: one a generating process, the same name
        again after a restart (its open leases are under it)."""
        return Generator(self, name)

    def trainer(self, wait: float = 600.0) -> "Trainer":
        """The job's trainer (one per job), waiting up to ``wait`` seconds
        for a step to fill."""
        return Trainer(self, wait)


class Generator:
    """One generator of a task job: leases prompts, reads their bytes,
    answers them. Safe to share between threads (each request goes on the
    thread's own connection), though a generator is usually one loop."""

    def __init__(self, job: TaskJob, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"brand: generator {name!r}: a name")
        self.job = job
        self.name = name
        # The leases this object has handed out and not answered whole:
        # the open leases a lost lease's answer is not among.
        self._seen: set = set()

    def __repr__(self) -> str:
        return f"Generator({self.job.job!r}, {self.name!r})"

    def lease(self, k: int, wait: Optional[float] = None) -> Optional[Lease]:
        """Lease up to ``k`` prompts (``POST /tasks/{job}/leases``). They may
        be fewer: the window and the pass's end bound a lease.

        The gateway answers 503 when it has nothing to lease now (the
        generators are ``ahead`` steps ahead of the trainer, or every
        prompt is leased): without ``wait`` that is ``None``; with it, the
        lease is asked again (every :data:`MIN_POLL` to :data:`MAX_POLL`
        seconds, the gateway's ``Retry-After`` kept within them) until it
        holds prompts or ``wait`` seconds have passed (then ``None``).

        Raises:
            TasksDone: every prompt is retired for good (a 404 that the
                plan confirms).
            BrandConnectionError: no answer to :data:`LEASE_TRIES` asks
                (each with the same request ID, which the gateway answers
                with the lease the first made), and no open lease of this
                generator that this object has not handed out already.
        """
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"brand: k {k!r}: the prompts to lease (a whole number, 1 or more)")
        deadline = None if wait is None else time.monotonic() + wait
        waits = 0
        # The ask's ID: sent again (no answer came back) the gateway
        # answers the lease it made, never a second one.
        ask = {"generator": self.name, "prompts": k, "request": secrets.token_hex(16)}
        unanswered = 0
        while True:
            retry_after: Optional[float] = None
            try:
                doc = self.job._json("POST", self.job._path("leases"), ask, once=True)
            except BrandError as e:
                if self.job._done(e):
                    raise TasksDone(e.message, e.status) from None
                if e.status is None:
                    # No answer: a connection a restarted gateway closed,
                    # a reset. The same ask again, LEASE_TRIES in all.
                    unanswered += 1
                    if unanswered < LEASE_TRIES:
                        time.sleep(LEASE_PAUSE * 2 ** (unanswered - 1))
                        continue
                    lost = self._lost(ask["request"])
                    if lost is not None:
                        return lost
                    raise
                if e.status != 503:
                    raise
                retry_after = e.retry_after
            else:
                got = _lease(doc)
                self._seen.add(got.id)
                if got.prompts:
                    return got
            if deadline is None:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(_pause(waits, retry_after), left))
            waits += 1

    def _lost(self, request: str) -> Optional[Lease]:
        """After a lease that got no answer: the open lease that ask made,
        if it reached the gateway — the one naming its ``request`` ID (a
        gateway that names none: the generator's open lease this object
        has not handed out)."""
        try:
            open_ = self.open_leases()
        except BrandError:
            return None
        for got in open_:
            if got.request:
                if got.request == request and got.prompts:
                    self._seen.add(got.id)
                    return got
            elif got.id not in self._seen and got.prompts:
                self._seen.add(got.id)
                return got
        return None

    def samples(self, lease: Union[Lease, str]) -> Dict[str, Dict[str, bytes]]:
        """The bytes of the lease's prompts not yet answered (``GET
        /tasks/{job}/leases/{lease}/samples``): :attr:`Prompt.name` ->
        {ext: bytes}, in the lease's order, as ``GET /samples/KEY`` serves
        each. The name is the key for a job of one dataset, and
        ``DATASET/KEY`` for a job of domains, whose datasets may share a
        key (``texts[p.name]`` reads either).

        The tar names no dataset: a job of domains' samples are paired
        with the lease's prompts in order. Given a lease's ID, or a
        :class:`Lease` some of whose prompts were answered since, the
        prompts are this generator's open lease's
        (:meth:`open_leases`); a lease it does not hold is read as a job
        of one dataset's.

        Raises:
            BrandError: a job of domains' samples that do not pair with
                the lease's prompts (answered while they were read).
        """
        lid = lease.id if isinstance(lease, Lease) else lease
        raw = self.job._send("GET", self.job._path("leases", lid, "samples"))
        # split_repeats: two datasets' samples of one key, side by side,
        # stay two.
        got = decode_tar(raw, split_repeats=True)
        prompts = lease.prompts if isinstance(lease, Lease) else None
        if prompts is None or (len(prompts) != len(got) and any(p.dataset for p in prompts)):
            prompts = next((x.prompts for x in self.open_leases() if x.id == lid), None)
        if prompts is None or not any(p.dataset for p in prompts):
            out: Dict[str, Dict[str, bytes]] = {}
            for s in got:
                key = s.pop("__key__")
                out.setdefault(key, {}).update(s)
            return out
        if [p.key for p in prompts] != [s["__key__"] for s in got]:
            raise BrandError(f"brand: lease {lid}'s {len(got)} samples do not pair with its {len(prompts)} prompts "
                             "not yet answered: read them again")
        return {p.name: {k: v for k, v in s.items() if k != "__key__"} for p, s in zip(prompts, got)}

    def answer(self, lease: Union[Lease, str], results: Sequence[Union[Result, Mapping[str, Any]]]) -> Dict[str, Any]:
        """Answer prompts of ``lease`` (``POST
        /tasks/{job}/leases/{lease}/feedback``): :class:`Result` or dicts
        of docs/tasks.md's fields. A prompt's first answer wins; a repeat
        changes nothing (``repeats`` in the answer), so a lost answer is
        sent again safely. Returns the gateway's answer: ``applied``,
        ``counted``, ``redrawn``, ``rested``, ``retired``, ``repeats``,
        ``excluded`` (answers to prompts excluded since the lease: taken,
        never counted), ``steps`` (those the counted prompts fell in).

        Given a :class:`Lease` of a job of domains, results that name no
        dataset for a key two of its prompts share are given the datasets
        of those prompts no result names, in the lease's order, when they
        answer each of them: a generator answering ``lease.prompts`` in
        order may answer by key alone.

        Raises:
            ValueError: results by key alone for some, not all, of a
                lease's prompts of one key (name each its dataset).
            LeaseExpired: the lease is past its deadline, or not this
                job's (409); nothing was applied.
            TaskRefused: feedback the gateway cannot take (400, 422: a key
                not in the lease, or two prompts' and no dataset named, a
                score out of range, ``passes > n``).
        """
        lid = lease.id if isinstance(lease, Lease) else lease
        if isinstance(results, (Result, Mapping)):
            raise TypeError("brand: answer takes a list of results")
        body = {"results": [_result(r) for r in results]}
        if isinstance(lease, Lease):
            _named(lease.prompts, body["results"])
        try:
            got = self.job._json("POST", self.job._path("leases", lid, "feedback"), body)
            answered = {(r.get("dataset") or "", r["key"]) for r in body["results"]}
            if isinstance(lease, Lease) and all((p.dataset, p.key) in answered or ("", p.key) in answered
                                                for p in lease.prompts):
                self._seen.discard(lid)  # closed: never an open lease again
            return got
        except BrandError as e:
            if e.status == 409:
                raise LeaseExpired.of(e) from None
            if e.status in (400, 422):
                raise TaskRefused.of(e) from None
            raise

    def open_leases(self) -> List[Lease]:
        """This generator's open leases (``GET
        /tasks/{job}/leases?generator=NAME``), each with the prompts not yet
        answered: what a restarted generator answers before leasing more."""
        doc = self.job._json("GET", self.job._path("leases"), params=self.job._params(generator=self.name))
        return [_lease(d) for d in doc.get("leases") or ()]


class Trainer:
    """The job's full steps in order: ``Step(step, prompts)``, from step 0
    or the step :meth:`load_state_dict` resumes at.

    A step fills as answers are applied, so the next one may not be full
    yet: :meth:`__next__` asks for it again (every :data:`MIN_POLL` to
    :data:`MAX_POLL` seconds) until it is, for at most ``wait`` seconds.
    Asking for step ``s`` first tells the gateway that the steps below it
    are consumed (``POST /tasks/{job}/trainer``), which moves the window
    the generators lease within: a trainer that holds a step holds the
    generators ``ahead`` steps past it, no further. The iterator ends when
    every prompt is retired for good and the steps full end before the one
    it reads (the plan is asked every :data:`DONE_EVERY` seconds of a
    wait).

    The steps are the log's: a trainer resumed from :meth:`state_dict`, on
    any node, reads the same steps again, exactly.
    """

    def __init__(self, job: TaskJob, wait: float = 600.0) -> None:
        if wait <= 0:
            raise ValueError(f"brand: wait {wait!r}: seconds, more than 0")
        self.job = job
        self.wait = wait
        self._next = 0  # the step next() reads
        self._told = 0  # the trainer step the gateway was last told

    def __repr__(self) -> str:
        return f"Trainer({self.job.job!r}, step={self._next})"

    def __iter__(self) -> Iterator[Step]:
        return self

    def __next__(self) -> Step:
        s = self._next
        self._tell(s)
        start = time.monotonic()
        deadline = start + self.wait
        checked = start  # when the plan was last asked whether the run is over
        waits = 0
        while True:
            try:
                doc = self.job._json("GET", self.job._path("steps", str(s)), once=True)
                break
            except BrandError as e:
                if e.status in (404, 410) and self.job._done(e):
                    raise StopIteration from None
                if e.status not in (None, 502, 503, 504):
                    raise
                now = time.monotonic()
                if e.status == 503 and now - checked >= DONE_EVERY:
                    checked = now
                    if self._over(s):
                        raise StopIteration from None
                left = deadline - now
                if left <= 0:
                    raise StepTimeout(f"brand: step {s} of task job {self.job.job!r} not full after {self.wait:g} s: "
                                      f"{e.message}", e.status) from e
                time.sleep(min(_pause(waits, e.retry_after), left))
                waits += 1
        self._next = s + 1
        return Step(int(doc.get("step", s)), list(doc.get("prompts") or ()))

    def _over(self, s: int) -> bool:
        """Whether step ``s`` will never fill: every prompt is retired for
        good and the steps full end before it."""
        try:
            plan = self.job.plan()
        except BrandError:
            return False
        return _all_retired(plan) and int(plan.get("steps_full", 0)) <= s

    def next(self) -> Step:
        """The next full step (:meth:`__next__`)."""
        return self.__next__()

    def _tell(self, s: int) -> None:
        """Tells the gateway the steps below ``s`` are consumed, once each
        step: a lower step than the gateway holds changes nothing, so a
        resumed trainer's first word is harmless."""
        if s > self._told:
            self.job._send("POST", self.job._path("trainer"), {"step": s})
            self._told = s

    @property
    def step(self) -> int:
        """The step :meth:`__next__` reads next."""
        return self._next

    def state_dict(self) -> Dict[str, Any]:
        """Where the trainer is: its job and the next step to read."""
        return {"job": self.job.job, "step": self._next}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume at ``state`` (:meth:`state_dict`'s): the next step read is
        the one it names.

        Raises:
            ValueError: ``state`` is another job's, or no trainer's state.
        """
        if not isinstance(state, Mapping) or "step" not in state or "job" not in state:
            raise ValueError(f"brand: {state!r} is no task trainer's state (a dict with job and step)")
        if state["job"] != self.job.job:
            raise ValueError(f"brand: the state is task job {state['job']!r}'s, this trainer reads {self.job.job!r}")
        step = state["step"]
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise ValueError(f"brand: the state's step {step!r}: a whole number, 0 or more")
        self._next = step
