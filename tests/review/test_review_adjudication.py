"""Every review state has a way out, over HTTP and as a property of the protocol.

A config-only disagreement is accepted by adjudication (the builder's version, the cited
discussion recorded) and exported; a task goes back to phase 2 without a content change; a
Match over a blind answer the evaluator scores wrong is flagged to the reviewer before the
lock and to the administrator after; anchors are checked against the file they point
into; a repaired version's changes come as a diff. A hypothesis property drives random
reviewer and administrator choices through the service and checks that every task ends
accepted or removed, with no offered way out ever refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import gold_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from review_client import config_body, phase1_body, phase2_body

from builder.errors import ReviewError
from builder.review import Database, ReviewService, load_release
from builder.review.protocol import exits
from builder.review.service import User
from builder.review.taxonomy import Disposition, Role, TaskState, Verdict
from dataspace.release import Release
from dataspace.testing.releases import write_tiny_release

pytestmark = pytest.mark.integration
SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dataspace.cli", *args], capture_output=True, text=True, timeout=300
    )


def _digits(n: int) -> dict[str, Any]:
    return {
        "order_sensitive": False,
        "columns": [
            {"type": "text"},
            {"type": "number", "comparison": {"mode": "decimal_places", "digits": n}},
        ],
    }


def _lock(client, task: str, rows, config, **p2: str) -> dict[str, Any]:
    client.ok("POST", f"/api/tasks/{task}/phase1", phase1_body(rows))
    return client.ok("POST", f"/api/tasks/{task}/phase2", phase2_body(config, **p2))


@SQLITE_ONLY
def test_config_only_disagreement_is_accepted_by_adjudication(review, tmp_path: Path) -> None:
    """Guards the dead end of issue 28: both matched and passed, configs differ only in
    digits, the builder's config is unchanged so a repair is refused; adjudication must
    accept the builder's version and the export must carry it."""
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana, ben, rita, root = (review.client(n) for n in ("ana", "ben", "rita", "root"))
    _lock(ana, "task_1", gold_rows(210000), _digits(1))
    _lock(ben, "task_1", gold_rows(210000), _digits(2))
    view = root.ok("GET", "/api/tasks/task_1")
    assert view["state"] == "adjudication"
    assert view["exits"] == ["adjudicate", "repair", "reopen", "remove"]
    diff = view["differences"]
    assert diff["config_only"] and not diff["verdicts_differ"]
    assert diff["config_keys"] == ["population.comparison.digits"]
    assert diff["reasons"] == ["the configs differ at population.comparison.digits"]
    assert diff["configs"]["ana"]["population.comparison.digits"] == 1
    assert view["warnings"] == []
    # The repairer sees why too, and may only repair.
    assert rita.ok("GET", "/api/tasks/task_1")["exits"] == ["repair"]
    # Accept is refused with the ways out named in the refusal.
    r = root.post("/api/tasks/task_1/accept")
    assert r.status == 409 and "adjudicate, repair, reopen, remove" in r.json()["error"]
    ben.ok(
        "POST",
        "/api/tasks/task_1/messages",
        {
            "text": "integers in cities.csv: digits do not matter",
            "citations": [{"path": "cities.csv", "anchor": "population"}],
        },
    )
    msg_id = root.ok("GET", "/api/tasks/task_1/messages")[0]["id"]
    assert root.post("/api/tasks/task_1/adjudicate", {"messages": [msg_id]}).status == 400
    assert ana.post("/api/tasks/task_1/adjudicate", {"reason": "x"}).status == 403
    bad = root.post("/api/tasks/task_1/adjudicate", {"reason": "x", "messages": [999999]})
    assert bad.status == 409 and "not in the discussion" in bad.json()["error"]
    root.ok(
        "POST",
        "/api/tasks/task_1/adjudicate",
        {
            "reason": "populations are integers; the builder's integer rule fits",
            "messages": [msg_id],
        },
    )
    view = root.ok("GET", "/api/tasks/task_1")
    assert view["state"] == "accepted"
    assert view["decision"]["via"] == "adjudication" and view["decision"]["messages"] == [msg_id]
    assert view["decision"]["config"]["columns"][1]["comparison"] == {"mode": "integer"}
    events = root.ok("GET", "/api/tasks/task_1/events")
    assert [e["kind"] for e in events][-2:] == ["adjudicated", "state_changed"]
    # A disagreement on the verdict cannot be settled this way.
    _lock(ana, "task_2", gold_rows(220000), _digits(0))
    _lock(ben, "task_2", gold_rows(220000), _digits(0), verdict="mismatch", disposition="remove")
    r = root.post("/api/tasks/task_2/adjudicate", {"reason": "x"})
    assert r.status == 409 and "more than their configs" in r.json()["error"]
    assert root.ok("GET", "/api/tasks/task_2")["differences"]["reasons"] == [
        "the verdicts differ",
        "ben chose mismatch (consensus needs match)",
        "ben chose remove (consensus needs pass)",
    ]
    res = _cli("review", "export", "--db", review.db_url, "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    rel = Release(tmp_path / "out")
    assert rel.task_ids() == ["task_1"]
    cfg = json.loads((tmp_path / "out/evaluation/configs/task_1.json").read_text())
    assert cfg["columns"][1]["comparison"] == {"mode": "integer"}
    res = _cli("review", "status", "--db", review.db_url)
    assert res.returncode == 0 and "replays to the stored state: yes" in res.stdout


@SQLITE_ONLY
def test_reopen_sends_the_task_back_to_phase2_unchanged(review) -> None:
    """Guards: a disagreement that needs a second look (no content change) is not a dead
    end; the reviewers recheck in phase 2 only, and the version diff is empty."""
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana, ben, root = (review.client(n) for n in ("ana", "ben", "root"))
    _lock(ana, "task_1", gold_rows(210000), config_body())
    _lock(ben, "task_1", gold_rows(210000), config_body(), verdict="unsure")
    assert root.post("/api/tasks/task_1/reopen", {"reason": " "}).status == 400
    out = root.ok("POST", "/api/tasks/task_1/reopen", {"reason": "ben: look at row 3 again"})
    assert out == {"version": 2, "state": "recheck"}
    view = ben.ok("GET", "/api/tasks/task_1")
    assert view["todo"] == "phase2" and not view["needs_phase1"]
    diff = ben.ok("GET", "/api/tasks/task_1/diff", version=2)
    assert diff["scope"] == [] and diff["reason"] == "ben: look at row 3 again"
    assert (diff["question"], diff["gold"], diff["config"], diff["files"]) == (None, None, [], [])
    for c in (ana, ben):
        c.ok("POST", "/api/tasks/task_1/phase2", phase2_body(config_body()))
    root.ok("POST", "/api/tasks/task_1/accept")
    stats = root.ok("GET", "/api/stats")
    assert stats["repairs"]["reopened_for_phase2"] == 1 and stats["repairs"]["repairs"] == 0


@SQLITE_ONLY
def test_match_over_a_wrong_blind_answer_is_flagged(review) -> None:
    """Guards issue 28's silent export: an empty blind answer (0 rows against 3) followed by
    match/pass is flagged before the lock, recorded, and shown to the administrator."""
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana, ben, root = (review.client(n) for n in ("ana", "ben", "root"))
    for c in (ana, ben):
        c.ok("POST", "/api/tasks/task_1/phase1", phase1_body([]))
    check = ana.ok("POST", "/api/tasks/task_1/phase2/check", phase2_body(config_body()))
    assert len(check["warnings"]) == 1
    text = check["warnings"][0]["text"]
    assert text.startswith("your blind answer scores wrong") and "yet you chose match" in text
    assert "0 data row(s); the gold has 3" in text
    assert ana.ok("GET", "/api/tasks/task_1")["todo"] == "phase2"  # nothing was locked
    quiet = ana.ok(
        "POST", "/api/tasks/task_1/phase2/check", phase2_body(config_body(), verdict="mismatch")
    )
    assert quiet["warnings"] == []
    for c in (ana, ben):
        out = c.ok("POST", "/api/tasks/task_1/phase2", phase2_body(config_body()))
        assert out["warnings"]
    view = root.ok("GET", "/api/tasks/task_1")
    assert view["state"] == "consensus"
    assert [w["reviewer"] for w in view["warnings"]] == ["ana", "ben"]
    assert view["warnings"][0]["text"].startswith("ana's blind answer scores wrong")
    mine = ana.ok("GET", "/api/tasks/task_1")["my"][0]["phase2"]
    assert "yet you chose match" in mine["warnings"][0]


@SQLITE_ONLY
def test_anchors_are_checked_against_the_content(review) -> None:
    """Guards: row 9999 of a 4-row CSV and 1:05 in a 2-second video were accepted."""
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana = review.client("ana")

    def anchor(path: str, modality: str, kind: str, where: str) -> Any:
        body = phase1_body(gold_rows(210000))
        body["evidence"] = [
            {
                "path": path,
                "modality": modality,
                "anchor_kind": kind,
                "anchor": where,
                "fact": "f",
                "role": "filter",
            }
        ]
        return ana.post("/api/tasks/task_1/phase1", body)

    refused = [
        ("cities.csv", "csv", "row", "9999", "row must be 1..4"),
        ("cities.csv", "csv", "row", "0", "1 = the first data row"),
        ("cities.csv", "csv", "row", "first", "a data row number"),
        ("cities.csv", "csv", "key", "city=Paris", "no cell of cities.csv holds 'Paris'"),
        ("cities.csv", "csv", "key", "town=Lyon", "no column 'town'"),
        ("notes/countries.json", "json", "row", "2", "row must be 1..1"),
        ("db/countries.sqlite", "sqlite", "key", "countries.code=XX", "no row of countries"),
        ("db/countries.sqlite", "sqlite", "row", "countries:5", "row must be 1..4"),
        ("db/countries.sqlite", "sqlite", "row", "towns:1", "no table 'towns'"),
        ("docs/readme.md", "markdown", "section", "Rivers", "its headings: Cities"),
        ("docs/census.pdf", "pdf", "section", "Intro", "section anchors point into Markdown"),
        ("docs/census.pdf", "pdf", "page", "3", "page must be 1..2"),
        ("media/briefing.mp4", "video", "timestamp", "1:05", "past the end"),
    ]
    for path, modality, kind, where, needle in refused:
        r = anchor(path, modality, kind, where)
        assert r.status == 400, (where, r.body)
        assert needle in r.json()["error"], (where, r.json()["error"])
    from builder.review.anchors import check_anchor

    files = review.svc.files(review.svc.fold("task_1"))
    for path, modality, kind, where in [
        ("cities.csv", "csv", "row", "2-4"),
        ("cities.csv", "csv", "key", "city=Lyon"),
        ("cities.csv", "csv", "key", "Graz"),
        ("db/countries.sqlite", "sqlite", "row", "countries:4"),
        ("docs/readme.md", "markdown", "section", "cities"),
        ("docs/census.pdf", "pdf", "page", "2"),
    ]:
        check_anchor(files, path, modality, kind, where)  # raises when refused
    r = anchor("media/briefing.mp4", "video", "timestamp", "0:01.9")
    assert r.status == 200, r.body


@SQLITE_ONLY
def test_a_repaired_version_comes_as_a_diff(review) -> None:
    """Guards: the recheck shows v1 -> v2; reviewers see which config keys changed but not
    the builder's values (they write their own)."""
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana, ben, rita = (review.client(n) for n in ("ana", "ben", "rita"))
    _lock(ana, "task_1", gold_rows(210000), config_body())
    _lock(ben, "task_1", gold_rows(210000), config_body(), verdict="mismatch")
    rita.ok(
        "POST",
        "/api/tasks/task_1/repair",
        {
            "scope": ["gold", "config"],
            "reason": "Turku belongs in the answer",
            "gold_csv": "city,population\nLyon,522000\nGraz,291000\nPorto,232000\nTurku,195000\n",
            "config": _digits(0),
        },
    )
    full = rita.ok("GET", "/api/tasks/task_1/diff", version=2)
    assert full["scope"] == ["gold", "config"] and full["by"] == "rita"
    assert "+Turku,195000" in full["gold"]
    assert {
        "key": "population.comparison.mode",
        "before": "integer",
        "after": "decimal_places",
    } in (full["config"])
    blind = ana.ok("GET", "/api/tasks/task_1/diff", version=2)
    assert {c["key"] for c in blind["config"]} == {c["key"] for c in full["config"]}
    assert all(set(c) == {"key"} for c in blind["config"])
    assert ana.get("/api/tasks/task_1/diff", version=1).status == 404


# ---- the property: no dead ends ------------------------------------------------------

_CONFIGS = [config_body(), _digits(0), _digits(1), config_body(population_type="text")]


@pytest.fixture(scope="module")
def tiny_service(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("prop")
    rel = write_tiny_release(root / "rel", tasks=40)
    db = Database(f"sqlite:///{root / 'review.db'}")
    load_release(db, rel)
    svc = ReviewService(db, root / "cache")
    for name in ("ana", "ben"):
        svc.add_user(name, "reviewer", "password-1")
    svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    yield svc, iter(svc.task_ids())
    db.close()


_choice = st.tuples(
    st.sampled_from(list(Verdict)),
    st.sampled_from(list(Disposition)),
    st.integers(0, len(_CONFIGS) - 1),
    st.booleans(),
)


@settings(
    max_examples=35,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rounds=st.lists(st.tuples(_choice, _choice, st.integers(0, 10)), min_size=1, max_size=4))
def test_every_task_reaches_accepted_or_removed(tiny_service: Any, rounds: Any) -> None:
    """Random reviewer choices and random ways out: every offered way out is taken without
    a refusal, and the task ends accepted or removed (round by round, the last round's
    administrator takes the last offered exit, which is always there)."""
    svc, tasks = tiny_service
    tid = next(tasks)
    admin = User(name="root", role=Role.ADMIN)
    reviewers = [User(name=n, role=Role.REVIEWER) for n in ("ana", "ben")]
    header, gold = svc.gold(svc.fold(tid))
    for i, (c_ana, c_ben, pick) in enumerate(rounds):
        fold = svc.fold(tid)
        assert fold.state in (TaskState.IN_REVIEW, TaskState.RECHECK)
        for user, (verdict, disposition, cfg, right) in zip(reviewers, (c_ana, c_ben), strict=True):
            if not fold.phase1_locked(user.name):
                rows = gold if right else gold[:-1]
                svc.submit_phase1(user, tid, phase1_body(rows))
            svc.submit_phase2(
                user,
                tid,
                phase2_body(_CONFIGS[cfg], verdict=verdict.value, disposition=disposition.value),
            )
        fold = svc.fold(tid)
        assert fold.state in (TaskState.CONSENSUS, TaskState.ADJUDICATION)
        ways = exits(fold)
        assert ways and ways[-1] == "remove"
        if fold.state == TaskState.ADJUDICATION:
            assert {"repair", "reopen"} <= set(ways)
            assert ("adjudicate" in ways) == fold.config_only_disagreement()
        last = i == len(rounds) - 1
        way = ways[-1] if last else ways[pick % len(ways)]
        if way == "accept":
            svc.accept(admin, tid)
        elif way == "adjudicate":
            svc.adjudicate(admin, tid, {"reason": "builder's config"})
        elif way == "reopen":
            svc.reopen(admin, tid, {"reason": "look again"})
        elif way == "repair":
            current = fold.current.config
            other = next(c for c in _CONFIGS if _differs(tid, c, current, header))
            svc.repair(admin, tid, {"scope": ["config"], "reason": "fix", "config": other})
        else:
            svc.remove(admin, tid, "random walk")
        if svc.fold(tid).state in (TaskState.ACCEPTED, TaskState.REMOVED):
            break
    final = svc.fold(tid)
    assert final.state in (TaskState.ACCEPTED, TaskState.REMOVED)
    with pytest.raises(ReviewError):
        svc.remove(admin, tid, "again")


def _differs(tid: str, config: dict[str, Any], current: dict[str, Any], header: Any) -> bool:
    from builder.review.protocol import canonical_config

    full = {
        "schema_version": "1.0",
        "task_id": tid,
        "order_sensitive": config["order_sensitive"],
        "columns": [
            {**c, "gold_index": j, "gold_name": header[j]} for j, c in enumerate(config["columns"])
        ],
    }
    return canonical_config(full) != canonical_config(current)
