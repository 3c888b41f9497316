"""Security of the review server over HTTP, on SQLite and on PostgreSQL.

Guards: no endpoint gives an unauthenticated request anything; before locking both phases
a reviewer gets neither the gold, nor the source SQL, nor the ledger, nor a peer's record
from any endpoint; a reviewer cannot act on or read a task not assigned to them, nor edit a
locked record; workspace paths cannot escape the task version.
"""

from __future__ import annotations

import pytest
from conftest import SECRET_SQL, gold_rows
from review_client import Client, config_body, phase1_body, phase2_body

pytestmark = pytest.mark.integration

TASK_ENDPOINTS = [
    ("GET", "/api/tasks/{t}", None),
    ("GET", "/api/tasks/{t}/files", None),
    ("GET", "/api/tasks/{t}/file?path=cities.csv", None),
    ("GET", "/api/tasks/{t}/table?path=cities.csv", None),
    ("GET", "/api/tasks/{t}/markdown?path=docs/readme.md", None),
    ("GET", "/api/tasks/{t}/pdf?path=docs/census.pdf", None),
    ("GET", "/api/tasks/{t}/pdf/page?path=docs/census.pdf&page=1", None),
    ("POST", "/api/tasks/{t}/sqlite", {"path": "db/countries.sqlite", "sql": "SELECT 1"}),
    ("POST", "/api/tasks/{t}/phase1", phase1_body(gold_rows(210000))),
    ("GET", "/api/tasks/{t}/gold", None),
    ("POST", "/api/tasks/{t}/phase2", phase2_body()),
    ("GET", "/api/tasks/{t}/records", None),
    ("GET", "/api/tasks/{t}/messages", None),
    ("POST", "/api/tasks/{t}/messages", {"text": "x", "citations": [{"path": "cities.csv"}]}),
    ("GET", "/api/tasks/{t}/sql", None),
    ("GET", "/api/tasks/{t}/ledger", None),
    ("GET", "/api/tasks/{t}/events", None),
    (
        "POST",
        "/api/tasks/{t}/repair",
        {"scope": ["config"], "reason": "r", "config": config_body()},
    ),
    ("POST", "/api/tasks/{t}/accept", {}),
    ("POST", "/api/tasks/{t}/remove", {"reason": "r"}),
    ("POST", "/api/tasks/{t}/assign", {"reviewer": "cai"}),
    ("POST", "/api/tasks/{t}/unassign", {"reviewer": "ana"}),
]
GLOBAL_ENDPOINTS = [
    ("GET", "/api/me", None),
    ("GET", "/api/vocabulary", None),
    ("GET", "/api/tasks", None),
    ("GET", "/api/status", None),
    ("GET", "/api/stats", None),
]
# Values only the gold, the ledger or a peer's record hold (cities.csv has them too, so the
# gold is recognized by its header line and the SQL by its sentinel).
GOLD_MARKERS = [b"city,population", b"gold_sha256", SECRET_SQL.encode(), b"SQL-SENTINEL"]


def _call(c: Client, method: str, path: str, body, task: str):
    url = path.replace("{t}", task)
    base, _, query = url.partition("?")
    params = dict(p.split("=", 1) for p in query.split("&")) if query else None
    return c.request(method, base, body if method == "POST" else None, params=params)


def test_unauthenticated_requests_get_nothing(review) -> None:
    anon = Client(review.url)
    for method, path, body in TASK_ENDPOINTS + GLOBAL_ENDPOINTS:
        r = _call(anon, method, path, body, "task_1")
        assert r.status == 401, (method, path, r.status)
        assert r.json() == {"error": r.json()["error"]} and "login" in r.json()["error"]
    forged = Client(review.url)
    forged.cookie = "ds_review=forged-token"
    assert forged.get("/api/tasks").status == 401
    bearer = Client(review.url)
    assert bearer.request("GET", "/api/tasks", headers={"Authorization": "Bearer x"}).status == 401
    r = anon.post("/api/login", {"name": "ana", "password": "wrong password"})
    assert r.status == 401 and "Set-Cookie" not in r.headers
    r = anon.post("/api/login", {"name": "nobody", "password": "wrong password"})
    assert r.status == 401
    # The console shell is public but holds no data.
    page = anon.get("/")
    assert page.status == 200 and b"task_" not in page.body
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    assert anon.get("/static/../service.py").status == 404


