"""The review protocol as a fold over the append-only event log.

A task's state is never stored as the truth: it is what :func:`apply` makes of the task's
events, in order. The server folds a task's history, applies the new event to the result
(which raises :class:`ProtocolError` when the event breaks the protocol), and only then
appends it; replaying the log later runs the very same rules, so a log that replays is a
log whose every step was allowed, and replay gives the state the server had.

The rules (paper Appendix A.5):

* ``task_loaded`` opens version 1 in ``pending``; two or more ``assigned`` reviewers make it
  ``in_review``. Membership is fixed once any reviewer has submitted a phase-1 answer.
* ``phase1_submitted`` (blind solving) is accepted once per reviewer and version, only on a
  version that needs solving (version 1, or a repair that changed the question or the
  workspace); ``phase2_submitted`` (gold verdict, disposition, config) once per reviewer
  and version, only after that reviewer's phase 1 applying to the version is locked.
* When every assigned reviewer has locked phase 2 of the current version, the task reaches
  ``consensus`` (all Match + Pass + identical canonical configs) or ``adjudication``.
* ``message`` (discussion) needs a locked phase 2 from a reviewer; ``repair`` (only in
  adjudication) creates version n+1 over the previous one and sends it to ``recheck`` by
  the same reviewers; ``accepted`` needs consensus; ``removed`` needs a reason.
* Two more ways out of ``adjudication``, so no state is a dead end: ``adjudicated`` accepts
  the builder's version when every reviewer matched and passed and only their own configs
  differ (the builder's config becomes the agreed one; the event cites the discussion), and
  ``reopened`` sends the task back to phase 2 as version n+1 with no content change.
  :func:`exits` lists what an administrator may do in a state.
* ``state_changed`` events record transitions for readers of the log; replay checks that
  each one states the transition the rules produced.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from builder.errors import ReviewError
from builder.review.taxonomy import (
    FINAL_STATES,
    MIN_REVIEWERS,
    REPAIR_SCOPES,
    Disposition,
    TaskState,
    Verdict,
)

logger = logging.getLogger(__name__)


class ProtocolError(ReviewError):
    """An event the protocol does not allow in the task's current state (HTTP 409)."""

    def __init__(self, task_id: str | None, message: str) -> None:
        super().__init__(f"{task_id}: {message}" if task_id else message, status=409)


@dataclass(frozen=True, kw_only=True)
class Event:
    """One row of the event log.

    Attributes:
        id: position in the log (increasing).
        at: UTC time, ISO 8601 with ``Z``.
        actor: the user name (or ``system``).
        task_id: the task, or None for events about the server itself.
        version: the task version the event concerns.
        kind: what happened.
        payload: the event's data.
    """

    id: int
    at: str
    actor: str
    task_id: str | None
    version: int | None
    kind: str
    payload: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (one line of an exported log)."""
        return {
            "id": self.id,
            "at": self.at,
            "actor": self.actor,
            "task_id": self.task_id,
            "version": self.version,
            "kind": self.kind,
            "payload": dict(self.payload),
        }


@dataclass(kw_only=True)
class Version:
    """One task version: version 1 is the candidate; each repair adds one."""

    number: int
    question: str
    gold_sha256: str
    config: dict[str, Any]
    overlay: dict[str, str | None]  # path -> blob sha256 (None: deleted), cumulative
    needs_phase1: bool
    scope: tuple[str, ...] = ()
    reason: str = ""
    repaired_by: str = ""


@dataclass(kw_only=True)
class Record:
    """One reviewer's record for one version: phase 1 and phase 2, each locked once set."""

    reviewer: str
    version: int
    phase1: dict[str, Any] | None = None
    phase1_at: str | None = None
    phase2: dict[str, Any] | None = None
    phase2_at: str | None = None


