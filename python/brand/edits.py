"""A named job's edits and feedback, apart from reading its batches.

A job reads its batches through a :class:`brand.Client` or a dataset
(``brand.Samples`` and the other entries); what changes the job while it
trains is done here, by an :class:`Editor`:

* its **exclusion list** (:meth:`Editor.exclude`): samples left out of
  the order from a step on, without a reshard;
* its **append record** (:meth:`Editor.append`): samples of files
  appended to its dataset taken into the order from a step on;
* its **stored schedule** (:meth:`Editor.store_schedule`,
  :meth:`Editor.edit_schedule`): a mixture's weights by step, edited
  from the first step no loader has read;
* its **importance feedback** (:meth:`Editor.feedback`,
  :meth:`Editor.seal`, :meth:`Editor.version_for`): each sample's loss,
  sealed into the weights the next epoch is drawn by.

Each edit answers a typed record (:class:`Exclusion`,
:class:`AppendRecord`, :class:`Schedule`), with the job's edit version
and the first step it applies to; each refusal raises
:class:`EditRefused` (a :class:`brand.BrandError`), with the first step an
edit could start at, or the current version to edit over
(docs/http-api.md, *Exclusions*, *Appends*, *Edits: one chain*,
*Schedules*).

The same calls serve a training script and a notebook::

    from brand import edits

    # in the training script, beside the loader (one rank edits)
    ed = edits.of(ds)                          # ds: brand.Samples(...), or its loader, or a brand.Client
    made = ed.exclude(["n01/000123"], from_step=step + loader.read_ahead_steps() + 1)
    made.from_step, made.version               # where it applies, the job's version now

    # in a notebook, by the job's name and what counts its steps
    ed = edits.Editor("http://brand:8080", name="run7", dataset="imagenet", batch_size=64, world=8)
    ed.exclusion().keys
    try:
        ed.append(from_step=2600, index="9c1f0a4e2b7d5c31", previous=ed.exclusion().version)
    except edits.EditRefused as e:
        print(e.first_editable_step, e.current_version)

Steps count the job's global steps (batches of ``batch_size`` × ``world``
samples; an epoch's steps, then the next's): an editor must be given the
job's batch size and world, as its readers are (``edits.of`` takes
them from the reader).

*Pass*, in this package as in the Go client (``client/``) and the HTTP
API, is a mixture component's epoch: one read of a component's dataset
within its endless stream (``first_pass`` in an epoch's plan). One
iteration of a loader over an epoch is an *iteration* (python/README.md,
*Iterations and the state*).

Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union

from . import importance
from ._http import BrandError, EditRefused, ScheduleConflictError
from ._options import Options
from .client import Client

__all__ = ["AppendRecord", "EditRefused", "Editor", "Exclusion", "Schedule", "of"]

# The statuses of an edit's refusal (docs/http-api.md, "Errors"): a step
# read or a version not current (409), an edit the gateway cannot read
# (400), an index that does not extend the job's (422).
_REFUSALS = (400, 409, 422)


@dataclass(frozen=True)
class Exclusion:
    """A job's exclusion list as stored (``POST``/``GET
    /jobs/NAME/exclude``; Go's ``api.StoredExclusion``).

    Attributes:
        version: the job's edit version this list is (the next edit names
            it as ``previous``).
        from_step: the first global step the list applies to.
        epoch, from_position: where in the epochs' order that is.
        samples: the samples the list (with those before it) leaves out.
        empty_chunks: the chunks it leaves with no sample, read no more.
        keys: the keys left out, when read back (:meth:`Editor.exclusion`).
        previous: the edit this one follows (``""`` for the job's first).
        pass_step: for a bucket job's edit, the step of ``epoch`` it cuts
            the epoch at (docs/http-api.md, *Edits of a bucket job*);
            ``None`` for an edit from a position.
    """

    job: str
    version: str
    from_step: int
    epoch: int
    from_position: int
    samples: int
    empty_chunks: int = 0
    keys: Tuple[str, ...] = ()
    previous: str = ""
    dataset: str = ""
    index_id: str = ""
    step_samples: int = 0
    pass_step: Optional[int] = None


@dataclass(frozen=True)
class AppendRecord:
    """A job's append record as stored (``POST``/``GET
    /jobs/NAME/append``; Go's ``api.StoredAppend``).

    Attributes:
        version: the job's edit version this record is.
        from_step: the first global step that reads the new samples.
        epoch, from_position: where in the epochs' order that is.
        index: the index version the job grows to; ``index_id`` the one
            it extends.
        new_samples, samples: the samples it adds, and those its epoch and
            every later one hold.
        previous: the edit this one follows (``""`` for the job's first).
        pass_step: for a bucket job's edit, the step of ``epoch`` it cuts
            the epoch at; ``None`` for an edit from a position.
    """

    job: str
    version: str
    from_step: int
    epoch: int
    from_position: int
    index: str
    new_samples: int
    samples: int
    previous: str = ""
    dataset: str = ""
    index_id: str = ""
    step_samples: int = 0
    pass_step: Optional[int] = None


@dataclass(frozen=True)
class Schedule:
    """A version of a job's stored schedule (``/jobs/NAME/schedule``; Go's
    ``api.StoredSchedule``).

    Attributes:
        version: this version (the job's ``schedule_version`` from now on).
        from_step: the first global step it differs from the version it
            edits (after an edit from ``"next"``, the step the gateway
            took); 0 for the first.
        schedule: the whole schedule, as ``mix_schedule`` writes it.
        previous: the version it edits (``""`` for the first).
        latest_step: the latest step the answering node has served of the
            job, when read (:meth:`Editor.schedule`); else ``None``.
        buckets, budget, budget_tokens: a bucketed mixture's staged buckets
            and budget stored with it (``STEP@VALUE|...``), which the job
            reads with ``buckets="stored"``; ``""`` for none.
    """

    job: str
    version: str
    from_step: int
    schedule: str
    previous: str = ""
    latest_step: Optional[int] = None
    buckets: str = ""
    budget: str = ""
    budget_tokens: str = ""


_T = TypeVar("_T")


def _typed(cls: Type[_T], answer: Mapping[str, Any]) -> _T:
    """``answer`` (the gateway's JSON) as ``cls``: its fields, the rest
    left out (a later gateway may answer more)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    got = {k: v for k, v in answer.items() if k in names}
    if "keys" in got:
        got["keys"] = tuple(got["keys"] or ())
    return cls(**got)


def _stages(stages: Mapping[str, Optional[str]]) -> Dict[str, str]:
    """The bucket stages given, as the schedule's body names them."""
    out = {}
    for k, v in stages.items():
        if v is not None:
            if not isinstance(v, str):
                raise TypeError(f"brand: {k} {v!r}: a staged value, STEP@VALUE|... (a str)")
            out[k] = v
    return out


def _check_step(from_step: Any) -> None:
    """Refuses a ``from_step`` that is not a step (a whole number, 0 or more)."""
    if not isinstance(from_step, int) or isinstance(from_step, bool) or from_step < 0:
        raise ValueError(f"brand: from_step {from_step!r}: a step (a whole number)")


class Editor:
    """A named job's edits and feedback, through a gateway (or a cluster's
    nodes, as a :class:`brand.Client` reaches them: the rank's home,
    failing over, with its retries and token).

    Args:
        url, options, **keywords: as :class:`brand.Client` takes them; the
            job must have a name (``name=``; an importance job's name for
            its feedback), and its ``batch_size`` and ``world`` count the
            steps an edit starts at.
        client: a client to send through instead (:func:`of` passes the
            reader's); not closed by :meth:`close`.
        on_schedule: called with each schedule version this editor makes
            (a dataset reads on under it and records it in its state).
    """

    def __init__(self, url: str = "", options: Optional[Options] = None, *, client: Optional[Client] = None,
                 on_schedule: Optional[Callable[[str], None]] = None, **keywords: Any) -> None:
        if client is not None and (url or options is not None or keywords):
            raise TypeError("brand: Editor(client=...) takes no url or options: the client's are used")
        self._own = client is None
        self.client = client if client is not None else Client(url, options, **keywords)
        self._on_schedule = on_schedule

    @property
    def name(self) -> str:
        """The job's name, which its edits are stored under."""
        name = self.client.options.job.name
        if name is None:
            raise ValueError("brand: a job's edits are stored under its name: give the job a name (Job.name, name=)")
        return name

    def close(self) -> None:
        """Closes the editor's own client (not one it was given)."""
        if self._own:
            self.client.close()

    def __enter__(self) -> "Editor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- requests ---------------------------------------------------------

    def _path(self, what: str) -> str:
        return "/jobs/" + urllib.parse.quote(self.name, safe="") + "/" + what

    def _call(self, method: str, what: str, params: Optional[Mapping[str, str]] = None,
              body: Optional[Mapping[str, Any]] = None, refused: Type[EditRefused] = EditRefused) -> Dict[str, Any]:
        """The JSON answer of ``method /jobs/NAME/what``; a refusal raised as
        ``refused``."""
        data = None if body is None else json.dumps(body).encode()
        try:
            a = self.client._send(method, self._path(what), params, data, None if data is None else "application/json")
        except BrandError as e:
            if e.status not in _REFUSALS:
                raise
            raise refused.of(e) from None
        return json.loads(a.body)

    # -- an exclusion list ------------------------------------------------

    def _exclude(self, keys: Sequence[str], from_step: int, previous: Optional[str] = None) -> Dict[str, Any]:
        """:meth:`exclude`, answered as the gateway's JSON."""
        _check_step(from_step)
        if isinstance(keys, str):
            raise ValueError("brand: keys is a list of sample keys, not one string")
        edit: Dict[str, Any] = {"from_step": from_step, "keys": list(keys)}
        if previous is not None:
            edit["previous"] = previous
        return self._call("POST", "exclude", self.client.params(), edit)

    def exclude(self, keys: Sequence[str], from_step: int, previous: Optional[str] = None) -> Exclusion:
        """Leave the samples ``keys`` out of the job's order from global
        step ``from_step`` on, and in every later epoch, without a reshard
        (docs/http-api.md, *Exclusions*): the steps before it keep their
        bytes. ``previous`` names the job's current edit (an exclusion or
        an append) when it has one: its chain grows by versions.

        The job's loaders read ahead of the step the trainer is on (by at
        most ``loader.read_ahead_steps()``), and a step read cannot be
        changed: choose ``from_step`` past that.

        Raises:
            EditRefused: ``from_step`` was read
                (:attr:`~EditRefused.first_editable_step`), ``previous`` is
                not the job's current edit
                (:attr:`~EditRefused.current_version` is), or a list the
                gateway cannot take (400, its message says why).
        """
        return _typed(Exclusion, self._exclude(keys, from_step, previous))

    def _exclusion(self) -> Dict[str, Any]:
        """:meth:`exclusion`, answered as the gateway's JSON."""
        dataset = self.client.options.job.dataset
        return self._call("GET", "exclude", {"dataset": dataset} if dataset else None)

    def exclusion(self) -> Exclusion:
        """The job's exclusion list, every version's keys first first.

        Raises:
            brand.BrandError: 404 if the job has none.
        """
        return _typed(Exclusion, self._exclusion())

    # -- an append record -------------------------------------------------

    def _append(self, from_step: int, index: str, previous: Optional[str] = None) -> Dict[str, Any]:
        """:meth:`append`, answered as the gateway's JSON."""
        _check_step(from_step)
        if not isinstance(index, str):
            raise ValueError(f"brand: index {index!r}: the version brand index --append printed (16 hex digits)")
        edit: Dict[str, Any] = {"from_step": from_step, "index": index}
        if previous is not None:
            if not isinstance(previous, str):
                raise ValueError(f"brand: previous {previous!r}: the version of the job's current edit")
            edit["previous"] = previous
        return self._call("POST", "append", self.client.params(), edit)

    def append(self, from_step: int, index: str, previous: Optional[str] = None) -> AppendRecord:
        """Take the samples of files appended to the job's dataset during
        the run from global step ``from_step`` on (docs/http-api.md,
        *Appends*): ``index`` is the version ``brand index --append``
        printed, which extends the one the job reads. The steps before
        keep their bytes; the rest of that epoch serves every old sample
        not read yet and every new one, each once.

        Raises:
            EditRefused: ``from_step`` was read, ``previous`` is not the
                job's current edit, the gateway does not hold ``index``
                yet (409); ``index`` does not extend the job's version
                (422).
        """
        return _typed(AppendRecord, self._append(from_step, index, previous))

    def _append_record(self) -> Dict[str, Any]:
        """:meth:`append_record`, answered as the gateway's JSON."""
        return self._call("GET", "append", self.client.params())

    def append_record(self) -> AppendRecord:
        """The job's append record.

        Raises:
            brand.BrandError: 404 if the job has none.
        """
        return _typed(AppendRecord, self._append_record())

    # -- a stored schedule --------------------------------------------------

    def _schedule(self) -> Dict[str, Any]:
        """:meth:`schedule`, answered as the gateway's JSON."""
        return self._call("GET", "schedule")

    def schedule(self) -> Schedule:
        """The current version of the job's stored schedule, with
        ``latest_step``, the latest step the answering node has served."""
        return _typed(Schedule, self._schedule())

    def _store_schedule(self, schedule: str, **stages: Optional[str]) -> Dict[str, Any]:
        """:meth:`store_schedule`, answered as the gateway's JSON."""
        return self._made(self._call("PUT", "schedule", None, {"schedule": schedule, "from_step": 0, "base": "",
                                                               **_stages(stages)}, ScheduleConflictError))

    def store_schedule(self, schedule: str, buckets: Optional[str] = None, budget: Optional[str] = None,
                       budget_tokens: Optional[str] = None) -> Schedule:
        """Store the job's first schedule, its first phase at step 0; with
        ``buckets`` (and ``budget`` or ``budget_tokens``), a bucketed
        mixture's stages stored beside it (``"0@LIST|2000@LIST"``), which
        a job reads with ``buckets="stored"`` (and ``budget="stored"``).

        Raises:
            EditRefused: the job has one already (a
                :class:`brand.ScheduleConflictError`;
                :attr:`~EditRefused.current_version` is its version).
        """
        return _typed(Schedule, self._store_schedule(schedule, buckets=buckets, budget=budget, budget_tokens=budget_tokens))

    def _edit_schedule(self, schedule: str, from_step: Union[int, str] = "next",
                       base: Optional[str] = None, **stages: Optional[str]) -> Dict[str, Any]:
        """:meth:`edit_schedule`, answered as the gateway's JSON."""
        if from_step != "next":
            _check_step(from_step)
        if base is None:
            base = str(self._schedule()["version"])
        return self._made(self._call("POST", "schedule", None, {"schedule": schedule, "from_step": from_step,
                                                                "base": base, **_stages(stages)}, ScheduleConflictError))

    def edit_schedule(self, schedule: str, from_step: Union[int, str] = "next", base: Optional[str] = None,
                      buckets: Optional[str] = None, budget: Optional[str] = None,
                      budget_tokens: Optional[str] = None) -> Schedule:
        """Edit the job's stored schedule from step ``from_step`` on; with
        ``buckets``, ``budget`` or ``budget_tokens``, its stored bucket
        stages from that step on too (their first stage at it:
        ``"next@LIST"``, or ``"2000@LIST|3000@LIST"`` from step 2000: a
        stage moved, as when a run plateaus); one not given keeps its
        stages.

        ``"next"`` (the default) is the first step the job has not read,
        which the gateway takes as it makes the edit: never refused for a
        step read meanwhile. ``schedule`` then writes its first phase at
        ``next`` (``"next:web:0.5,code:0.5"``, ``"next~+500:..."`` to ramp
        over the 500 steps from it); the answer's ``from_step`` is the
        step taken.

        Args:
            base: the version edited; ``None``: the current one, read first.

        Raises:
            EditRefused: the step was read
                (:attr:`~EditRefused.first_editable_step`), or ``base`` is
                not the current version (:attr:`~EditRefused.current_version`
                is); a :class:`brand.ScheduleConflictError`. A schedule the
                gateway cannot read (400).
        """
        return _typed(Schedule, self._edit_schedule(schedule, from_step, base, buckets=buckets, budget=budget,
                                                    budget_tokens=budget_tokens))

    def _made(self, answer: Dict[str, Any]) -> Dict[str, Any]:
        if self._on_schedule is not None:
            self._on_schedule(str(answer["version"]))
        return answer

    # -- importance feedback ----------------------------------------------

    def feedback(self, epoch: int, keys: Sequence[str], losses: Sequence[float]) -> int:
        """Report the losses of samples of ``epoch`` by key, after training
        on them (docs/importance.md); returns the count taken."""
        job = self.client.options.job
        return importance.feedback_via(self.client._send, _importance_name(self.client), epoch, keys=keys,
                                       losses=losses, dataset=job.dataset)

    def seal(self, epoch: int, prev: Optional[str] = None) -> str:
        """Seal ``epoch``'s feedback onto ``prev`` (``None``: the version the
        job's epochs are drawn from now) and return the new version; one
        rank seals."""
        job = self.client.options.job
        version = job.importance.version if job.importance is not None else None
        return importance.seal_via(self.client._send, _importance_name(self.client), epoch,
                                   prev=version if prev is None else prev, dataset=job.dataset)

    def version_for(self, epoch: int, wait: float = 60.0) -> str:
        """The version sealed for ``epoch``, waiting up to ``wait`` seconds."""
        return importance.version_for_via(self.client._send, _importance_name(self.client), epoch, wait=wait,
                                          dataset=self.client.options.job.dataset)


def _importance_name(client: Client) -> str:
    imp = client.options.job.importance
    if imp is None:
        raise ValueError("brand: this job samples uniformly: give it a Job.importance (importance_job=) to report "
                         "losses and seal")
    return imp.name


def of(reader: Any) -> Editor:
    """The editor of the job ``reader`` reads: a :class:`brand.Client`
    (sent through it), or a dataset or its loader (``brand.Samples`` and
    the other entries, a ``BrandDataset``, a ``BrandLoader``: their
    ``edits()``, which counts steps in their world and makes the dataset
    read on under a schedule it edits)."""
    if isinstance(reader, Client):
        return Editor(client=reader)
    make = getattr(reader, "edits", None)
    if callable(make):
        return make()
    raise TypeError(f"brand: edits.of({type(reader).__name__}): give a brand.Client, a dataset or its loader")
