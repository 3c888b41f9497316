"""The review service: every request checked against role, assignment, phase and lock.

The HTTP layer only parses requests and calls one method here with the logged-in
:class:`User`; everything a user may see or do is decided in this module, so the console
cannot widen it. Each write folds the task's history, applies the new event under the
protocol rules (:mod:`builder.review.protocol`) and appends it in one serialized
transaction.

What a reviewer sees of a task assigned to them:

* always: the current version's question and workspace, and their own records;
* after locking their phase-1 answer: the gold and the diagnostic difference;
* after locking phase 2 of a version: their peers' records of that version and the
  discussion; after locking both phases once: the source SQL.

Never: the ledger, the builder's candidate config, the event log, or any task not
assigned to them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from builder.errors import ReviewError
from builder.review.adjudication import (
    config_fields,
    contradiction,
    contradiction_text,
    differences,
    explanation,
    normalized_config,
    version_diff,
)
from builder.review.anchors import check_anchor
from builder.review.db import Database
from builder.review.diagnostic import diagnose
from builder.review.protocol import Event, TaskFold, apply, canonical_config, exits, replay
from builder.review.taxonomy import (
    ANCHOR_KINDS,
    EVIDENCE_ROLES,
    FINAL_STATES,
    ISSUE_FLAGS,
    MIN_REVIEWERS,
    REPAIR_SCOPES,
    SEMANTICS_FIELDS,
    Disposition,
    Role,
    TaskState,
    Verdict,
    modality_of,
)
from builder.review.workspace import VersionFiles, clean_path, sha256
from dataspace.errors import ConfigError

logger = logging.getLogger(__name__)

SESSION_HOURS = 12
_PBKDF2_ROUNDS = 200_000
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True, kw_only=True)
class User:
    """A logged-in user."""

    name: str
    role: Role


def now_utc() -> str:
    """The current UTC time, ISO 8601 with a ``Z``."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _hash_password(password: str, salt: str) -> str:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), _PBKDF2_ROUNDS).hex()


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _forbid(message: str) -> ReviewError:
    return ReviewError(message, status=403)


