"""The submission bundle of one agent's run: what the DataSpace leaderboard asks teams to send.

The bundle is the official baseline's batch run directory (what ``dataspace-baselines batch
--run-root`` writes), plus our manifest::

    <out>/experiment.json                     {"fingerprint", "identity"} of the run
    <out>/batch_summary.json                  the official batch summary: statuses, usage,
                                              one record per task
    <out>/predictions/task_N/prediction.csv   evaluator-ready copies (submitted attempts)
    <out>/tasks/task_N/run_<n>/               the attempt as the run stored it: events.jsonl
                                              (the raw trace), run.json, result.json,
                                              output/prediction.csv, infra/try_<k>.json ...
    <out>/export.json                         the exact configuration (agent, model, harness
                                              settings, limits, sandbox, runtime manifests),
                                              the fingerprint, the task counts, the run's own
                                              scores and the SHA-256 of every other file

Every task of the run is in ``tasks/``, scored or not. As in the official runner, only a
submitted prediction is copied into ``predictions/`` (a draft left by an attempt that did
not submit never is); a task without one has no folder there and is listed in
``export.json`` under ``missing_predictions`` with its status and why. Scoring the bundle
with the official evaluator's command line gives the run's own scores::

    python -m evaluator --prediction-root <out>/predictions
        --gold-root <release>/output --config-root <release>/evaluation/configs

(one command line).

Credentials never enter a bundle: settings whose key names a secret are redacted, user
info is dropped from URIs, and every file is scanned for the values of the controller's
credential variables (each model's ``key_env`` and any variable named like a key, token,
secret or password); a match stops the export before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataspace.errors import ConfigError, NotFoundError, StoreError

logger = logging.getLogger(__name__)

EXPORT_SCHEMA_VERSION = "1.0"
MANIFEST_NAME = "export.json"
EXPERIMENT_NAME = "experiment.json"  # the official batch runner's identity file
BATCH_SUMMARY_NAME = "batch_summary.json"
SUBMITTED = "submitted"
# statuses with no finished attempt: pending in the official summary's terms
_PENDING = ("infrastructure_error", "not_scheduled")
REDACTED = "<redacted>"
_SECRET_KEY = re.compile(
    r"(api[_-]?key|secret|token|passw(or)?d|authori[sz]ation|credential|access[_-]?key)",
    re.IGNORECASE,
)
_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_MIN_SECRET = 8  # shorter values are too common to mean anything
_MIN_GENERIC_SECRET = 16


@dataclass(frozen=True, kw_only=True)
class MissingPrediction:
    """A task of the bundle without a prediction, and why."""

    task_id: str
    status: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class Bundle:
    """What ``export_bundle`` wrote.

    Attributes:
        out: the bundle folder.
        run_id: the run.
        agent: the agent exported.
        attempt: the attempt number exported for every task.
        fingerprint: the run's fingerprint.
        tasks: every task of the bundle, in task order.
        scored: the tasks with gold and a config.
        predictions: the tasks with ``predictions/task_N/prediction.csv``.
        missing: the tasks without one.
        passed: scored tasks whose attempt passed.
        files: how many files the bundle holds.
        selected: whether the run covered a selection of the release's tasks (``tasks:``).
    """

    out: Path
    run_id: str
    agent: str
    attempt: int
    fingerprint: str
    tasks: tuple[str, ...]
    scored: tuple[str, ...]
    predictions: tuple[str, ...]
    missing: tuple[MissingPrediction, ...]
    passed: int
    files: int
    selected: bool = False

    @property
    def accuracy(self) -> float:
        """Passed over scored tasks, as the official evaluator counts (0.0 for none)."""
        return self.passed / len(self.scored) if self.scored else 0.0

    def describe(self) -> list[str]:
        """Lines for people: what the bundle holds and how to score it."""
        from dataspace.release import describe_counts

        lines = [
            f"bundle: {self.out} (run {self.run_id}, agent {self.agent}, attempt "
            f"{self.attempt}, fingerprint {self.fingerprint[:12]})",
            f"tasks: {describe_counts(len(self.scored), len(self.tasks))}",
            f"predictions: {len(self.predictions)} of {len(self.tasks)} tasks; "
            f"{len(self.missing)} without one (listed in {MANIFEST_NAME})",
            f"scores: {self.passed}/{len(self.scored)} scored tasks passed "
            f"({100 * self.accuracy:.2f}%)",
            f"files: {self.files}",
        ]
        if self.selected:
            lines.append(
                "note: the run covered a selection of the release's tasks (tasks: in its "
                "spec); the evaluator scores every config of the release, so a scored task "
                "outside the run counts as a missing prediction"
            )
        for m in self.missing[:10]:
            lines.append(f"  no prediction: {m.task_id} ({m.status}: {m.reason})")
        if len(self.missing) > 10:
            lines.append(f"  ... and {len(self.missing) - 10} more")
        return lines


def export_bundle(
    run: str,
    *,
    agent: str,
    out: Path,
    attempt: int = 1,
    environ: Mapping[str, str] | None = None,
) -> Bundle:
    """Write the submission bundle of ``agent`` in the run folder ``run``.

    Args:
        run: the run folder, a path or store URI (``file:///x/store/runs/r1``,
            ``s3://bucket/prefix/runs/r1``).
        agent: the agent's name in the run spec.
        out: the bundle folder to create; it must not exist or be empty.
        attempt: which attempt of each task to export.
        environ: where the credential variables are read (default: ``os.environ``).

    Raises:
        ConfigError: not a finished run folder, an unknown agent or attempt, an existing
            output folder, or a credential found in a file of the run.
    """
    from dataspace.store import open_store

    env = os.environ if environ is None else environ
    out = Path(out).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out}: already exists; give a new --out folder or remove it")
    store = open_store(run.rstrip("/") or run)
    spec_doc = _read_json(store, "spec.json", run)
    rows = _agent_rows(store, run, agent, attempt)
    spec = spec_doc.get("spec") or {}
    agent_spec = next((a for a in spec.get("agents", []) if a.get("name") == agent), None)
    if agent_spec is None:
        raise ConfigError(f"{run}: spec.json has no agent {agent!r}")

    with _BundleWriter(out, _secret_values(spec, env)) as bundle:
        records: list[dict[str, Any]] = []
        run_records: dict[str, dict[str, Any]] = {}
        missing: list[MissingPrediction] = []
        predictions: list[str] = []
        for row in rows:
            task_id = str(row["task_id"])
            rundir = f"tasks/{task_id}/run_{attempt}"
            prefix = f"attempts/{agent}/{task_id}/{attempt}/"
            keys = _list(store, prefix)
            record: dict[str, Any] | None = None
            pred: bytes | None = None
            for key in keys:
                rel = key[len(prefix) :]
                data = store.get_bytes(key)
                bundle.put(f"{rundir}/{rel}", data)
                if rel == "run.json":
                    record = _run_record(data)
                elif rel == "output/prediction.csv":
                    pred = data
            if not keys:  # never run (skipped, not scheduled): the run's row is its record
                bundle.put(f"{rundir}/result.json", _dumps(row))
            if record is not None:
                run_records[task_id] = record
            status = str(row["status"])
            if status == SUBMITTED and pred is not None:
                bundle.put(f"predictions/{task_id}/prediction.csv", pred)
                predictions.append(task_id)
            else:
                why = _why_missing(row, record, pred)
                missing.append(MissingPrediction(task_id=task_id, status=status, reason=why))
            if status not in _PENDING:
                records.append(_batch_record(row, record, rundir, task_id in predictions))

        scored = [str(r["task_id"]) for r in rows if _is_scored(r)]
        passed = [str(r["task_id"]) for r in rows if _is_scored(r) and r.get("passed") is True]
        fingerprint = str(spec_doc.get("fingerprint", ""))
        identity = spec_doc.get("identity") or {}
        bundle.put(EXPERIMENT_NAME, _dumps({"fingerprint": fingerprint, "identity": identity}))
        summary = _batch_summary(spec, agent_spec, len(rows), records)
        bundle.put(BATCH_SUMMARY_NAME, _dumps(summary))
        task_ids = [str(r["task_id"]) for r in rows]
        run_id = str(spec.get("run_id") or rows[0]["run_id"])
        manifest = {
            "schema_version": EXPORT_SCHEMA_VERSION,
            "run_id": run_id,
            "source": _scrub_text(str(store.uri).rstrip("/")),
            "agent": agent,
            "attempt": attempt,
            "fingerprint": fingerprint,
            "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "configuration": _configuration(spec, agent_spec, identity, run_records),
            "tasks": {
                "count": len(task_ids),
                "scored": len(scored),
                "unscored": len(task_ids) - len(scored),
                "scored_ids": scored,
                "unscored_ids": [t for t in task_ids if t not in set(scored)],
            },
            "predictions": len(predictions),
            "missing_predictions": [
                {"task_id": m.task_id, "status": m.status, "reason": m.reason} for m in missing
            ],
            "scores": {
                "metric": "task_accuracy",
                "task_count": len(scored),
                "passed_task_count": len(passed),
                "task_accuracy": len(passed) / len(scored) if scored else 0.0,
                "tasks": {t: t in set(passed) for t in scored},
            },
            "files": dict(sorted(bundle.digests.items())),
        }
        bundle.put(MANIFEST_NAME, _dumps(manifest))
    logger.info("exported %s/%s to %s (%d files)", run_id, agent, out, len(bundle.digests))
    return Bundle(
        out=out,
        run_id=run_id,
        agent=agent,
        attempt=attempt,
        fingerprint=fingerprint,
        tasks=tuple(task_ids),
        scored=tuple(scored),
        predictions=tuple(predictions),
        missing=tuple(missing),
        passed=len(passed),
        files=len(bundle.digests),
        selected=spec.get("tasks") is not None,
    )


# ---- reading the run ---------------------------------------------------------------------------


def _read_json(store: Any, key: str, run: str) -> dict[str, Any]:
    try:
        obj = json.loads(store.get_bytes(key))
    except NotFoundError:
        raise ConfigError(
            f"{store.url_for(key)}: missing; give a run folder (<store>/runs/<run_id>)"
        ) from None
    except (StoreError, ValueError) as exc:
        raise ConfigError(f"{store.url_for(key)}: unreadable ({exc})") from exc
    if not isinstance(obj, dict):
        raise ConfigError(f"{store.url_for(key)}: not a JSON object")
    return obj


def _agent_rows(store: Any, run: str, agent: str, attempt: int) -> list[dict[str, Any]]:
    from dataspace.release import task_number
    from dataspace.runs.results_log import RESULTS_NAME, load_results

    key = RESULTS_NAME
    try:
        df = load_results(store, "")
    except NotFoundError:
        raise ConfigError(
            f"{store.url_for(key)}: missing; the run has not finished (rerun the same "
            "`dataspace run` command to finish it)"
        ) from None
    except StoreError as exc:
        raise ConfigError(f"{store.url_for(key)}: unreadable ({exc})") from exc
    agents = sorted(map(str, df["agent"].dropna().unique()))
    if agent not in agents:
        raise ConfigError(f"{run}: no agent {agent!r} in this run (agents: {', '.join(agents)})")
    mine = df[df["agent"] == agent]
    attempts = sorted(int(a) for a in mine["attempt"].dropna().unique())
    mine = mine[mine["attempt"] == attempt]
    if mine.empty:
        raise ConfigError(
            f"{run}: agent {agent!r} has no attempt {attempt} (attempts: "
            f"{', '.join(map(str, attempts))}); pass --attempt"
        )
    rows = [{k: (None if _is_na(v) else v) for k, v in r.items()} for r in mine.to_dict("records")]
    return sorted(rows, key=lambda r: task_number(str(r["task_id"])))


def _is_na(value: Any) -> bool:
    try:
        return bool(value is None or (isinstance(value, float) and value != value))
    except (TypeError, ValueError):
        return False


def _is_scored(row: Mapping[str, Any]) -> bool:
    """A row's task is scored (older results without the column: it has a verdict)."""
    scored = row.get("scored")
    if scored is None:
        return row.get("verdict") is not None or row.get("passed") is not None
    return bool(scored)


def _list(store: Any, prefix: str) -> list[str]:
    try:
        return sorted(store.list(prefix))
    except NotFoundError:
        return []


def _run_record(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        obj = json.loads(data)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _why_missing(
    row: Mapping[str, Any], record: Mapping[str, Any] | None, pred: bytes | None
) -> str:
    status = str(row["status"])
    if status == SUBMITTED:
        problem = (record or {}).get("prediction_problem")
        return str(problem or "submitted, but no prediction file was collected")
    if pred is not None:
        return "the attempt did not submit; its draft prediction is kept in tasks/ only"
    return str(row.get("error") or "no prediction")


# ---- the official batch files ------------------------------------------------------------------


def _batch_record(
    row: Mapping[str, Any], record: Mapping[str, Any] | None, rundir: str, has_prediction: bool
) -> dict[str, Any]:
    """One task's entry in ``batch_summary.json`` (the official ``result_payload`` keys)."""
    rec = record or {}
    usage = rec.get("usage") if isinstance(rec.get("usage"), Mapping) else {}
    wall = rec.get("wall_seconds", row.get("wall_seconds")) or 0.0
    return {
        "task_id": str(row["task_id"]),
        "status": str(row["status"]),
        "prediction_path": f"{rundir}/output/prediction.csv" if has_prediction else None,
        "model_turns": int(rec.get("model_turns") or row.get("model_turns") or 0),
        "tool_actions": int(rec.get("tool_actions") or row.get("tool_actions") or 0),
        "wall_time_seconds": round(float(wall), 6),
        "usage": dict(usage or {}),
        "error": rec.get("error", row.get("error")),
        "run_dir": rundir,
    }


def _batch_summary(
    spec: Mapping[str, Any],
    agent_spec: Mapping[str, Any],
    task_count: int,
    records: list[dict[str, Any]],
) -> dict[str, Any]:
    """``batch_summary.json`` with the official keys (pending: attempts with no outcome)."""
    status_counts: dict[str, int] = {}
    usage: dict[str, int] = {}
    for r in records:
        status_counts[r["status"]] = status_counts.get(r["status"], 0) + 1
        for k, v in r["usage"].items():
            if isinstance(v, int) and not isinstance(v, bool):
                usage[k] = usage.get(k, 0) + v
    model = agent_spec.get("model") or {}
    return {
        "input_root": str(Path(str(spec.get("release", ""))) / "input"),
        "task_count": task_count,
        "concurrency": spec.get("concurrency"),
        "finalized_task_count": len(records),
        "pending_task_count": task_count - len(records),
        "status_counts": dict(sorted(status_counts.items())),
        "wall_time_seconds": round(sum(float(r["wall_time_seconds"]) for r in records), 6),
        "usage": dict(sorted(usage.items())),
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        "tasks": records,
        "model": model.get("id") if isinstance(model, Mapping) else None,
        "harness": agent_spec.get("harness"),
    }


def _configuration(
    spec: Mapping[str, Any],
    agent_spec: Mapping[str, Any],
    identity: Mapping[str, Any],
    run_records: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """The exact configuration of the exported agent, credential-free."""
    run_level = {k: v for k, v in spec.items() if k not in ("agents",)}
    return _redact(
        {
            **run_level,
            "agent": dict(agent_spec),
            "release_fingerprint": identity.get("release_fingerprint"),
            "runtime": _runtimes(run_records),
        }
    )


_SANDBOX_KEYS = (
    "backend",
    "image",
    "enforcement",
    "network",
    "user_namespace",
    "seccomp",
    "uid",
    "limits",
)
_RUNTIME_WORDS = ("runtime", "manifest", "workbench")


def _runtimes(run_records: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The distinct runtimes the attempts recorded (sandbox and manifest), with their tasks.

    An attempt describes its sandbox in ``run.json``; what identifies the runtime is kept
    (backend, image, enforcement, network, limits) and any runtime manifest the attempt or
    its sandbox recorded (a key naming a runtime, manifest or workbench). Per-attempt
    details (ids, pids, timings) stay in each task's ``run.json``.
    """
    seen: dict[str, dict[str, Any]] = {}
    for task_id, rec in run_records.items():
        raw = rec.get("sandbox")
        sandbox: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        body: dict[str, Any] = {
            "sandbox": {k: sandbox[k] for k in _SANDBOX_KEYS if k in sandbox},
            "manifest": {
                k: v
                for where in (rec, sandbox)
                for k, v in where.items()
                if any(w in k for w in _RUNTIME_WORDS)
            }
            or None,
        }
        key = json.dumps(body, sort_keys=True, default=str)
        seen.setdefault(key, {**body, "tasks": []})["tasks"].append(task_id)
    return list(seen.values())


# ---- credentials -------------------------------------------------------------------------------


def _redact(obj: Any) -> Any:
    """Replace values under secret-looking keys and drop user info from URIs.

    >>> _redact({"headers": {"Authorization": "Bearer x"}, "key_env": "MY_KEY",
    ...          "url": "https://u:p@host/v1"})
    {'headers': {'Authorization': '<redacted>'}, 'key_env': 'MY_KEY', 'url': 'https://host/v1'}
    """
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            name = str(k)
            secret = _SECRET_KEY.search(name) and not name.endswith("_env")
            out[name] = REDACTED if secret and v not in (None, "") else _redact(v)
        return out
    if isinstance(obj, list | tuple):
        return [_redact(v) for v in obj]
    if isinstance(obj, str):
        return _scrub_text(obj)
    return obj


def _scrub_text(text: str) -> str:
    """Drop user info (``user:password@``) from any URI in ``text``.

    >>> _scrub_text("s3://bucket/runs/r1"), _scrub_text("https://me:pw@h/x")
    ('s3://bucket/runs/r1', 'https://h/x')
    """
    return _USERINFO.sub(r"\1", text)


def _secret_values(spec: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """Credential variable name -> value, for the variables set in ``env``."""
    keys = {
        str((a.get("model") or {}).get("key_env"))
        for a in spec.get("agents", [])
        if isinstance(a.get("model"), Mapping) and a["model"].get("key_env")
    }
    out = {}
    for n in sorted(keys | {n for n in env if _SECRET_ENV.search(n)}):
        v = env.get(n) or ""
        # a model key counts from 8 characters; other variables only when they look like a
        # secret (long, one word, not a path), so a value like "disabled" is not mistaken
        least = _MIN_SECRET if n in keys else _MIN_GENERIC_SECRET
        if len(v) >= least and not v.startswith("/") and not any(c.isspace() for c in v):
            out[n] = v
    return out


# ---- writing -----------------------------------------------------------------------------------


def _dumps(obj: Any) -> bytes:
    text = json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    return (text + "\n").encode()


class _BundleWriter:
    """Writes files into a hidden sibling of ``out`` and renames it into place at the end.

    Each file is checked for the credential values before it is written and its SHA-256
    recorded; on any error (a credential found included) the partial folder is removed.
    """

    def __init__(self, out: Path, secrets: Mapping[str, str]) -> None:
        self.out = out
        self.secrets = {name: value.encode() for name, value in secrets.items()}
        self.tmp = out.parent / f".{out.name}.partial-{uuid.uuid4().hex[:8]}"
        self.digests: dict[str, str] = {}

    def __enter__(self) -> _BundleWriter:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        (self.tmp / "predictions").mkdir(parents=True)  # the evaluator needs it, even empty
        return self

    def put(self, name: str, data: bytes) -> None:
        """Write one file of the bundle (``name`` relative to its root)."""
        for var, value in self.secrets.items():
            if value in data:
                raise ConfigError(
                    f"{name}: holds the value of ${var}; no bundle written (a credential "
                    "must never leave the controller: find how it reached the run's files)"
                )
        path = (self.tmp / name).resolve()
        if not path.is_relative_to(self.tmp.resolve()) or name in self.digests:
            raise ConfigError(f"{name}: not a valid file name for the bundle")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.digests[name] = hashlib.sha256(data).hexdigest()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        try:
            if self.out.exists():
                self.out.rmdir()  # checked empty before the export started
            os.rename(self.tmp, self.out)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise


__all__ = ["BATCH_SUMMARY_NAME", "MANIFEST_NAME", "Bundle", "MissingPrediction", "export_bundle"]
