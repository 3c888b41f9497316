"""Propose a primary root cause for every failed attempt of one agent in a run.

For each failed attempt (first attempt of each task by default) the auditor model gets the
question, the observable trace (tool calls and their outputs, model text; never hidden
reasoning), the submitted prediction, the reference result, the evaluation config and the
evaluator's symptom, and must answer with one JSON object: a subtype from Table 13, the
index of the trace event where the persistent divergence first appears, a counterfactual
correction and a short rationale. The answer is validated (known subtype, an event index
that exists); an invalid answer is sent back once with the errors, then left blank.
Without a model every proposal is blank, for a researcher to fill in.

The audit lives next to the run: ``<run>/audit/<agent>/audit.json``. Rerunning keeps every
proposal and confirmation already made and audits only what is new.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dataspace.ask import Rejection, ask, extract_json, retry_messages
from dataspace.errors import ConfigError, ReplyError
from dataspace.failure_taxonomy import STAGES, SUBTYPE_BY_CODE, SUBTYPES, symptom_of

logger = logging.getLogger(__name__)

AUDIT_SCHEMA_VERSION = "1.0"
MAX_EVENT_CHARS = 600
MAX_TABLE_ROWS = 30
MAX_ATTEMPTS = 2
"""Auditor attempts per failed attempt: an invalid answer is sent back once."""

SYSTEM_PROMPT = """You audit failed attempts of a data agent on the DataSpace benchmark.
Assign exactly one primary cause: the earliest observable divergence that conflicts with the
reference result, remains uncorrected, and determines the submitted result or prevents
submission. Exploratory errors the agent later corrects are not primary causes. Evaluator
outcomes (column-count mismatch, missing prediction) are symptoms, not causes.
Stages: Q task intent, D discovery, E extraction, G grounding, C computation,
M materialization (only when the trace already holds the correct target schema and internal
table), T termination (only when no earlier persistent Q/D/E/G/C error explains the failure).
Subtypes:
{subtypes}
Answer with one JSON object and nothing else:
{{"subtype": "M1", "event": <index of the trace event where the divergence first appears>,
  "counterfactual": "<the correction that would have led to the right answer>",
  "rationale": "<one or two sentences citing the event>"}}"""


@dataclass(frozen=True, kw_only=True)
class AuditOutcome:
    """What one audit call did.

    Attributes:
        path: where the audit file was written (a store URL).
        proposed: attempts given a model proposal now.
        blank: attempts left blank now (no model, or no valid answer).
        kept: attempts audited before (left as they were).
        usage: the auditor model's tokens and cost.
    """

    path: str
    proposed: int
    blank: int
    kept: int
    usage: dict[str, Any]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _clip(text: object, limit: int = MAX_EVENT_CHARS) -> str:
    s = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    return s if len(s) <= limit else s[: limit - 20] + f" …[{len(s) - limit + 20} more]"


def trace_steps(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The observable steps of a trace, numbered: what the agent did and what it saw.

    Reasoning fields are dropped (the audit does not use hidden chain of thought).
    """
    steps: list[dict[str, Any]] = []
    for i, ev in enumerate(events):
        kind = str(ev.get("type", ""))
        if kind in ("model_turn", "model_call"):
            msg: Mapping[str, Any] = ev
            resp = ev.get("response")
            if isinstance(resp, Mapping):
                choices = resp.get("choices")
                msg = (choices[0].get("message") or {}) if choices else resp
            if msg.get("content"):
                steps.append({"event": i, "kind": "assistant", "text": _clip(msg["content"])})
            for call in msg.get("tool_calls") or []:
                fn = call.get("function") or call
                text = f"{fn.get('name')}({fn.get('arguments')})"
                steps.append({"event": i, "kind": "tool_call", "text": _clip(text)})
        elif kind in ("tool_result", "tool"):
            out = ev.get("result", ev.get("stdout", ev.get("output", "")))
            if ev.get("stderr"):
                out = f"{out}\nstderr: {ev['stderr']}"
            steps.append({"event": i, "kind": "tool_result", "text": _clip(out)})
        elif kind in ("submit", "error", "attempt_end", "agent_end"):
            rest = {k: v for k, v in ev.items() if k not in ("t", "type")}
            steps.append({"event": i, "kind": kind, "text": _clip(rest)})
    return steps