class ReviewService:
    """Review operations over one database.

    Args:
        db: the review database (created by :func:`builder.review.load_release`).
        cache_dir: where overlay files are materialized for viewers.
    """

    def __init__(self, db: Database, cache_dir: Path) -> None:
        self.db = db
        self.cache_dir = cache_dir
        root = db.meta("release_root")
        if root is None:
            raise ConfigError(
                f"{db.display_url}: no release loaded; run `dataspace review init RELEASE "
                f"--db {db.display_url}`"
            )
        from dataspace.release import Release

        self.release = Release(root)

    # ---- users and sessions ----------------------------------------------------------
    def add_user(self, name: str, role: str, password: str, *, actor: str = "admin") -> None:
        """Create a user (or reset their password and role)."""
        if not _NAME_RE.match(name):
            raise ReviewError(f"{name!r}: user names are letters, digits, '_', '.', '-'")
        try:
            role_v = Role(role)
        except ValueError:
            raise ReviewError(
                f"{role!r}: role must be one of {', '.join(r.value for r in Role)}"
            ) from None
        if len(password) < 8:
            raise ReviewError(f"{name}: the password needs at least 8 characters")
        salt = secrets.token_hex(16)
        with self.db.write():
            self.db.execute("DELETE FROM review_users WHERE name = ?", (name,))
            self.db.execute(
                "INSERT INTO review_users (name, role, salt, password_hash, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (name, role_v.value, salt, _hash_password(password, salt), now_utc()),
            )
            self._append_raw(actor, None, None, "user_added", {"name": name, "role": role_v})

    def users(self) -> list[User]:
        """Every user."""
        rows = self.db.query("SELECT name, role FROM review_users ORDER BY name")
        return [User(name=str(n), role=Role(r)) for n, r in rows]

    def login(self, name: str, password: str) -> str:
        """Check a password; return a new session token (never stored in clear)."""
        rows = self.db.query(
            "SELECT role, salt, password_hash FROM review_users WHERE name = ?", (name,)
        )
        salt = rows[0][1] if rows else "x" * 32
        digest = _hash_password(password, str(salt))
        if not rows or not hmac.compare_digest(digest, str(rows[0][2])):
            raise ReviewError("wrong user name or password", status=401)
        token = secrets.token_urlsafe(32)
        expires = (datetime.now(UTC) + timedelta(hours=SESSION_HOURS)).isoformat()
        with self.db.write():
            self.db.execute(
                "INSERT INTO review_sessions (token_hash, user_name, expires_at) VALUES (?, ?, ?)",
                (_token_hash(token), name, expires),
            )
        return token

    def logout(self, token: str) -> None:
        """End a session."""
        with self.db.write():
            self.db.execute(
                "DELETE FROM review_sessions WHERE token_hash = ?", (_token_hash(token),)
            )

    def authenticate(self, token: str | None) -> User:
        """The user of a session token.

        Raises:
            ReviewError: (401) no token, unknown or expired.
        """
        if not token:
            raise ReviewError("login required", status=401)
        rows = self.db.query(
            "SELECT u.name, u.role, s.expires_at FROM review_sessions s "
            "JOIN review_users u ON u.name = s.user_name WHERE s.token_hash = ?",
            (_token_hash(token),),
        )
        if not rows or datetime.fromisoformat(str(rows[0][2])) < datetime.now(UTC):
            raise ReviewError("login required (session unknown or expired)", status=401)
        return User(name=str(rows[0][0]), role=Role(rows[0][1]))

    # ---- the log -------------------------------------------------------------------
    def events(self, task_id: str | None = None) -> list[Event]:
        """The log (of one task, or all of it), in order."""
        sql = "SELECT id, at, actor, task_id, version, kind, payload FROM review_events"
        rows = (
            self.db.query(sql + " WHERE task_id = ? ORDER BY id", (task_id,))
            if task_id
            else self.db.query(sql + " ORDER BY id")
        )
        return [
            Event(
                id=int(r[0]),
                at=str(r[1]),
                actor=str(r[2]),
                task_id=r[3],
                version=None if r[4] is None else int(r[4]),
                kind=str(r[5]),
                payload=json.loads(r[6]),
            )
            for r in rows
        ]

    def fold(self, task_id: str) -> TaskFold:
        """The task's state, folded from its events.

        Raises:
            ReviewError: (404) the task is not loaded.
        """
        events = self.events(task_id)
        if not events:
            raise ReviewError(f"{task_id}: no such task in this review", status=404)
        return replay(events)[task_id]

    def task_ids(self) -> list[str]:
        """Every loaded task id, in task order."""
        from dataspace.release import sort_task_ids

        return sort_task_ids([str(r[0]) for r in self.db.query("SELECT task_id FROM review_tasks")])

    def _append_raw(
        self,
        actor: str,
        task_id: str | None,
        version: int | None,
        kind: str,
        payload: Mapping[str, Any],
    ) -> int:
        body = json.dumps(payload, ensure_ascii=False, sort_keys=True, default=str)
        return self.db.insert_event((now_utc(), actor, task_id, version, kind, body))

    def _append(
        self, actor: User | str, task_id: str, kind: str, payload: Mapping[str, Any]
    ) -> TaskFold:
        """Fold, apply, append (and log any state change) in one write transaction."""
        name = actor.name if isinstance(actor, User) else actor
        with self.db.write():
            events = self.events(task_id)
            if not events:
                raise ReviewError(f"{task_id}: no such task in this review", status=404)
            fold = replay(events)
            state = fold[task_id]
            before = state.state
            version = state.version
            ev = Event(
                id=events[-1].id + 1,
                at=now_utc(),
                actor=name,
                task_id=task_id,
                version=version,
                kind=kind,
                payload=dict(payload),
            )
            apply(state, ev)  # raises ProtocolError before anything is written
            self._append_raw(name, task_id, version, kind, payload)
            if state.state != before:
                self._append_raw(
                    "system",
                    task_id,
                    state.version,
                    "state_changed",
                    {"from": str(before), "to": str(state.state), "cause": kind},
                )
            self.db.execute(
                "UPDATE review_tasks SET state = ?, version = ?, updated_at = ? WHERE task_id = ?",
                (str(state.state), state.version, now_utc(), task_id),
            )
        return state

    # ---- access checks -------------------------------------------------------------
    def _visible_fold(self, user: User, task_id: str) -> TaskFold:
        fold = self.fold(task_id)
        if user.role == Role.REVIEWER and user.name not in fold.reviewers:
            raise _forbid(f"{task_id} is not assigned to {user.name}")
        return fold

    def files(self, fold: TaskFold, version: int | None = None) -> VersionFiles:
        """The workspace view of a version (the current one by default)."""
        v = fold.versions[fold.version if version is None else version]
        return VersionFiles(
            self.release.workspace(fold.task_id), v.overlay, self.db.get_blob, self.cache_dir
        )

    def gold(self, fold: TaskFold, version: int | None = None) -> tuple[list[str], list[list[str]]]:
        """The gold table of a version."""
        import evaluator

        v = fold.versions[fold.version if version is None else version]
        raw = self.db.get_blob(v.gold_sha256)
        if raw is None:
            raise ReviewError(f"{fold.task_id}: gold content is missing", status=500)
        table = evaluator.read_csv(raw, role="gold")
        return list(table.header), [list(r) for r in table.rows]

    # ---- reading -------------------------------------------------------------------
    def task_list(self, user: User) -> list[dict[str, Any]]:
        """The tasks a user works on, with where each stands for them."""
        out = []
        for tid in self.task_ids():
            fold = self.fold(tid)
            if user.role == Role.REVIEWER and user.name not in fold.reviewers:
                continue
            entry: dict[str, Any] = {
                "task_id": tid,
                "state": str(fold.state),
                "version": fold.version,
            }
            if user.role == Role.REVIEWER:
                entry["todo"] = self._todo(fold, user.name)
            else:
                entry["reviewers"] = list(fold.reviewers)
            out.append(entry)
        return out

    def _todo(self, fold: TaskFold, name: str) -> str:
        if fold.state in FINAL_STATES:
            return str(fold.state)
        if fold.state in (TaskState.IN_REVIEW, TaskState.RECHECK):
            if not fold.phase1_locked(name):
                return "phase1"
            if not fold.phase2_locked(name):
                return "phase2"
            return "waiting"
        if fold.state == TaskState.ADJUDICATION:
            return "discussion"
        return "waiting"

    def task_view(self, user: User, task_id: str) -> dict[str, Any]:
        """What the console shows of a task to this user (no gold, config or peers)."""
        fold = self._visible_fold(user, task_id)
        view: dict[str, Any] = {
            "task_id": task_id,
            "state": str(fold.state),
            "version": fold.version,
            "question": fold.current.question,
            "needs_phase1": fold.current.needs_phase1,
            "reviewers": list(fold.reviewers) if user.role != Role.REVIEWER else None,
        }
        if user.role == Role.REVIEWER:
            view["todo"] = self._todo(fold, user.name)
            view["my"] = self._own_records(fold, user.name)
            view["phase1_locked"] = fold.phase1_locked(user.name)
            view["phase2_locked"] = fold.phase2_locked(user.name)
            if fold.ever_completed(user.name):
                view["versions"] = self._versions(fold)
        else:
            view["versions"] = self._versions(fold)
            view["decision"] = fold.decision
            view["agreed_config"] = fold.agreed_config()
            view["exits"] = (
                list(exits(fold))
                if user.role == Role.ADMIN
                else (["repair"] if fold.state == TaskState.ADJUDICATION else [])
            )
            if any(fold.phase2_locked(n) for n in fold.reviewers):
                header, rows = self.gold(fold)
                view["differences"] = differences(fold, fold.version, header, rows)
                view["differences"]["builder"] = config_fields(
                    normalized_config(fold.current.config)
                )
                view["warnings"] = self._warnings(fold, header, rows)
        return view

    def _warnings(
        self, fold: TaskFold, header: Sequence[str], rows: Sequence[Sequence[str]]
    ) -> list[dict[str, Any]]:
        """Reviewers of the current version whose blind answer scores wrong but who chose Match."""
        out = []
        for name in fold.reviewers:
            rec = fold.record(name)
            rec1 = fold.phase1_record(name)
            if rec is None or rec.phase2 is None or rec1 is None or rec1.phase1 is None:
                continue
            found = contradiction(
                header, rows, rec1.phase1["result"], rec.phase2["config"], rec.phase2["verdict"]
            )
            if found is not None:
                out.append({"reviewer": name, **found, "text": contradiction_text(name, found)})
        return out

    def _versions(self, fold: TaskFold) -> list[dict[str, Any]]:
        return [
            {"version": v.number, "scope": list(v.scope), "reason": v.reason, "by": v.repaired_by}
            for v in fold.versions.values()
        ]

    def _own_records(self, fold: TaskFold, name: str) -> list[dict[str, Any]]:
        out = []
        for v in sorted(fold.records):
            rec = fold.records[v].get(name)
            if rec is not None:
                out.append(_record_dict(rec))
        return out

    def list_files(self, user: User, task_id: str) -> list[dict[str, Any]]:
        """The current version's workspace files."""
        fold = self._visible_fold(user, task_id)
        return [e.to_dict() for e in self.files(fold).list()]

    def workspace(self, user: User, task_id: str) -> VersionFiles:
        """The current version's workspace, for the viewers."""
        return self.files(self._visible_fold(user, task_id))

    def gold_view(self, user: User, task_id: str) -> dict[str, Any]:
        """The gold and the diagnostic difference from the user's locked answer."""
        fold = self._visible_fold(user, task_id)
        if user.role == Role.REVIEWER and not fold.phase1_locked(user.name):
            raise _forbid(f"{task_id}: the gold is shown after your phase-1 answer is locked")
        header, rows = self.gold(fold)
        out: dict[str, Any] = {"header": header, "rows": rows[:500], "total": len(rows)}
        if user.role == Role.REVIEWER:
            rec = fold.phase1_record(user.name)
            assert rec is not None and rec.phase1 is not None
            cand = rec.phase1
            rec2 = fold.record(user.name)
            config = (
                rec2.phase2["config"]
                if rec2 is not None and rec2.phase2 is not None
                else _diagnostic_config(fold, header)
            )
            out["diagnostic"] = diagnose(
                gold_header=header,
                gold_rows=rows,
                header=cand["result"]["header"],
                rows=cand["result"]["rows"],
                config=config,
            )
            out["diagnostic"]["config_used"] = (
                "yours" if rec2 is not None and rec2.phase2 is not None else "text columns"
            )
            out["answer"] = cand["result"]
            out["explanation"] = explanation(header, rows, cand["result"], config)
        return out

    def records_view(self, user: User, task_id: str) -> dict[str, Any]:
        """Records of a task: own always; peers' only for versions the user locked."""
        fold = self._visible_fold(user, task_id)
        out: dict[str, list[dict[str, Any]]] = {}
        for v in sorted(fold.records):
            for name, rec in sorted(fold.records[v].items()):
                if (
                    user.role == Role.REVIEWER
                    and name != user.name
                    and not fold.phase2_locked(user.name, v)
                ):
                    continue
                out.setdefault(str(v), []).append(_record_dict(rec))
        return {"task_id": task_id, "records": out}

    def messages_view(self, user: User, task_id: str) -> list[dict[str, Any]]:
        """The discussion (for reviewers, once they locked phase 2 of the current version)."""
        fold = self._visible_fold(user, task_id)
        if user.role == Role.REVIEWER and not fold.phase2_locked(user.name):
            raise _forbid(f"{task_id}: the discussion opens after you lock both phases")
        return list(fold.messages)

    def source_sql(self, user: User, task_id: str) -> dict[str, Any]:
        """The source SQL from the ledger (reviewers: after both phases once)."""
        fold = self._visible_fold(user, task_id)
        if user.role == Role.REVIEWER and not fold.ever_completed(user.name):
            raise _forbid(f"{task_id}: the source SQL is shown after you lock both phases")
        ledger = self.release.ledger(task_id) or {}
        return {"task_id": task_id, "sql": ledger.get("sql")}

    def ledger_view(self, user: User, task_id: str) -> dict[str, Any]:
        """The provenance ledger and the builder's candidate config (never to reviewers)."""
        if user.role == Role.REVIEWER:
            raise _forbid("the ledger is for repairers and administrators")
        fold = self.fold(task_id)
        return {
            "task_id": task_id,
            "ledger": self.release.ledger(task_id),
            "candidate_config": fold.current.config,
        }

    def task_events(self, user: User, task_id: str) -> list[dict[str, Any]]:
        """The task's event log (never to reviewers: it holds every record)."""
        if user.role == Role.REVIEWER:
            raise _forbid("the event log is for repairers and administrators")
        self.fold(task_id)
        return [e.to_dict() for e in self.events(task_id)]

    # ---- reviewer actions ------------------------------------------------------------
    def _reviewer_fold(self, user: User, task_id: str) -> TaskFold:
        if user.role != Role.REVIEWER:
            raise _forbid(f"only reviewers submit reviews ({user.name} is {user.role})")
        return self._visible_fold(user, task_id)

    def submit_phase1(self, user: User, task_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and lock a blind answer with evidence, semantics, flags, confidence."""
        import evaluator

        fold = self._reviewer_fold(user, task_id)
        if fold.phase1_locked(user.name) and fold.current.needs_phase1:
            raise ReviewError(f"{task_id}: your phase-1 answer is locked", status=409)
        raw = body.get("result_csv")
        if not isinstance(raw, str):
            raise ReviewError("result_csv: the answer table as CSV text (a header is required)")
        try:
            table = evaluator.read_csv(raw.encode("utf-8"), role="prediction", name="your answer")
        except (evaluator.CsvError, evaluator.FatalError) as exc:
            raise ReviewError(f"result_csv: {exc}") from exc
        files = self.files(fold)
        evidence = _evidence(body.get("evidence"), files, require=True)
        semantics = body.get("semantics")
        if not isinstance(semantics, dict) or not str(semantics.get("grain", "")).strip():
            raise ReviewError(
                "semantics: describe at least the grain (what one answer row stands for); "
                "the other fields (" + ", ".join(SEMANTICS_FIELDS[1:]) + ") are optional"
            )
        unknown = set(semantics) - set(SEMANTICS_FIELDS)
        if unknown:
            raise ReviewError(f"semantics: unknown fields {sorted(unknown)}")
        confidence = body.get("confidence")
        if (
            not isinstance(confidence, int)
            or isinstance(confidence, bool)
            or not 1 <= confidence <= 5
        ):
            raise ReviewError("confidence: an integer from 1 (guess) to 5 (certain)")
        payload = {
            "reviewer": user.name,
            "result": {"header": list(table.header), "rows": [list(r) for r in table.rows]},
            "result_sha256": sha256(raw.encode("utf-8")),
            "evidence": evidence,
            "semantics": {k: str(v) for k, v in semantics.items()},
            "issues": _issues(body.get("issues")),
            "confidence": confidence,
            "rationale": str(body.get("rationale") or ""),
        }
        fold = self._append(user, task_id, "phase1_submitted", payload)
        return {"locked": True, "state": str(fold.state)}

    def _phase2_payload(
        self, user: User, task_id: str, body: Mapping[str, Any]
    ) -> tuple[TaskFold, dict[str, Any], list[dict[str, Any]]]:
        """Validate a phase-2 body; the payload and the contradictions it would record."""
        import evaluator

        fold = self._reviewer_fold(user, task_id)
        if not fold.phase1_locked(user.name):
            raise ReviewError(f"{task_id}: lock your phase-1 answer first", status=409)
        if fold.phase2_locked(user.name):
            raise ReviewError(f"{task_id}: your phase-2 verification is locked", status=409)
        verdict = _choice(body.get("verdict"), Verdict, "verdict")
        disposition = _choice(body.get("disposition"), Disposition, "disposition")
        header, rows = self.gold(fold)
        config = _author_config(body.get("config"), task_id, header)
        try:
            parsed = evaluator.parse_config(config, source="config")
            evaluator.evaluate_rows(
                gold_header=header,
                gold_rows=rows,
                prediction_header=header,
                prediction_rows=rows,
                config=parsed,
            )
        except evaluator.FatalError as exc:
            raise ReviewError(f"config: {_user_terms(str(exc))}") from exc
        authored = evaluator.config.config_to_dict(parsed)
        payload: dict[str, Any] = {
            "reviewer": user.name,
            "verdict": verdict,
            "disposition": disposition,
            "config": authored,
            "issues": _issues(body.get("issues")),
            "rationale": str(body.get("rationale") or ""),
        }
        rec1 = fold.phase1_record(user.name)
        assert rec1 is not None and rec1.phase1 is not None
        found = contradiction(header, rows, rec1.phase1["result"], authored, verdict)
        warnings = (
            [{"reviewer": user.name, **found, "text": contradiction_text("you", found)}]
            if found
            else []
        )
        return fold, payload, warnings

    def check_phase2(self, user: User, task_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """What locking this phase-2 body would record, without locking (the warnings)."""
        _, _, warnings = self._phase2_payload(user, task_id, body)
        return {"warnings": warnings}

    def submit_phase2(self, user: User, task_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and lock a verdict, a disposition and an independently written config.

        A Match over a blind answer that the evaluator scores wrong under the submitted
        config is locked (the reviewer confirmed it) with the contradiction recorded.
        """
        _, payload, warnings = self._phase2_payload(user, task_id, body)
        if warnings:
            payload["warnings"] = [w["text"] for w in warnings]
        fold = self._append(user, task_id, "phase2_submitted", payload)
        return {"locked": True, "state": str(fold.state), "warnings": warnings}

    def post_message(self, user: User, task_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Add to the discussion; a reviewer's message cites at least one location."""
        fold = self._visible_fold(user, task_id)
        text = str(body.get("text") or "").strip()
        if not text:
            raise ReviewError("text: the message is empty")
        citations = _evidence(
            body.get("citations"), self.files(fold), require=user.role == Role.REVIEWER, light=True
        )
        payload = {"text": text, "citations": citations, "role": str(user.role)}
        self._append(user, task_id, "message", payload)
        return {"posted": True}

    # ---- repair and decisions ----------------------------------------------------------
    def repair(self, user: User, task_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Store a minimal repair as a new version; the same reviewers recheck it."""
        import evaluator

        if user.role not in (Role.REPAIRER, Role.ADMIN):
            raise _forbid("repairs are made by repairers and administrators")
        fold = self.fold(task_id)
        if fold.state != TaskState.ADJUDICATION:
            raise ReviewError(
                f"{task_id}: repairs follow adjudication (state {fold.state})", status=409
            )
        scope = body.get("scope")
        if (
            not isinstance(scope, list)
            or not scope
            or any(s not in REPAIR_SCOPES for s in scope)
            or len(set(scope)) != len(scope)
        ):
            raise ReviewError(f"scope: a non-empty list out of {', '.join(REPAIR_SCOPES)}")
        reason = str(body.get("reason") or "").strip()
        if not reason:
            raise ReviewError("reason: a repair states its reason")
        for key, part in (
            ("question", "question"),
            ("files", "workspace"),
            ("gold_csv", "gold"),
            ("config", "config"),
        ):
            if (key in body) != (part in scope):
                raise ReviewError(
                    f"{key}: a repair changes exactly its scope ({part} is "
                    f"{'in' if part in scope else 'not in'} the scope)"
                )
        cur = fold.current
        payload: dict[str, Any] = {"reason": reason, "scope": list(scope)}
        if "question" in scope:
            q = str(body["question"]).strip()
            if not q or q == cur.question:
                raise ReviewError("question: the repaired question is empty or unchanged")
            payload["question"] = q
        if "workspace" in scope:
            payload["files"] = self._repair_files(fold, body["files"])
        gold_header, _ = self.gold(fold)
        if "gold" in scope:
            raw = body["gold_csv"]
            if not isinstance(raw, str):
                raise ReviewError("gold_csv: the repaired gold as CSV text")
            try:
                table = evaluator.read_csv(raw.encode("utf-8"), role="gold")
            except (evaluator.CsvError, evaluator.FatalError) as exc:
                raise ReviewError(f"gold_csv: {exc}") from exc
            sha = sha256(raw.encode("utf-8"))
            if sha == cur.gold_sha256:
                raise ReviewError("gold_csv: unchanged")
            self.db.put_blob(sha, raw.encode("utf-8"))
            payload["gold_sha256"] = sha
            gold_header = list(table.header)
        if "config" in scope:
            config = _author_config(body["config"], task_id, gold_header)
            try:
                parsed = evaluator.parse_config(config, source="config")
            except evaluator.FatalError as exc:
                raise ReviewError(f"config: {exc}") from exc
            payload["config"] = evaluator.config.config_to_dict(parsed)
            if canonical_config(payload["config"]) == canonical_config(cur.config):
                raise ReviewError("config: unchanged")
        fold = self._append(user, task_id, "repair", payload)
        return {"version": fold.version, "state": str(fold.state)}

    def _repair_files(self, fold: TaskFold, files: object) -> dict[str, str | None]:
        if not isinstance(files, dict) or not files:
            raise ReviewError("files: an object path -> base64 content (or null to delete)")
        current = self.files(fold)
        out: dict[str, str | None] = {}
        for path, b64 in files.items():
            rel = clean_path(path)
            if b64 is None:
                if not current.exists(rel):
                    raise ReviewError(f"files: {rel} is not in the workspace; nothing to delete")
                out[rel] = None
                continue
            try:
                content = base64.b64decode(str(b64), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ReviewError(f"files: {rel}: content is not base64 ({exc})") from exc
            if current.exists(rel) and current.read(rel) == content:
                raise ReviewError(f"files: {rel} is unchanged (repairs are minimal)")
            sha = sha256(content)
            self.db.put_blob(sha, content)
            out[rel] = sha
        return out

    def accept(self, user: User, task_id: str) -> dict[str, Any]:
        """Record the final accept decision for a task in consensus."""
        if user.role != Role.ADMIN:
            raise _forbid("only administrators accept tasks")
        fold = self.fold(task_id)
        config = fold.agreed_config()
        if config is None:
            ways = ", ".join(w for w in exits(fold) if w != "accept") or "none"
            raise ReviewError(
                f"{task_id}: not in consensus (state {fold.state.replace('_', ' ')}); "
                f"what can be done: {ways}",
                status=409,
            )
        self._append(user, task_id, "accepted", {"config": config})
        return {"state": str(TaskState.ACCEPTED)}

    def adjudicate(self, user: User, task_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Accept the builder's version when only the reviewers' own configs differ.

        The builder's config becomes the agreed one; the event records the reason and the
        discussion messages it rests on.
        """
        if user.role != Role.ADMIN:
            raise _forbid("only administrators decide adjudications")
        reason = str(body.get("reason") or "").strip()
        if not reason:
            raise ReviewError("reason: say why the builder's config is the right one")
        cited = body.get("messages") or []
        if not isinstance(cited, list) or not all(
            isinstance(m, int) and not isinstance(m, bool) for m in cited
        ):
            raise ReviewError("messages: the numbers of the discussion messages you rely on")
        fold = self.fold(task_id)
        if not fold.config_only_disagreement():
            raise ReviewError(
                f"{task_id}: the reviewers disagree on more than their configs; repair the "
                "task, send it back to phase 2, or remove it",
                status=409,
            )
        self._append(user, task_id, "adjudicated", {"reason": reason, "messages": cited})
        return {"state": str(TaskState.ACCEPTED)}

    def reopen(self, user: User, task_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Send a task in adjudication back to phase 2 as a new version, content unchanged."""
        if user.role != Role.ADMIN:
            raise _forbid("only administrators send tasks back to phase 2")
        reason = str(body.get("reason") or "").strip()
        if not reason:
            raise ReviewError("reason: say what the reviewers should look at again")
        fold = self._append(user, task_id, "reopened", {"reason": reason})
        return {"version": fold.version, "state": str(fold.state)}

    def version_diff_view(self, user: User, task_id: str, version: int) -> dict[str, Any]:
        """What version ``version`` changed from the one before (reviewers: config keys only)."""
        fold = self._visible_fold(user, task_id)
        if user.role == Role.REVIEWER and not fold.ever_completed(user.name):
            raise _forbid(f"{task_id}: versions are shown after you lock both phases")
        if version not in fold.versions or version < 2:
            raise ReviewError(f"version: 2..{fold.version} (a repaired version)", status=404)

        def side(n: int) -> dict[str, Any]:
            v = fold.versions[n]
            header, rows = self.gold(fold, n)
            return {
                "question": v.question,
                "gold_header": header,
                "gold_rows": rows,
                "config": v.config,
                "overlay": v.overlay,
            }

        diff = version_diff(
            side(version - 1), side(version), config_values=user.role != Role.REVIEWER
        )
        v = fold.versions[version]
        return {
            "from": version - 1,
            "to": version,
            "scope": list(v.scope),
            "reason": v.reason,
            "by": v.repaired_by,
            **diff,
        }

    def remove(self, user: User, task_id: str, reason: str) -> dict[str, Any]:
        """Remove a task with an explicit reason."""
        if user.role != Role.ADMIN:
            raise _forbid("only administrators remove tasks")
        if not str(reason or "").strip():
            raise ReviewError("reason: a removal states its reason")
        self._append(user, task_id, "removed", {"reason": str(reason).strip()})
        return {"state": str(TaskState.REMOVED)}

    def assign(self, user: User | str, task_id: str, reviewer: str) -> dict[str, Any]:
        """Assign one reviewer to a task (administrators)."""
        if isinstance(user, User) and user.role != Role.ADMIN:
            raise _forbid("only administrators assign reviewers")
        roles = dict(self.db.query("SELECT name, role FROM review_users"))
        if roles.get(reviewer) != Role.REVIEWER:
            raise ReviewError(f"{reviewer}: no reviewer of that name (add one with `review user`)")
        fold = self._append(user, task_id, "assigned", {"reviewer": reviewer})
        return {"reviewers": fold.reviewers, "state": str(fold.state)}

    def unassign(self, user: User | str, task_id: str, reviewer: str) -> dict[str, Any]:
        """Replace a pending assignment: drop a reviewer before any answer was submitted."""
        if isinstance(user, User) and user.role != Role.ADMIN:
            raise _forbid("only administrators change assignments")
        fold = self._append(user, task_id, "unassigned", {"reviewer": reviewer})
        return {"reviewers": fold.reviewers, "state": str(fold.state)}

    def assign_balanced(
        self, *, per_task: int = MIN_REVIEWERS, reviewers: Sequence[str] | None = None
    ) -> dict[str, list[str]]:
        """Assign reviewers to every pending task, always picking the least-loaded ones.

        Returns:
            task id -> the reviewers added to it.
        """
        if per_task < MIN_REVIEWERS:
            raise ReviewError(f"per-task: at least {MIN_REVIEWERS} reviewers review each task")
        pool = sorted(u.name for u in self.users() if u.role == Role.REVIEWER)
        if reviewers:
            missing = sorted(set(reviewers) - set(pool))
            if missing:
                raise ReviewError(f"reviewers {missing} are not reviewer accounts")
            pool = sorted(reviewers)
        if len(pool) < per_task:
            raise ReviewError(f"{len(pool)} reviewers in the pool; {per_task} are needed per task")
        folds = {tid: self.fold(tid) for tid in self.task_ids()}
        load = {name: 0 for name in pool}
        for f in folds.values():
            for name in f.reviewers:
                if name in load:
                    load[name] += 1
        added: dict[str, list[str]] = {}
        for tid, f in folds.items():
            if f.state != TaskState.PENDING or f.started:
                continue
            need = per_task - len(f.reviewers)
            for _ in range(max(0, need)):
                choice = min((n for n in pool if n not in f.reviewers), key=lambda n: (load[n], n))
                f = self._append("admin", tid, "assigned", {"reviewer": choice})
                load[choice] += 1
                added.setdefault(tid, []).append(choice)
        return added

    # ---- overview ------------------------------------------------------------------
    def status(self) -> list[dict[str, Any]]:
        """Where every task stands."""
        out = []
        for tid in self.task_ids():
            f = self.fold(tid)
            locked = [n for n in f.reviewers if f.phase2_locked(n)]
            out.append(
                {
                    "task_id": tid,
                    "state": str(f.state),
                    "version": f.version,
                    "reviewers": list(f.reviewers),
                    "locked": locked,
                }
            )
        return out


def _record_dict(rec: Any) -> dict[str, Any]:
    return {
        "reviewer": rec.reviewer,
        "version": rec.version,
        "phase1": rec.phase1,
        "phase1_at": rec.phase1_at,
        "phase2": rec.phase2,
        "phase2_at": rec.phase2_at,
    }


def _choice(value: object, enum: Any, key: str) -> str:
    try:
        return str(enum(value).value)
    except ValueError:
        raise ReviewError(f"{key}: one of {', '.join(e.value for e in enum)}") from None


def _issues(value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ReviewError("issues: a list of flags such as 'question.ambiguous_grain'")
    unknown = sorted(set(value) - ISSUE_FLAGS)
    if unknown:
        raise ReviewError(f"issues: unknown flags {unknown} (see /api/vocabulary)")
    return sorted(set(value))


def _evidence(
    value: object, files: VersionFiles, *, require: bool, light: bool = False
) -> list[dict[str, Any]]:
    """Validate evidence anchors (or, ``light``, discussion citations: path + anchor)."""
    name = "citations" if light else "evidence"
    if value is None:
        value = []
    if not isinstance(value, list):
        raise ReviewError(f"{name}: a list of anchors")
    if require and not value:
        raise ReviewError(
            f"{name}: at least one anchor (artifact path, modality, anchor, fact, role)"
            if not light
            else f"{name}: cite at least one workspace location"
        )
    out = []
    for i, item in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(item, dict):
            raise ReviewError(f"{where}: an object")
        path = item.get("path")
        if light and path == "question":
            out.append({"path": "question", "anchor": str(item.get("anchor") or "")})
            continue
        try:
            rel = clean_path(path)
        except ReviewError as exc:
            raise ReviewError(f"{where}.path: {exc}") from exc
        if not files.exists(rel):
            raise ReviewError(f"{where}.path: {rel} is not a file of this task version")
        modality = modality_of(rel)
        anchor = str(item.get("anchor") or "").strip()
        if light:
            out.append({"path": rel, "anchor": anchor})
            continue
        if item.get("modality") != modality:
            raise ReviewError(f"{where}.modality: {rel} is {modality}, not {item.get('modality')}")
        kind = item.get("anchor_kind")
        if kind not in ANCHOR_KINDS:
            raise ReviewError(f"{where}.anchor_kind: one of {', '.join(ANCHOR_KINDS)}")
        if not anchor:
            raise ReviewError(f"{where}.anchor: the row, key, section, page or timestamp")
        try:
            check_anchor(files, rel, modality, str(kind), anchor)
        except ReviewError as exc:
            raise ReviewError(f"{where}.anchor: {exc}") from None
        fact = str(item.get("fact") or "").strip()
        if not fact:
            raise ReviewError(f"{where}.fact: the fact this evidence supports")
        role = item.get("role")
        if role not in EVIDENCE_ROLES:
            raise ReviewError(f"{where}.role: one of {', '.join(EVIDENCE_ROLES)}")
        out.append(
            {
                "path": rel,
                "modality": modality,
                "anchor_kind": kind,
                "anchor": anchor,
                "fact": fact,
                "role": role,
            }
        )
    return out


def _author_config(value: object, task_id: str, header: Sequence[str]) -> dict[str, Any]:
    """A reviewer's config object, with identity fields (task id, gold names) set here."""
    if not isinstance(value, dict):
        raise ReviewError("config: an object with order_sensitive and columns")
    columns = value.get("columns")
    if not isinstance(columns, list) or len(columns) != len(header):
        raise ReviewError(f"config.columns: one entry per gold column ({len(header)})")
    fixed = []
    for j, col in enumerate(columns):
        if not isinstance(col, dict):
            raise ReviewError(f"config.columns[{j}]: an object")
        fixed.append({**col, "gold_index": j, "gold_name": header[j]})
    return {
        "schema_version": "1.0",
        "task_id": task_id,
        "order_sensitive": value.get("order_sensitive"),
        "columns": fixed,
    }


def _diagnostic_config(fold: TaskFold, header: Sequence[str]) -> dict[str, Any]:
    """Before a reviewer wrote a config: every column as text, rows unordered."""
    return {
        "schema_version": "1.0",
        "task_id": fold.task_id,
        "order_sensitive": False,
        "columns": [
            {"gold_index": j, "gold_name": h, "type": "text"} for j, h in enumerate(header)
        ],
    }


def _user_terms(message: str) -> str:
    """An evaluator message without the in-memory source name it was parsed under."""
    return message.replace("<memory>", "").replace("config: ", "").strip()


__all__ = ["SESSION_HOURS", "ReviewService", "User", "now_utc"]