def test_reviewer_sees_no_gold_sql_ledger_or_peer_before_locking(review) -> None:
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana, ben = review.client("ana"), review.client("ben")
    # ben completes both phases first, so a peer record exists.
    ben.ok("POST", "/api/tasks/task_1/phase1", phase1_body(gold_rows(210000)))
    ben.ok("POST", "/api/tasks/task_1/phase2", phase2_body())

    def sweep(skip_writes: bool = True) -> dict[str, int]:
        seen = {}
        for method, path, body in TASK_ENDPOINTS + GLOBAL_ENDPOINTS:
            if method == "POST" and skip_writes and path.endswith(("phase1", "phase2")):
                continue
            r = _call(ana, method, path, body, "task_1")
            seen[f"{method} {path}"] = r.status
            for marker in GOLD_MARKERS:
                assert marker not in r.body, (method, path, marker)
            assert b'"ben"' not in r.body, (method, path, "peer record leaked")
            assert b"population must" not in r.body
        return seen

    seen = sweep()
    for key in (
        "GET /api/tasks/{t}/gold",
        "GET /api/tasks/{t}/sql",
        "GET /api/tasks/{t}/ledger",
        "GET /api/tasks/{t}/events",
        "GET /api/tasks/{t}/messages",
        "GET /api/status",
        "GET /api/stats",
        "POST /api/tasks/{t}/repair",
        "POST /api/tasks/{t}/accept",
        "POST /api/tasks/{t}/remove",
        "POST /api/tasks/{t}/assign",
        "POST /api/tasks/{t}/unassign",
    ):
        assert seen[key] == 403, (key, seen[key])
    assert seen["POST /api/tasks/{t}/messages"] == 409  # discussion opens after locking
    assert seen["GET /api/tasks/{t}/records"] == 200  # own records only (none yet)

    # After phase 1: the gold is shown, still no SQL, ledger or peer.
    ana.ok("POST", "/api/tasks/task_1/phase1", phase1_body(gold_rows(0)))
    assert b"city,population" not in ana.get("/api/tasks/task_1/gold").body  # JSON, not CSV
    assert ana.ok("GET", "/api/tasks/task_1/gold")["rows"][0][0] == "Lyon"
    for path in ("/api/tasks/task_1/sql", "/api/tasks/task_1/ledger", "/api/tasks/task_1/messages"):
        assert ana.get(path).status == 403, path
    records = ana.ok("GET", "/api/tasks/task_1/records")["records"]
    assert [r["reviewer"] for r in records["1"]] == ["ana"]
    # Both phases locked: the peer's record and the SQL become visible; the ledger never.
    ana.ok("POST", "/api/tasks/task_1/phase2", phase2_body())
    records = ana.ok("GET", "/api/tasks/task_1/records")["records"]
    assert {r["reviewer"] for r in records["1"]} == {"ana", "ben"}
    assert ana.ok("GET", "/api/tasks/task_1/sql")["sql"] == SECRET_SQL
    assert ana.get("/api/tasks/task_1/ledger").status == 403
    assert ana.get("/api/tasks/task_1/events").status == 403
    # A locked record cannot be edited: both phases refuse a second submission.
    assert ana.post("/api/tasks/task_1/phase1", phase1_body(gold_rows(210000))).status == 409
    assert ana.post("/api/tasks/task_1/phase2", phase2_body(verdict="mismatch")).status == 409
    # Nor can any other HTTP verb touch it.
    for verb in ("PUT", "DELETE", "PATCH"):
        assert ana.request(verb, "/api/tasks/task_1/phase1", {}).status == 405


def test_reviewer_cannot_touch_an_unassigned_task(review) -> None:
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    cai = review.client("cai")
    assert cai.ok("GET", "/api/tasks") == []
    for method, path, body in TASK_ENDPOINTS:
        r = _call(cai, method, path, body, "task_2")
        assert r.status == 403, (method, path, r.status)
        for marker in GOLD_MARKERS:
            assert marker not in r.body
    # Non-reviewer roles cannot submit reviews.
    rita = review.client("rita")
    r = rita.post("/api/tasks/task_2/phase1", phase1_body(gold_rows(0)))
    assert r.status == 403 and "only reviewers" in r.json()["error"]
    # Unknown task ids are 404, malformed ones never reach the service.
    ana = review.client("ana")
    assert ana.get("/api/tasks/task_99").status == 404
    assert ana.get("/api/tasks/..%2F..%2Fetc").status == 404


def test_cross_origin_writes_are_refused(review) -> None:
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana = review.client("ana")
    r = ana.request(
        "POST",
        "/api/tasks/task_1/phase1",
        phase1_body(gold_rows(0)),
        headers={"Origin": "http://evil.example"},
    )
    assert r.status == 403 and "cross-origin" in r.json()["error"]
    assert ana.ok("GET", "/api/tasks/task_1")["phase1_locked"] is False