@dataclass(kw_only=True)
class TaskFold:
    """The state of one task after folding its events."""

    task_id: str
    state: TaskState = TaskState.PENDING
    version: int = 0
    reviewers: list[str] = field(default_factory=list)
    versions: dict[int, Version] = field(default_factory=dict)
    records: dict[int, dict[str, Record]] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    started: bool = False
    decision: dict[str, Any] | None = None
    history: list[tuple[str, str]] = field(default_factory=list)  # (at, state)
    last_event: int = 0

    # ---- questions the server asks -------------------------------------------------
    @property
    def current(self) -> Version:
        """The active version."""
        return self.versions[self.version]

    def record(self, reviewer: str, version: int | None = None) -> Record | None:
        """A reviewer's record for a version (the current one by default)."""
        return self.records.get(self.version if version is None else version, {}).get(reviewer)

    def phase1_record(self, reviewer: str, version: int | None = None) -> Record | None:
        """The record holding the phase-1 answer that applies to a version."""
        v = self.version if version is None else version
        while v >= 1:
            if self.versions[v].needs_phase1:
                return self.record(reviewer, v)
            v -= 1
        return None

    def phase1_locked(self, reviewer: str, version: int | None = None) -> bool:
        """Whether the reviewer's phase-1 answer for the version is locked."""
        rec = self.phase1_record(reviewer, version)
        return rec is not None and rec.phase1 is not None

    def phase2_locked(self, reviewer: str, version: int | None = None) -> bool:
        """Whether the reviewer's phase-2 verification for the version is locked."""
        rec = self.record(reviewer, version)
        return rec is not None and rec.phase2 is not None

    def ever_completed(self, reviewer: str) -> bool:
        """Whether the reviewer has locked both phases of some version."""
        return any(self.phase2_locked(reviewer, v) for v in self.versions)

    def consensus(self, version: int | None = None) -> bool:
        """All assigned reviewers locked Match + Pass with one canonical config."""
        v = self.version if version is None else version
        configs = set()
        for name in self.reviewers:
            rec = self.record(name, v)
            if rec is None or rec.phase2 is None:
                return False
            p2 = rec.phase2
            if p2.get("verdict") != Verdict.MATCH or p2.get("disposition") != Disposition.PASS:
                return False
            configs.add(canonical_config(p2["config"]))
        return len(configs) == 1

    def config_only_disagreement(self, version: int | None = None) -> bool:
        """Every reviewer locked Match + Pass, and only their configs differ."""
        v = self.version if version is None else version
        if not self.reviewers:
            return False
        for name in self.reviewers:
            rec = self.record(name, v)
            if rec is None or rec.phase2 is None:
                return False
            p2 = rec.phase2
            if p2.get("verdict") != Verdict.MATCH or p2.get("disposition") != Disposition.PASS:
                return False
        return not self.consensus(v)

    def agreed_config(self) -> dict[str, Any] | None:
        """The config every reviewer wrote, when the current version has consensus."""
        if not self.consensus():
            return None
        rec = self.record(self.reviewers[0])
        assert rec is not None and rec.phase2 is not None
        return dict(rec.phase2["config"])

    def snapshot(self) -> dict[str, Any]:
        """Everything that defines the state, as plain data (replay compares these)."""
        return {
            "task_id": self.task_id,
            "state": str(self.state),
            "version": self.version,
            "reviewers": sorted(self.reviewers),
            "versions": {
                str(n): {
                    "question": v.question,
                    "gold_sha256": v.gold_sha256,
                    "config": canonical_config(v.config),
                    "overlay": dict(sorted(v.overlay.items())),
                    "scope": list(v.scope),
                    "reason": v.reason,
                }
                for n, v in sorted(self.versions.items())
            },
            "records": {
                f"{v}/{name}": {"phase1": rec.phase1 is not None, "phase2": rec.phase2}
                for v, recs in sorted(self.records.items())
                for name, rec in sorted(recs.items())
            },
            "messages": len(self.messages),
            "decision": self.decision,
        }


def canonical_config(config: Mapping[str, Any]) -> str:
    """The evaluator's canonical text of a config (equal texts score alike)."""
    import evaluator

    try:
        parsed = evaluator.parse_config(dict(config), source="config")
    except evaluator.FatalError:
        return json.dumps(config, sort_keys=True, ensure_ascii=False)
    return evaluator.canonical_config_json(parsed)


