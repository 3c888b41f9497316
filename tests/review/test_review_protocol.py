"""The review protocol over HTTP, on SQLite and on a real PostgreSQL server.

One review takes three tasks through the paper's cycle: consensus and acceptance, a
config disagreement that is discussed, repaired, rechecked and accepted, and a removal;
the export is a valid release whose repaired task carries version 2, and the event log
replays to the same state.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PASSWORD, gold_rows
from review_client import config_body, phase1_body, phase2_body

from builder.review import Database, ReviewService, replay
from dataspace.release import Release

pytestmark = pytest.mark.integration


def _assign_all(review) -> dict[str, list[str]]:
    return review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dataspace.cli", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=300,
    )


def _both_phases(client, task: str, rows, config) -> None:
    assert client.ok("POST", f"/api/tasks/{task}/phase1", phase1_body(rows))["locked"]
    gold = client.ok("GET", f"/api/tasks/{task}/gold")
    assert gold["header"] == ["city", "population"]
    assert "diagnostic" in gold
    client.ok("POST", f"/api/tasks/{task}/phase2", phase2_body(config))


def test_full_cycle_consensus_repair_removal_export_replay(review, tmp_path: Path) -> None:
    _assign_all(review)
    ana, ben, rita, root = (review.client(n) for n in ("ana", "ben", "rita", "root"))

    # task_1: both match, pass, same config -> consensus -> accepted.
    _both_phases(ana, "task_1", gold_rows(210000), config_body())
    assert ana.ok("GET", "/api/tasks/task_1")["state"] == "in_review"
    _both_phases(ben, "task_1", gold_rows(210000), config_body())
    assert root.ok("GET", "/api/tasks/task_1")["state"] == "consensus"
    root.ok("POST", "/api/tasks/task_1/accept")

    # task_2: same gold verdict, different config (population as text) -> adjudication.
    _both_phases(ana, "task_2", gold_rows(220000), config_body())
    _both_phases(ben, "task_2", gold_rows(220000), config_body(population_type="text"))
    view = root.ok("GET", "/api/tasks/task_2")
    assert view["state"] == "adjudication" and view["agreed_config"] is None
    peers = ana.ok("GET", "/api/tasks/task_2/records")["records"]["1"]
    assert {r["reviewer"] for r in peers} == {"ana", "ben"}
    # Discussion cites a workspace location; an uncited reviewer message is refused.
    r = ben.post("/api/tasks/task_2/messages", {"text": "population is text?"})
    assert r.status == 400 and "cite" in r.json()["error"]
    ben.ok(
        "POST",
        "/api/tasks/task_2/messages",
        {
            "text": "cities.csv stores integers; population must compare as integer numbers",
            "citations": [{"path": "cities.csv", "anchor": "column population"}],
        },
    )
    assert len(ana.ok("GET", "/api/tasks/task_2/messages")) == 1
    # A reviewer cannot repair; the repairer stores a config repair with reason and scope.
    assert ana.post("/api/tasks/task_2/repair", {"scope": ["config"], "reason": "x"}).status == 403
    r = rita.post(
        "/api/tasks/task_2/repair", {"scope": ["config"], "reason": "r", "question": "changed?"}
    )
    assert r.status == 400 and "exactly its scope" in r.json()["error"]
    out = rita.ok(
        "POST",
        "/api/tasks/task_2/repair",
        {
            "scope": ["config"],
            "reason": "population is an integer count; compare numerically",
            "config": config_body()
            | {
                "columns": [
                    {"type": "text"},
                    {"type": "number", "comparison": {"mode": "decimal_places", "digits": 0}},
                ]
            },
        },
    )
    assert out == {"version": 2, "state": "recheck"}
    # Recheck: phase 2 only (question and workspace unchanged); discussion closed until locked.
    assert ana.ok("GET", "/api/tasks/task_2")["todo"] == "phase2"
    assert ana.get("/api/tasks/task_2/messages").status == 403
    assert ana.post("/api/tasks/task_2/phase1", phase1_body(gold_rows(220000))).status == 409
    ana.ok("POST", "/api/tasks/task_2/phase2", phase2_body(config_body()))
    # Peers' version-2 records stay hidden until one's own version-2 phase 2 is locked.
    ben_view = ben.ok("GET", "/api/tasks/task_2/records")["records"]
    assert [r["reviewer"] for r in ben_view.get("2", [])] == []
    ben.ok("POST", "/api/tasks/task_2/phase2", phase2_body(config_body()))
    assert root.ok("GET", "/api/tasks/task_2")["state"] == "consensus"
    root.ok("POST", "/api/tasks/task_2/accept")

    # task_3: a reviewer proposes removal -> adjudication -> removed with a reason.
    _both_phases(ana, "task_3", gold_rows(230000), config_body())
    ana_p2 = phase2_body(config_body(), verdict="unsure", disposition="remove")
    ben.ok("POST", "/api/tasks/task_3/phase1", phase1_body(gold_rows(230000)))
    ben.ok("POST", "/api/tasks/task_3/phase2", ana_p2)
    assert root.ok("GET", "/api/tasks/task_3")["state"] == "adjudication"
    assert root.post("/api/tasks/task_3/accept").status == 409
    assert root.post("/api/tasks/task_3/remove", {"reason": ""}).status == 400
    root.ok("POST", "/api/tasks/task_3/remove", {"reason": "near-duplicate of task_1"})
    assert (
        ben.post(
            "/api/tasks/task_3/messages", {"text": "late", "citations": [{"path": "cities.csv"}]}
        ).status
        == 409
    )

    # Stats are computed from the log.
    stats = root.ok("GET", "/api/stats")
    assert stats["states"] == {"accepted": 2, "removed": 1}
    assert stats["agreement"]["judged_tasks"] == 3
    assert stats["agreement"]["config_agreement"] == pytest.approx(2 / 3, abs=1e-3)
    assert stats["agreement"]["verdict_agreement"] == pytest.approx(2 / 3, abs=1e-3)
    assert stats["repairs"] == {
        "repaired_tasks": 1,
        "repairs": 1,
        "reopened_for_phase2": 0,
        "by_scope": {"config": 1},
        "versions_per_task": {"1": 2, "2": 1},
    }
    assert stats["acceptance"]["accepted_after_repair"] == 1
    assert stats["acceptance"]["removal_reasons"] == [
        {"task_id": "task_3", "reason": "near-duplicate of task_1"}
    ]

    # Export: a valid release with the accepted tasks; task_2 carries version 2.
    out_dir = tmp_path / "reviewed"
    res = _cli("review", "export", "--db", review.db_url, "--out", str(out_dir))
    assert res.returncode == 0, res.stderr
    assert "exported 2 accepted tasks" in res.stdout and "task_3 (removed)" in res.stdout
    val = _cli("validate", str(out_dir), "--require-gold")
    assert val.returncode == 0, val.stderr
    assert "2 tasks, all valid" in val.stdout
    rel = Release(out_dir)
    assert rel.task_ids() == ["task_1", "task_2"]
    meta2 = rel.metadata("task_2")
    assert meta2 is not None and meta2["review"]["version"] == 2
    assert meta2["review"]["repairs"][0]["scope"] == ["config"]
    cfg2 = json.loads(rel.config_path("task_2").read_text())
    assert cfg2["columns"][1]["comparison"] == {"mode": "integer"}
    record = json.loads((rel.ledger_dir("task_2") / "review.json").read_text())
    assert record["final_version"] == 2 and record["decision"]["decision"] == "accepted"
    assert (rel.workspace("task_2") / "media" / "briefing.mp4").is_file()
    assert not (rel.workspace("task_1") / "leak.csv").exists()  # symlinks are not exported

    # Replay: the stored state, a fresh fold of the database log and a fold of the exported
    # JSON lines all agree.
    log = tmp_path / "events.jsonl"
    res = _cli("review", "log", "--db", review.db_url, "--out", str(log))
    assert res.returncode == 0, res.stderr
    res = _cli("review", "replay", str(log))
    assert res.returncode == 0, res.stderr
    assert (
        "task_2     recheck" not in res.stdout
        and "task_2     accepted      version 2" in res.stdout
    )
    from builder.review.protocol import Event

    lines = [json.loads(x) for x in log.read_text().splitlines()]
    from_file = replay(Event(**o) for o in lines)
    fresh = ReviewService(Database(review.db_url), tmp_path / "c2")
    from_db = {t: fresh.fold(t) for t in fresh.task_ids()}
    assert {t: f.snapshot() for t, f in from_file.items()} == {
        t: f.snapshot() for t, f in from_db.items()
    }
    assert {t: str(f.state) for t, f in from_file.items()} == {
        "task_1": "accepted",
        "task_2": "accepted",
        "task_3": "removed",
    }
    res = _cli("review", "status", "--db", review.db_url)
    assert res.returncode == 0, res.stderr
    assert "event log replays to the stored state: yes" in res.stdout


def test_submission_validation(review) -> None:
    _assign_all(review)
    ana = review.client("ana")
    url = "/api/tasks/task_1/phase1"

    def refused(body, needle: str) -> None:
        r = ana.post(url, body)
        assert r.status == 400, r.body
        assert needle in r.json()["error"]

    good = phase1_body(gold_rows(210000))
    refused({**good, "result_csv": "city,population\nLyon\n"}, "result_csv")
    refused({**good, "result_csv": ""}, "result_csv")
    refused({**good, "evidence": []}, "at least one anchor")
    ev = good["evidence"][0]
    refused({**good, "evidence": [{**ev, "path": "missing.csv"}]}, "not a file of this task")
    refused({**good, "evidence": [{**ev, "modality": "pdf"}]}, "is csv, not pdf")
    refused({**good, "evidence": [{**ev, "role": "vibes"}]}, "role: one of")
    refused({**good, "evidence": [{**ev, "anchor_kind": "cell"}]}, "anchor_kind")
    refused({**good, "evidence": [{**ev, "fact": " "}]}, "fact")
    refused(
        {
            **good,
            "evidence": [
                {
                    "path": "docs/census.pdf",
                    "modality": "pdf",
                    "anchor_kind": "page",
                    "anchor": "9",
                    "fact": "f",
                    "role": "filter",
                }
            ],
        },
        "page must be 1..2",
    )
    refused(
        {
            **good,
            "evidence": [
                {
                    "path": "media/briefing.mp4",
                    "modality": "video",
                    "anchor_kind": "timestamp",
                    "anchor": "soon",
                    "fact": "f",
                    "role": "filter",
                }
            ],
        },
        "a time such as",
    )
    refused({**good, "semantics": {}}, "grain")
    refused({**good, "semantics": {"grain": "g", "mood": "x"}}, "unknown fields")
    refused({**good, "confidence": 6}, "confidence")
    refused({**good, "confidence": True}, "confidence")
    refused({**good, "issues": ["question.vague"]}, "unknown flags")
    r = ana.request(
        "POST", url, raw=json.dumps(good).encode(), headers={"Content-Type": "text/plain"}
    )
    assert r.status == 415
    # Header-only answers are valid (an empty correct answer); several anchor kinds at once.
    header_only = {
        **good,
        "result_csv": "city,population\n",
        "evidence": [
            ev,
            {
                "path": "docs/census.pdf",
                "modality": "pdf",
                "anchor_kind": "page",
                "anchor": "2",
                "fact": "Turku below threshold",
                "role": "filter",
            },
            {
                "path": "media/briefing.mp4",
                "modality": "video",
                "anchor_kind": "timestamp",
                "anchor": "0:01.5",
                "fact": "threshold shown",
                "role": "filter",
            },
            {
                "path": "db/countries.sqlite",
                "modality": "sqlite",
                "anchor_kind": "key",
                "anchor": "countries.code=FR",
                "fact": "France",
                "role": "join",
            },
        ],
        "issues": ["question.ambiguous_grain"],
    }
    assert ana.ok("POST", url, header_only)["locked"]
    # Locked: a second answer is refused and the record is unchanged.
    r = ana.post(url, good)
    assert r.status == 409 and "locked" in r.json()["error"]
    mine = ana.ok("GET", "/api/tasks/task_1")["my"][0]["phase1"]
    assert mine["result"]["rows"] == [] and len(mine["evidence"]) == 4
    # Phase 2 config: one entry per gold column, each valid for the gold.
    p2 = "/api/tasks/task_1/phase2"
    r = ana.post(p2, phase2_body({"order_sensitive": False, "columns": [{"type": "text"}]}))
    assert r.status == 400 and "one entry per gold column" in r.json()["error"]
    r = ana.post(p2, phase2_body(config_body(population_type="date")))
    assert r.status == 400 and "config" in r.json()["error"]
    r = ana.post(p2, phase2_body(verdict="yes"))
    assert r.status == 400 and "verdict" in r.json()["error"]
    ana.ok("POST", p2, phase2_body(verdict="mismatch", disposition="repair_gold"))
    r = ana.post(p2, phase2_body())
    assert r.status == 409 and "locked" in r.json()["error"]
    # The diagnostic now uses the reviewer's own config and shows the missing rows.
    diag = ana.ok("GET", "/api/tasks/task_1/gold")["diagnostic"]
    assert diag["config_used"] == "yours"
    assert diag["verdict"]["error_code"] == "row_count_mismatch"
    assert len(diag["missing_rows"]) == 3


def test_balanced_assignment_and_fixed_membership(review) -> None:
    added = review.svc.assign_balanced(per_task=2)
    load: dict[str, int] = {}
    for names in added.values():
        assert len(names) == 2 and len(set(names)) == 2
        for n in names:
            load[n] = load.get(n, 0) + 1
    assert sorted(load.values()) == [2, 2, 2]
    root = review.client("root")
    tid, names = next(iter(added.items()))
    other = next(n for n in ("ana", "ben", "cai") if n not in names)
    assert root.post(f"/api/tasks/{tid}/assign", {"reviewer": "rita"}).status == 400
    # A pending assignment may be replaced before anyone answered.
    root.ok("POST", f"/api/tasks/{tid}/unassign", {"reviewer": names[1]})
    assert root.ok("GET", f"/api/tasks/{tid}")["state"] == "pending"
    assert review.client(names[1]).get(f"/api/tasks/{tid}").status == 403
    root.ok("POST", f"/api/tasks/{tid}/assign", {"reviewer": names[1]})
    reviewer = review.client(names[0])
    reviewer.ok("POST", f"/api/tasks/{tid}/phase1", phase1_body(gold_rows(0)))
    r = root.post(f"/api/tasks/{tid}/assign", {"reviewer": other})
    assert r.status == 409 and "membership is fixed" in r.json()["error"]
    r = root.post(f"/api/tasks/{tid}/unassign", {"reviewer": names[1]})
    assert r.status == 409 and "membership is fixed" in r.json()["error"]
    assert (
        review.client(names[1]).post(f"/api/tasks/{tid}/assign", {"reviewer": other}).status == 403
    )


def test_event_log_is_append_only_in_the_database(review) -> None:
    db = review.db
    with pytest.raises(Exception, match="append-only"), db.write():
        db.execute("UPDATE review_events SET actor = 'mallory'")
    with pytest.raises(Exception, match="append-only"), db.write():
        db.execute("DELETE FROM review_events")
    assert db.query("SELECT COUNT(*) FROM review_events")[0][0] > 0


def test_cli_init_user_assign_status(db_url: str, release: Path, tmp_path: Path) -> None:
    res = _cli("review", "init", str(release), "--db", db_url)
    assert res.returncode == 0, res.stderr
    assert "loaded 3 tasks" in res.stdout
    res = _cli("review", "init", str(release), "--db", db_url)
    assert "already loaded" in res.stdout
    for name in ("ana", "ben"):
        res = _cli(
            "review", "user", name, "--role", "reviewer", "--db", db_url, stdin=PASSWORD + "\n"
        )
        assert res.returncode == 0, res.stderr
    res = _cli("review", "user", "x", "--role", "reviewer", "--db", db_url, stdin="short\n")
    assert res.returncode == 2 and "at least 8 characters" in res.stderr
    res = _cli("review", "assign", "--db", db_url, "--per-task", "3")
    assert res.returncode == 2 and "2 reviewers in the pool; 3 are needed" in res.stderr
    res = _cli("review", "assign", "--db", db_url)
    assert res.returncode == 0, res.stderr
    assert "load ana=3, ben=3" in res.stdout
    res = _cli("review", "status", "--db", db_url)
    assert res.returncode == 0 and "in_review 3" in res.stdout
    other = tmp_path / "other"
    other.mkdir()
    (other / "input").mkdir()
    res = _cli("review", "init", str(other), "--db", db_url)
    assert res.returncode == 2 and "use another database" in res.stderr
    res = _cli("review", "status", "--db", "mysql://x")
    assert res.returncode == 2 and "unknown database URL" in res.stderr


def test_repair_of_question_workspace_and_gold_is_an_overlay(review, tmp_path: Path) -> None:
    """Guards: a repair never writes the base release; a workspace or question repair sends
    the same reviewers back to phase 1; export carries the overlay and the new gold."""
    import base64
    import hashlib

    base_files = {
        p: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(review.release.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana, ben, rita, root = (review.client(n) for n in ("ana", "ben", "rita", "root"))
    for c in (ana, ben):
        _both_phases(c, "task_1", gold_rows(210000), config_body())
    # task_1 reaches consensus; on task_2 ben finds the gold wrong -> adjudication.
    _both_phases(ana, "task_2", gold_rows(220000), config_body())
    ben.ok("POST", "/api/tasks/task_2/phase1", phase1_body(gold_rows(220000)))
    ben.ok(
        "POST",
        "/api/tasks/task_2/phase2",
        phase2_body(verdict="mismatch", disposition="repair_several"),
    )
    assert root.ok("GET", "/api/tasks/task_2")["state"] == "adjudication"
    new_csv = b"city,country,population\nLyon,FR,522000\nGraz,AT,291000\nTurku,FI,225000\n"
    bad = rita.post(
        "/api/tasks/task_2/repair",
        {
            "scope": ["workspace"],
            "reason": "r",
            "files": {"../escape.csv": base64.b64encode(b"x").decode()},
        },
    )
    assert bad.status == 400
    same = rita.post(
        "/api/tasks/task_2/repair",
        {
            "scope": ["workspace"],
            "reason": "r",
            "files": {
                "cities.csv": base64.b64encode(
                    (review.release / "input/task_2/context/cities.csv").read_bytes()
                ).decode()
            },
        },
    )
    assert same.status == 400 and "unchanged" in same.json()["error"]
    gold_csv = "city,population\nLyon,522000\nGraz,291000\nTurku,225000\n"
    out = rita.ok(
        "POST",
        "/api/tasks/task_2/repair",
        {
            "scope": ["question", "workspace", "gold"],
            "reason": "Porto's count was stale; Turku's census figure is 225000",
            "question": "Which cities had more than 220000 inhabitants in 2020?",
            "files": {
                "cities.csv": base64.b64encode(new_csv).decode(),
                "notes/countries.json": None,
            },
            "gold_csv": gold_csv,
        },
    )
    assert out == {"version": 2, "state": "recheck"}
    # The same reviewers solve again (the question and workspace changed).
    view = ana.ok("GET", "/api/tasks/task_2")
    assert view["todo"] == "phase1" and view["question"].endswith("in 2020?")
    files = {f["path"]: f for f in ana.ok("GET", "/api/tasks/task_2/files")}
    assert "notes/countries.json" not in files and files["cities.csv"]["overlay"] is True
    assert ana.get("/api/tasks/task_2/file", path="cities.csv").body == new_csv
    assert ana.get("/api/tasks/task_2/file", path="notes/countries.json").status == 404
    assert ana.get("/api/tasks/task_2/gold").status == 403  # new version: blind again
    new_rows = [["Lyon", 522000], ["Graz", 291000], ["Turku", 225000]]
    body = phase1_body(new_rows)
    body["evidence"][0]["anchor"] = "1-3"  # the repaired table has 3 data rows
    for c in (ana, ben):
        c.ok("POST", "/api/tasks/task_2/phase1", body)
        assert c.ok("GET", "/api/tasks/task_2/gold")["diagnostic"]["verdict"]["passed"]
        c.ok("POST", "/api/tasks/task_2/phase2", phase2_body(config_body()))
    root.ok("POST", "/api/tasks/task_1/accept")
    root.ok("POST", "/api/tasks/task_2/accept")
    # The base release is byte for byte what it was.
    after = {
        p: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(review.release.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
    assert after == base_files
    res = _cli("review", "export", "--db", review.db_url, "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    rel = Release(tmp_path / "out")
    rel.check(require_gold=True)
    assert rel.task("task_2").question.endswith("in 2020?")
    assert (rel.workspace("task_2") / "cities.csv").read_bytes() == new_csv
    assert not (rel.workspace("task_2") / "notes" / "countries.json").exists()
    assert (rel.workspace("task_1") / "notes" / "countries.json").exists()
    assert rel.gold_bytes("task_2").decode() == gold_csv
    ledger = rel.ledger("task_2") or {}
    assert ledger["gold_repaired_in_review"] is True and ledger["review_version"] == 2
    assert ledger["sql"]  # provenance kept
    meta = rel.metadata("task_2") or {}
    assert meta["answer_rows"] == 3 and meta["review"]["repairs"][0]["scope"] == [
        "question",
        "workspace",
        "gold",
    ]


def test_database_connections_end_with_their_http_connections(review) -> None:
    """Guards: each HTTP connection runs in its own thread; its database connection must be
    closed when it ends, or PostgreSQL runs out of connection slots (60 in the fixture)."""
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana = review.client("ana")
    for _ in range(90):  # every urllib request is a new HTTP connection
        ana.ok("GET", "/api/tasks/task_1/files")
    import time

    deadline = time.monotonic() + 60  # the last server threads may still be finishing
    while review.db.open_connections > 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert review.db.open_connections <= 5