@pytest.mark.parametrize(
    "path",
    [
        "../../output/task_1/gold.csv",
        "/etc/passwd",
        "notes/../../../output/task_1/gold.csv",
        "leak.csv",
        "./cities.csv",
        "notes//countries.json",
        "notes\\countries.json",
        "C:/windows",
        "cities.csv\0.txt",
    ],
)
def test_artifact_paths_cannot_escape(review, path: str) -> None:
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana = review.client("ana")
    for endpoint in ("file", "table", "markdown", "pdf"):
        r = ana.get(f"/api/tasks/task_1/{endpoint}", path=path)
        assert r.status in (400, 404), (endpoint, path, r.status)
        assert b"Lyon,522000" not in r.body and b"root:" not in r.body
    r = ana.post("/api/tasks/task_1/sqlite", {"path": path, "sql": "SELECT 1"})
    assert r.status in (400, 404)
    body = phase1_body(
        gold_rows(0),
        evidence=[
            {
                "path": path,
                "modality": "csv",
                "anchor_kind": "row",
                "anchor": "1",
                "fact": "f",
                "role": "filter",
            }
        ],
    )
    assert ana.post("/api/tasks/task_1/phase1", body).status == 400
    listed = [f["path"] for f in ana.ok("GET", "/api/tasks/task_1/files")]
    assert "leak.csv" not in listed and "cities.csv" in listed


def test_sqlite_viewer_is_read_only(review) -> None:
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana = review.client("ana")
    q = "/api/tasks/task_1/sqlite"
    res = ana.ok(
        "POST",
        q,
        {"path": "db/countries.sqlite", "sql": "SELECT code, name FROM countries ORDER BY code"},
    )
    assert res["header"] == ["code", "name"] and res["rows"][0] == ["AT", "Austria"]
    for sql in (
        "DELETE FROM countries",
        "DROP TABLE countries",
        "ATTACH DATABASE '/tmp/x.db' AS x",
        "PRAGMA writable_schema = 1",
        "INSERT INTO countries VALUES ('XX', 'x')",
    ):
        r = ana.post(q, {"path": "db/countries.sqlite", "sql": sql})
        assert r.status == 400, sql
    r = ana.post(
        q,
        {
            "path": "db/countries.sqlite",
            "sql": (
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
                "SELECT count(*) FROM n"
            ),
        },
    )
    assert r.status == 400 and "interrupted" in r.json()["error"]
    res = ana.ok(
        "POST", q, {"path": "db/countries.sqlite", "sql": "SELECT count(*) FROM countries"}
    )
    assert res["rows"] == [[4]]


def test_markdown_is_rendered_without_raw_html_and_raw_files_are_sandboxed(review) -> None:
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana = review.client("ana")
    html = ana.ok("GET", "/api/tasks/task_1/markdown", path="docs/readme.md")["html"]
    assert "<strong>2020 census</strong>" in html and "<script>" not in html
    raw = ana.get("/api/tasks/task_1/file", path="docs/readme.md")
    assert raw.headers["Content-Type"].startswith("text/plain")
    assert raw.headers["Content-Security-Policy"] == "sandbox"
    video = ana.request(
        "GET",
        "/api/tasks/task_1/file",
        params={"path": "media/briefing.mp4"},
        headers={"Range": "bytes=0-99"},
    )
    assert video.status == 206 and len(video.body) == 100
    assert video.headers["Content-Type"] == "video/mp4"
    png = ana.get("/api/tasks/task_1/pdf/page", path="docs/census.pdf", page="2")
    assert png.status == 200 and png.body[:8] == b"\x89PNG\r\n\x1a\n"


def test_keep_alive_connection_stays_in_step_after_bodies(review) -> None:
    """Guards: a POST whose body a handler ignores, or a refused one, must not leave bytes
    that the server then parses as the next request on the same connection."""
    import http.client

    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    ana = review.client("ana")
    host, port = review.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Content-Type": "application/json", "Cookie": ana.cookie or ""}
    try:
        for path in ("/api/tasks/task_1/accept", "/api/tasks/task_1/phase1"):
            conn.request("POST", path, body=b'{"x": 1}', headers=headers)
            assert conn.getresponse().read()
            conn.request("PUT", path, body=b"{}", headers=headers)
            reply = conn.getresponse()
            reply.read()
            assert reply.status == 405
            conn.request("GET", "/api/me", headers=headers)
            reply = conn.getresponse()
            assert reply.status == 200 and b'"ana"' in reply.read()
    finally:
        conn.close()