# ---- the fold ------------------------------------------------------------------------


def _need(cond: bool, task_id: str, message: str) -> None:
    if not cond:
        raise ProtocolError(task_id, message)


def _reviewer(fold: TaskFold, payload: Mapping[str, Any]) -> str:
    name = payload.get("reviewer")
    _need(isinstance(name, str) and bool(name), fold.task_id, "event names no reviewer")
    return str(name)


def _set_state(fold: TaskFold, state: TaskState, at: str) -> None:
    if fold.state != state:
        fold.state = state
        fold.history.append((at, str(state)))


def apply(fold: TaskFold | None, event: Event) -> TaskFold:
    """Apply one event to a task's fold (in place) and return it.

    Args:
        fold: the state so far, or None before the task's first event.
        event: the next event of this task.

    Raises:
        ProtocolError: the event is not allowed in the current state.
    """
    tid = event.task_id or "?"
    if fold is None:
        _need(event.kind == "task_loaded", tid, f"first event is {event.kind}, not task_loaded")
        fold = TaskFold(task_id=tid)
    elif event.kind == "task_loaded":
        raise ProtocolError(tid, "task is already loaded")
    if fold.state in FINAL_STATES and event.kind != "state_changed":
        raise ProtocolError(tid, f"task is {fold.state}; no further review actions")
    if event.version is not None and event.kind != "task_loaded":
        _need(
            event.version == fold.version,
            tid,
            f"event is for version {event.version} but the current version is {fold.version}",
        )
    handler = _HANDLERS.get(event.kind)
    _need(handler is not None, tid, f"unknown event kind {event.kind!r}")
    assert handler is not None
    handler(fold, event)
    fold.last_event = event.id
    return fold


def _task_loaded(fold: TaskFold, ev: Event) -> None:
    p = ev.payload
    fold.version = 1
    fold.versions[1] = Version(
        number=1,
        question=str(p["question"]),
        gold_sha256=str(p["gold_sha256"]),
        config=dict(p["config"]),
        overlay={},
        needs_phase1=True,
    )
    fold.history.append((ev.at, str(TaskState.PENDING)))


def _assigned(fold: TaskFold, ev: Event) -> None:
    name = _reviewer(fold, ev.payload)
    _need(
        fold.state in (TaskState.PENDING, TaskState.IN_REVIEW),
        fold.task_id,
        f"cannot assign in state {fold.state}",
    )
    _need(not fold.started, fold.task_id, "membership is fixed once an answer was submitted")
    _need(name not in fold.reviewers, fold.task_id, f"{name} is already assigned")
    fold.reviewers.append(name)
    if len(fold.reviewers) >= MIN_REVIEWERS:
        _set_state(fold, TaskState.IN_REVIEW, ev.at)


def _unassigned(fold: TaskFold, ev: Event) -> None:
    name = _reviewer(fold, ev.payload)
    _need(name in fold.reviewers, fold.task_id, f"{name} is not assigned")
    _need(not fold.started, fold.task_id, "membership is fixed once an answer was submitted")
    fold.reviewers.remove(name)
    if len(fold.reviewers) < MIN_REVIEWERS:
        _set_state(fold, TaskState.PENDING, ev.at)


def _phase1(fold: TaskFold, ev: Event) -> None:
    name = _reviewer(fold, ev.payload)
    _need(name in fold.reviewers, fold.task_id, f"{name} is not assigned to this task")
    _need(
        fold.state in (TaskState.IN_REVIEW, TaskState.RECHECK),
        fold.task_id,
        f"no answers are taken in state {fold.state}",
    )
    _need(
        fold.current.needs_phase1,
        fold.task_id,
        f"version {fold.version} is rechecked in phase 2 only (the question and workspace "
        "did not change)",
    )
    rec = fold.records.setdefault(fold.version, {}).setdefault(
        name, Record(reviewer=name, version=fold.version)
    )
    _need(rec.phase1 is None, fold.task_id, f"{name}'s phase-1 answer is locked")
    rec.phase1 = dict(ev.payload)
    rec.phase1_at = ev.at
    fold.started = True