def _table_text(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [",".join(header), *(",".join(r) for r in rows[:MAX_TABLE_ROWS])]
    if len(rows) > MAX_TABLE_ROWS:
        lines.append(f"... {len(rows) - MAX_TABLE_ROWS} more rows")
    return "\n".join(lines)


def build_prompt(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The auditor's messages for one failed attempt (its task id leads the user message)."""
    subtypes = "\n".join(f"{s.code} ({STAGES[s.stage]}): {s.definition}" for s in SUBTYPES)
    steps = "\n".join(f"[{s['event']}] {s['kind']}: {s['text']}" for s in item["steps"])
    user = (
        f"Failed attempt {item['task_id']} (attempt {item['attempt']}).\n"
        f"Question: {item['question']}\n"
        f"Evaluator symptom: {item['symptom']} ({item.get('error') or 'no detail'})\n"
        f"Evaluation config: {json.dumps(item['config'], ensure_ascii=False)}\n"
        f"Reference result:\n{item['gold']}\n"
        f"Submitted prediction:\n{item['prediction'] or '(none)'}\n"
        f"Trace (event index in brackets):\n{steps or '(empty)'}"
    )
    return [
        {"role": "system", "content": SYSTEM_PROMPT.format(subtypes=subtypes)},
        {"role": "user", "content": user},
    ]


def parse_proposal(text: str, event_ids: set[int]) -> tuple[dict[str, Any] | None, list[str]]:
    """Validate the auditor's answer; return the proposal or the list of problems.

    >>> parse_proposal('{"subtype": "M1", "event": 3, "counterfactual": "c", '
    ...                '"rationale": "r"}', {3})[0]["stage"]
    'M'
    >>> parse_proposal('{"subtype": "Z9", "event": 7}', {3})[1]
    ['subtype Z9 is not in the taxonomy', 'event 7 is not a trace event (known: 3)']
    """
    try:
        obj = extract_json(text, embedded=True)
    except ReplyError as exc:
        return None, [str(exc)]
    problems = _problems(obj, event_ids)
    return (None, problems) if problems else (_proposal(obj), [])


def _problems(obj: Mapping[str, Any], event_ids: set[int]) -> list[str]:
    problems = []
    code = str(obj.get("subtype", "")).strip().upper()
    if code not in SUBTYPE_BY_CODE:
        problems.append(f"subtype {code or '(missing)'} is not in the taxonomy")
    event = obj.get("event")
    if not isinstance(event, int) or isinstance(event, bool) or event not in event_ids:
        known = ", ".join(str(e) for e in sorted(event_ids)[:40]) or "none"
        problems.append(f"event {event} is not a trace event (known: {known})")
    return problems


def _proposal(obj: Mapping[str, Any]) -> dict[str, Any]:
    code = str(obj.get("subtype", "")).strip().upper()
    return {
        "stage": code[0],
        "subtype": code,
        "event": obj["event"],
        "counterfactual": str(obj.get("counterfactual") or ""),
        "rationale": str(obj.get("rationale") or ""),
    }


def _gold_and_prediction(
    release: Any, store: Any, prefix: str, row: Mapping[str, Any]
) -> tuple[str, str, Any]:
    import evaluator

    tid = str(row["task_id"])
    gold = evaluator.read_csv(release.gold_path(tid), role="gold")
    config = json.loads(release.config_path(tid).read_text(encoding="utf-8"))
    key = _key(prefix, f"attempts/{row['agent']}/{tid}/{row['attempt']}/output/prediction.csv")
    try:
        raw = store.get_bytes(key)
        pred = evaluator.read_csv(raw, role="prediction")
        pred_text = _table_text(pred.header, pred.rows)
    except Exception:  # a missing or unreadable prediction is itself the symptom
        pred_text = ""
    return _table_text(gold.header, gold.rows), pred_text, config


def run_audit(
    run: str,
    *,
    agent: str,
    release: str,
    client: Any | None = None,
    all_attempts: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> AuditOutcome:
    """Audit the failed attempts of ``agent`` in a run and write ``audit/<agent>/audit.json``.

    Args:
        run: the run folder (a path or store URI of ``runs/<run_id>``).
        agent: the agent's name in the run.
        release: the release the run used (gold, configs, questions).
        client: a metered LLM client (``dataspace.llm.MeteredClient``); None leaves every
            proposal blank.
        all_attempts: audit every failed attempt, not only each task's first.
        progress: called with (done, total) after each attempt.

    Raises:
        ConfigError: the run has no results, or no attempt of that agent.
    """
    from dataspace.errors import NotFoundError
    from dataspace.release import Release
    from dataspace.report.load import open_run, read_run

    source = open_run(run)
    data = read_run(source)
    df = data.results
    mine = df[df["agent"] == agent]
    if mine.empty:
        agents = sorted(str(a) for a in df["agent"].dropna().unique())
        raise ConfigError(f"{run}: no attempts of agent {agent!r} (agents: {', '.join(agents)})")
    rel = Release(release)
    failed = mine[
        (~mine["passed"].fillna(False).astype(bool)) & (mine["status"] != "infrastructure_error")
    ]
    if not all_attempts:
        failed = failed[failed["attempt"] == 1]
    store, prefix = source.store, source.prefix.strip("/")
    audit_key = _key(prefix, f"audit/{agent}/audit.json")
    try:
        existing = json.loads(store.get_bytes(audit_key))
    except NotFoundError:
        existing = {}
    items = {(i["task_id"], int(i["attempt"])): i for i in existing.get("items", [])}
    proposed = blank = kept = 0
    rows = failed.sort_values(["task_id", "attempt"]).to_dict("records")
    for n, row in enumerate(rows, 1):
        tid, att = str(row["task_id"]), int(row["attempt"])
        old = items.get((tid, att))
        if old is not None and (old.get("proposal") or client is None or old.get("confirmed")):
            kept += 1
            continue
        events = _read_events(store, prefix, row)
        steps = trace_steps(events)
        gold, prediction, config = _gold_and_prediction(rel, store, prefix, row)
        item: dict[str, Any] = {
            "task_id": tid,
            "attempt": att,
            "status": row.get("status"),
            "error_code": row.get("error_code"),
            "error": row.get("error"),
            "symptom": symptom_of(row.get("status"), row.get("error_code")),
            "question": rel.task(tid).question,
        }
        proposal = None
        if client is not None:
            proposal = _ask(
                client,
                {**item, "steps": steps, "gold": gold, "prediction": prediction, "config": config},
            )
        if proposal is not None:
            ev_step = next((s for s in steps if s["event"] == proposal["event"]), None)
            proposal["event_summary"] = ev_step["text"] if ev_step else ""
            proposal["model"] = getattr(getattr(client, "model", None), "id", None)
            proposal["at"] = _now()
            proposed += 1
        else:
            blank += 1
        item["proposal"] = proposal
        item["confirmed"] = old.get("confirmed") if old else None
        items[(tid, att)] = item
        if progress:
            progress(n, len(rows))
    usage = _usage(client)
    doc = {
        "schema_version": AUDIT_SCHEMA_VERSION,
        "run_id": data.run_id,
        "agent": agent,
        "release": str(rel.root),
        "updated_at": _now(),
        "auditor_usage": usage,
        "items": [items[k] for k in sorted(items, key=lambda k: (_num(k[0]), k[1]))],
    }
    store.put_bytes(audit_key, (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode())
    return AuditOutcome(
        path=str(store.url_for(audit_key)), proposed=proposed, blank=blank, kept=kept, usage=usage
    )


def auditor_client(models: str | None, model: str | None) -> Any | None:
    """The metered client of the auditor ``model`` named in the ``models`` file, or None.

    Raises:
        ConfigError: only one of the two is given, the file cannot be read, or it has no
            such model.
    """
    if not (model or models):
        return None
    if not (model and models):
        raise ConfigError("--models FILE and --model NAME go together")
    from dataspace.llm.client import MeteredClient
    from dataspace.llm.models import load_models

    known = load_models(models)
    if model not in known:
        raise ConfigError(f"{models}: no model {model!r} ({', '.join(known)})")
    return MeteredClient(known[model])


def propose_causes(
    run: str,
    *,
    agent: str,
    release: str | None,
    models: str | None = None,
    model: str | None = None,
    all_attempts: bool = False,
) -> AuditOutcome:
    """:func:`run_audit` with the auditor model named by a models file and a name.

    Without a model every proposal is left blank.

    Raises:
        ConfigError: no release, a model named incompletely or not found, or what
            :func:`run_audit` raises.
    """
    if not release:
        raise ConfigError("--release: the release the run used (gold, configs, questions)")
    return run_audit(
        run,
        agent=agent,
        release=release,
        client=auditor_client(models, model),
        all_attempts=all_attempts,
    )


def _key(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def _num(task_id: str) -> int:
    m = re.search(r"(\d+)$", task_id)
    return int(m.group(1)) if m else 0


def _read_events(store: Any, prefix: str, row: Mapping[str, Any]) -> list[dict[str, Any]]:
    from dataspace.errors import NotFoundError

    key = _key(prefix, f"attempts/{row['agent']}/{row['task_id']}/{row['attempt']}/events.jsonl")
    try:
        raw = store.get_bytes(key).decode("utf-8", errors="replace")
    except NotFoundError:
        return []
    out = []
    for line in raw.splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _ask(client: Any, item: Mapping[str, Any]) -> dict[str, Any] | None:
    messages = build_prompt(item)
    ids = {int(s["event"]) for s in item["steps"]}

    def attempt(rejections: tuple[Rejection, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
        reply = client.complete(retry_messages(messages, rejections, _feedback))
        try:
            return extract_json(reply.content or "", embedded=True), reply.message
        except ReplyError as exc:
            raise ReplyError(str(exc), raw=reply.message) from None

    asked = ask(
        attempt,
        lambda obj: _problems(obj, ids),
        max_attempts=MAX_ATTEMPTS,
        what=f"{item['task_id']}: auditor answer",
    )
    return None if asked.value is None else _proposal(asked.value)


def _feedback(problems: Sequence[str]) -> str:
    return (
        "Your answer is invalid: "
        + "; ".join(problems)
        + ". Answer again with one valid JSON object."
    )


def _usage(client: Any | None) -> dict[str, Any]:
    if client is None:
        return {}
    u = client.usage
    return {
        k: getattr(u, k)
        for k in ("model_calls", "input_tokens", "cached_input_tokens", "output_tokens", "cost_usd")
        if hasattr(u, k)
    }


__all__ = [
    "AUDIT_SCHEMA_VERSION",
    "AuditOutcome",
    "auditor_client",
    "build_prompt",
    "parse_proposal",
    "propose_causes",
    "run_audit",
    "trace_steps",
]