def _phase2(fold: TaskFold, ev: Event) -> None:
    name = _reviewer(fold, ev.payload)
    _need(name in fold.reviewers, fold.task_id, f"{name} is not assigned to this task")
    _need(
        fold.state in (TaskState.IN_REVIEW, TaskState.RECHECK),
        fold.task_id,
        f"no verifications are taken in state {fold.state}",
    )
    _need(
        fold.phase1_locked(name),
        fold.task_id,
        f"{name} must lock the phase-1 answer before the gold is verified",
    )
    rec = fold.records.setdefault(fold.version, {}).setdefault(
        name, Record(reviewer=name, version=fold.version)
    )
    _need(rec.phase2 is None, fold.task_id, f"{name}'s phase-2 verification is locked")
    rec.phase2 = dict(ev.payload)
    rec.phase2_at = ev.at
    if all(fold.phase2_locked(r) for r in fold.reviewers):
        _set_state(fold, TaskState.CONSENSUS if fold.consensus() else TaskState.ADJUDICATION, ev.at)


def _state_changed(fold: TaskFold, ev: Event) -> None:
    to = ev.payload.get("to")
    _need(
        to == fold.state,
        fold.task_id,
        f"logged transition to {to} but the protocol gives {fold.state}",
    )


def _message(fold: TaskFold, ev: Event) -> None:
    _need(
        fold.state in (TaskState.ADJUDICATION, TaskState.CONSENSUS),
        fold.task_id,
        f"discussion is open in adjudication, not in state {fold.state}",
    )
    if ev.payload.get("role") == "reviewer":
        _need(ev.actor in fold.reviewers, fold.task_id, f"{ev.actor} is not assigned")
        _need(
            fold.phase2_locked(ev.actor),
            fold.task_id,
            f"{ev.actor} must lock both phases before the discussion",
        )
    fold.messages.append({"id": ev.id, "at": ev.at, "actor": ev.actor, **dict(ev.payload)})


def _repair(fold: TaskFold, ev: Event) -> None:
    p = ev.payload
    _need(
        fold.state == TaskState.ADJUDICATION,
        fold.task_id,
        f"repairs follow adjudication, not state {fold.state}",
    )
    scope = tuple(p.get("scope") or ())
    _need(bool(scope), fold.task_id, "a repair names its scope")
    _need(all(s in REPAIR_SCOPES for s in scope), fold.task_id, f"unknown scope in {scope}")
    _need(bool(str(p.get("reason", "")).strip()), fold.task_id, "a repair states its reason")
    old = fold.current
    overlay = dict(old.overlay)
    overlay.update(p.get("files") or {})
    new = Version(
        number=old.number + 1,
        question=str(p["question"]) if "question" in scope else old.question,
        gold_sha256=str(p["gold_sha256"]) if "gold" in scope else old.gold_sha256,
        config=dict(p["config"]) if "config" in scope else dict(old.config),
        overlay=overlay,
        needs_phase1=bool({"question", "workspace"} & set(scope)),
        scope=scope,
        reason=str(p["reason"]),
        repaired_by=ev.actor,
    )
    fold.versions[new.number] = new
    fold.version = new.number
    _set_state(fold, TaskState.RECHECK, ev.at)


def _adjudicated(fold: TaskFold, ev: Event) -> None:
    p = ev.payload
    _need(
        fold.state == TaskState.ADJUDICATION,
        fold.task_id,
        f"adjudication decides tasks in adjudication, not in state {fold.state}",
    )
    _need(
        fold.config_only_disagreement(),
        fold.task_id,
        "the builder's version is accepted by adjudication only when every reviewer matched "
        "and passed and only their configs differ",
    )
    _need(bool(str(p.get("reason", "")).strip()), fold.task_id, "adjudication states its reason")
    known = {m["id"] for m in fold.messages}
    cited = list(p.get("messages") or [])
    _need(
        all(m in known for m in cited),
        fold.task_id,
        f"adjudication cites messages {sorted(set(cited) - known)} that are not in the discussion",
    )
    fold.decision = {
        "decision": "accepted",
        "via": "adjudication",
        "at": ev.at,
        "by": ev.actor,
        "config": dict(fold.current.config),
        **{k: v for k, v in p.items() if k != "config"},
    }
    _set_state(fold, TaskState.ACCEPTED, ev.at)


def _reopened(fold: TaskFold, ev: Event) -> None:
    _need(
        fold.state == TaskState.ADJUDICATION,
        fold.task_id,
        f"only a task in adjudication goes back to phase 2 (state {fold.state})",
    )
    reason = str(ev.payload.get("reason", "")).strip()
    _need(bool(reason), fold.task_id, "sending a task back to phase 2 states its reason")
    old = fold.current
    new = Version(
        number=old.number + 1,
        question=old.question,
        gold_sha256=old.gold_sha256,
        config=dict(old.config),
        overlay=dict(old.overlay),
        needs_phase1=False,
        scope=(),
        reason=reason,
        repaired_by=ev.actor,
    )
    fold.versions[new.number] = new
    fold.version = new.number
    _set_state(fold, TaskState.RECHECK, ev.at)


def exits(fold: TaskFold) -> tuple[str, ...]:
    """What an administrator may do with a task in its current state.

    Every state that is not final has at least ``remove``; adjudication always has ``repair``
    and ``reopen`` too, so no disagreement is a dead end.
    """
    if fold.state in FINAL_STATES:
        return ()
    out: list[str] = []
    if fold.state == TaskState.CONSENSUS:
        out.append("accept")
    if fold.state == TaskState.ADJUDICATION:
        if fold.config_only_disagreement():
            out.append("adjudicate")
        out += ["repair", "reopen"]
    out.append("remove")
    return tuple(out)


def _accepted(fold: TaskFold, ev: Event) -> None:
    _need(
        fold.state == TaskState.CONSENSUS,
        fold.task_id,
        f"only a task in consensus can be accepted (state {fold.state})",
    )
    fold.decision = {"decision": "accepted", "at": ev.at, "by": ev.actor, **dict(ev.payload)}
    _set_state(fold, TaskState.ACCEPTED, ev.at)


def _removed(fold: TaskFold, ev: Event) -> None:
    _need(bool(str(ev.payload.get("reason", "")).strip()), fold.task_id, "removal needs a reason")
    fold.decision = {"decision": "removed", "at": ev.at, "by": ev.actor, **dict(ev.payload)}
    _set_state(fold, TaskState.REMOVED, ev.at)


_HANDLERS = {
    "task_loaded": _task_loaded,
    "assigned": _assigned,
    "unassigned": _unassigned,
    "phase1_submitted": _phase1,
    "phase2_submitted": _phase2,
    "state_changed": _state_changed,
    "message": _message,
    "repair": _repair,
    "accepted": _accepted,
    "adjudicated": _adjudicated,
    "reopened": _reopened,
    "removed": _removed,
}

EVENT_KINDS = (*_HANDLERS, "user_added", "server_started")


def replay(events: Iterable[Event]) -> dict[str, TaskFold]:
    """Fold a whole log into every task's state.

    Raises:
        ProtocolError: an event breaks the protocol (the log was not written by the rules).
    """
    folds: dict[str, TaskFold] = {}
    last = 0
    for ev in events:
        if ev.id <= last:
            raise ProtocolError(ev.task_id, f"event {ev.id} is out of order after {last}")
        last = ev.id
        if ev.task_id is None:
            continue
        folds[ev.task_id] = apply(folds.get(ev.task_id), ev)
    return folds


__all__ = [
    "EVENT_KINDS",
    "Event",
    "ProtocolError",
    "Record",
    "TaskFold",
    "Version",
    "apply",
    "canonical_config",
    "exits",
    "replay",
]
