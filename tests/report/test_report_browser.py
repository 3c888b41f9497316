"""The HTML report and the trace pages in headless Chromium.

They load from file:// without console errors or exceptions, fetch nothing but the page
itself and inline data, show their tables and figures, a trace page is reachable from the
report, and a trace crafted to break out of its page renders as inert text.
Screenshots go to ``$DATASPACE_SCREENSHOTS`` when set (else the test's temporary folder).
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from pathlib import Path

import pytest
import report_browser

from dataspace.report import build_report
from dataspace.store import open_store
from dataspace.testing.scripted_server import LoopbackHTTPServer
from dataspace.testing.synthetic import (
    SAMPLE_PNG_URL,
    SyntheticAgent,
    default_agents,
    write_synthetic_run,
)

pytestmark = pytest.mark.integration

BREAKOUT = "echo '</script><script>window.__pwned=2</script>'"
HOSTILE_EVENTS = [
    {
        "t": 0.0,
        "type": "attempt_start",
        "schema": "dataspace.trace/1",
        "task": "task_1",
        "question": '<img src=x onerror="window.__pwned=1"> which cities?',
    },
    {
        "t": 0.1,
        "type": "agent_start",
        "harness": "dataspace-agent",
        "system_prompt": "You are a data agent. </details></pre><script>window.__pwned=7</script>",
    },
    {
        "t": 0.5,
        "type": "model_call",
        "input_tokens": 1200,
        "cached_input_tokens": 1000,
        "output_tokens": 80,
        "reasoning_tokens": 30,
        "cost_usd": 0.0021,
        "latency_seconds": 0.4,
    },
    {
        "t": 0.5,
        "type": "model_turn",
        "turn": 1,
        "content": None,
        "reasoning": "think </script> first",
        "tool_calls": [
            {"id": "c1", "name": "bash", "arguments": json.dumps({"command": BREAKOUT})}
        ],
    },
    {
        "t": 1.0,
        "type": "tool_result",
        "tool_call_id": "c1",
        "tool": "bash",
        "result": {
            "exit_code": 0,
            "stdout": "</script><script>window.__pwned=3</script>",
            "stderr": "<!-- <script>",
            "timed_out": True,
            "stdout_truncated": True,
        },
    },
    {
        "t": 1.2,
        "type": "image",
        "tool_call_id": "c1",
        "path": "/output/page.png",
        "data_url": "javascript:window.__pwned=4",
    },
    {"t": 1.3, "type": "image", "data_url": SAMPLE_PNG_URL, "path": "/output/ok.png"},
    {"t": 1.4, "type": "model_retry", "retry": 1, "error": "HTTP 503 <b>busy</b>"},
    {
        "t": 1.5,
        "type": "model_call",
        "input_tokens": 10,
        "output_tokens": 2,
        "cost_usd": 0.001,
        "latency_seconds": 0.1,
    },
    {"t": 1.5, "type": "model_turn", "turn": 2, "content": "a plain string reply"},
    {"t": 1.6, "type": "model_turn", "turn": 3, "content": ["parts", {"weird": [1, 2]}]},
    {"t": 2.0, "type": "__proto__", "value": {"nested": ["<b>not bold</b>"]}},
    {"t": 2.1, "type": "constructor"},
    {"t": 2.2, "type": 5},
    {"t": 2.5, "type": "error", "message": "boom <script>window.__pwned=5</script>"},
    {"t": 3.0, "type": "submit", "path": "/output/prediction.csv"},
    {"t": 3.1, "type": "brand_new_event", "payload": {"deep": {"er": [None, True, 1.5]}}},
]
RAW_TAIL = ["this line is not JSON <!--<script>window.__pwned=6</script>", "42", "[1, 2]"]


def _chromium_or_skip() -> str:
    path = report_browser.find_chromium()
    if path is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return path


@pytest.fixture(scope="module")
def browser():
    b = report_browser.Browser(_chromium_or_skip())
    yield b
    b.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser-store")
    store = open_store(str(root), fsync=False)
    write_synthetic_run(store, "web", agents=default_agents(4), tasks=12, attempts=2, seed=5)
    folder = "runs/web/attempts/model-1/task_1/1"
    body = "".join(json.dumps(e) + "\n" for e in HOSTILE_EVENTS) + "\n".join(RAW_TAIL) + "\n"
    store.delete(f"{folder}/events.jsonl")
    store.put_bytes(f"{folder}/events.jsonl", body.encode())
    out = root / "out"
    res = build_report([str(root / "runs" / "web")], out=str(out))
    return res, out


def _shots() -> Path | None:
    env = os.environ.get("DATASPACE_SCREENSHOTS")
    if env:
        Path(env).mkdir(parents=True, exist_ok=True)
        return Path(env)
    return None


def _assert_clean(load) -> None:
    assert load.errors == [], load.errors
    for url in load.requests:  # the page itself and inline images only
        assert url.startswith(("file://", "data:", "about:")), url


def test_report_loads_clean_with_tables_figures_and_trace_links(browser, report, tmp_path):
    res, out = report
    page = browser.new_page()
    load = page.goto((out / "report.html").as_uri())
    _assert_clean(load)
    assert page.eval("document.querySelectorAll('table').length") >= 10
    assert page.eval("document.querySelectorAll('figure svg').length") == len(res.figures)
    for table_id in (
        "t-accuracy",
        "t-efficiency_paper",
        "t-efficiency",
        "t-efficiency_actions",
        "t-timings",
        "t-characteristics",
        "t-overlap",
        "t-pass_at_k",
        "per-task",
    ):
        assert page.eval(f"!!document.getElementById('{table_id}')"), table_id
    rows = page.eval("document.querySelectorAll('#t-accuracy tbody tr').length")
    assert rows == len(res.data["accuracy"])
    # sorting a table by clicking its header runs without errors and reorders the rows
    first = page.eval("document.querySelector('#t-accuracy tbody td').textContent")
    sort_of = "Array.from(document.querySelectorAll('#t-accuracy th')).map(h => h.ariaSort)"
    assert set(page.eval(sort_of)) == {"none"}
    page.eval("document.querySelectorAll('#t-accuracy th')[0].click()")
    assert page.eval(sort_of)[:2] == ["ascending", "none"]
    page.eval("document.querySelectorAll('#t-accuracy th')[0].click()")
    assert page.eval(sort_of)[0] == "descending"  # the sort state shows (an arrow via CSS)
    arrow = "getComputedStyle(document.querySelectorAll('#t-accuracy th')[0], '::after').content"
    assert "\u25bc" in page.eval(arrow)
    after = page.eval("document.querySelector('#t-accuracy tbody td').textContent")
    assert first and after
    links = page.eval("Array.from(document.querySelectorAll('a.att')).length")
    assert links == res.traces
    shots = _shots() or tmp_path
    page.screenshot(str(shots / "report.png"), max_height=6000)
    assert (shots / "report.png").stat().st_size > 10_000
    # follow a link from the report to a trace page and back
    href = page.eval("document.querySelector('a.att').href")
    load = page.goto(href)
    _assert_clean(page.settle(load))
    assert page.eval("document.querySelectorAll('#turns tbody tr').length") >= 3
    assert page.eval("document.querySelectorAll('section.turn').length") >= 1
    assert page.eval("document.querySelectorAll('.tool-call').length") >= 1
    assert "Which cities" in page.eval("document.getElementById('question').textContent")
    page.screenshot(str(shots / "trace.png"))
    back = page.eval("document.getElementById('back').href")
    assert back == (out / "report.html").as_uri()


def test_a_hostile_trace_renders_as_text(browser, report, tmp_path):
    _res, out = report
    page = browser.new_page()
    load = page.goto((out / "report/traces/web/model-1/task_1-1.html").as_uri())
    _assert_clean(page.settle(load))
    assert page.eval("typeof window.__pwned") == "undefined"
    assert page.eval("document.querySelectorAll('script').length") == 0  # the page needs none
    assert page.eval("document.querySelectorAll('#conversation b').length") == 0
    text = page.eval("document.body.textContent")
    for needle in (
        "window.__pwned=1",
        "window.__pwned=2",
        "window.__pwned=3",
        "window.__pwned=5",
        "window.__pwned=6",
        "window.__pwned=7",
        "brand_new_event",
        "a plain string reply",
        "not bold",
        "timed out",
        "output truncated by the harness",
        "HTTP 503 <b>busy</b>",
        "this line is not JSON",
    ):
        assert needle in text, needle
    srcs = page.eval("Array.from(document.querySelectorAll('img')).map(i => i.src)")
    assert len(srcs) == 1 and srcs[0].startswith("data:image/png;base64,")
    assert page.eval("document.querySelectorAll('section.turn').length") == 3
    assert page.eval("document.querySelectorAll('#turns tbody tr').length") == 5  # 3+total+row
    cells = page.eval(
        "Array.from(document.querySelectorAll('#turns tbody tr')[0].cells).map(c => c.textContent)"
    )
    assert cells[3:7] == ["1,200", "1,000", "80", "30"]
    assert page.eval("document.querySelectorAll('.infra-retry').length") == 1
    shots = _shots() or tmp_path
    page.screenshot(str(shots / "trace-hostile.png"))


@pytest.fixture(scope="module")
def wide_report(tmp_path_factory):
    """Eleven agents over 30 tasks compared with two agents over 12: a laptop-sized report."""
    root = tmp_path_factory.mktemp("wide-store")
    store = open_store(str(root), fsync=False)
    write_synthetic_run(store, "wide", agents=default_agents(11), tasks=30, seed=11)
    write_synthetic_run(
        store,
        "other",
        agents=[SyntheticAgent(name="late-agent", model="other/model", skill=0.4)],
        tasks=12,
        seed=12,
    )
    out = root / "out"
    res = build_report(
        [str(root / "runs" / "wide"), str(root / "runs" / "other")], out=str(out), traces="none"
    )
    return res, out


def test_report_fits_a_laptop_screen_and_breaks_failures_down(browser, wide_report, tmp_path):
    res, out = wide_report
    page = browser.new_page()
    page.set_viewport(1366)  # the commonest laptop screen
    load = page.settle(page.goto((out / "report.html").as_uri()))
    _assert_clean(load)
    page.eval("document.querySelectorAll('details').forEach(d => d.open = true)")
    wide = page.eval(
        "Array.from(document.querySelectorAll('.wrap')).filter(w => w.scrollWidth > "
        "w.clientWidth + 1).map(w => w.querySelector('table').id)"
    )
    assert wide == [], wide
    assert page.eval("document.documentElement.scrollWidth") <= 1366
    # failures by error code, one row per agent, codes as columns
    heads = page.eval(
        "Array.from(document.querySelectorAll('#t-failures th')).map(t => t.textContent)"
    )
    assert heads[:3] == ["agent", "scored", "incorrect"] and "relation mismatch" in heads
    assert page.eval("document.querySelectorAll('#t-failures tbody tr').length") == 12
    fail = res.data["failures"]
    assert (
        fail["incorrect"] == fail.drop(columns=["label", "scored", "incorrect"]).sum(axis=1)
    ).all()
    # different task sets: a warning, and the comparisons on the common tasks only
    notes = page.eval("Array.from(document.querySelectorAll('p.note')).map(p => p.textContent)")
    assert any("different task sets" in n and "12 tasks common" in n for n in notes), notes
    assert set(res.data["pareto"]["label"]) == set(res.data["accuracy"]["label"])
    # the per-task table: characteristics and error-code marks per attempt
    assert page.eval("document.querySelectorAll('#per-task tbody tr').length") == 30
    marks = page.eval(
        "Array.from(document.querySelectorAll('#per-task .att.bad')).map(a => a.title)"
    )
    assert marks and all("attempt 1:" in m for m in marks)
    assert any("relation_mismatch" in m for m in marks)
    shots = _shots() or tmp_path
    page.screenshot(str(shots / "report-wide.png"), max_height=9000)


def test_one_agent_gets_no_comparison_plots(tmp_path):
    store = open_store(str(tmp_path), fsync=False)
    write_synthetic_run(store, "solo", agents=default_agents(1), tasks=8, seed=4)
    res = build_report([str(tmp_path / "runs" / "solo")], traces="none")
    assert "pareto" not in res.figures and "spread" not in res.figures
    assert "accuracy" in res.figures
    html = (tmp_path / "runs" / "solo" / "report.html").read_text(encoding="utf-8")
    assert "it takes two or more agents" in html


def test_tables_show_intervals_and_the_pairwise_matrix_reads_at_1366_px(browser, tmp_path):
    """Guards the uncertainty sections: intervals in the tables, a 6x6 matrix that fits."""
    store = open_store(str(tmp_path / "store"), fsync=False)
    write_synthetic_run(store, "six", agents=default_agents(6), tasks=40, attempts=2, seed=27)
    out = tmp_path / "out"
    build_report(
        [str(tmp_path / "store" / "runs" / "six")],
        out=str(out),
        review_url="http://127.0.0.1:8765",
    )
    page = browser.new_page()
    page.set_viewport(1366)
    load = page.settle(page.goto((out / "report.html").as_uri()))
    _assert_clean(load)
    page.eval("document.querySelectorAll('details').forEach(d => d.open = true)")
    interval = r"/^\d+\.\d+ \[\d+\.\d+, \d+\.\d+\]$/"

    def column(table: str, header: str) -> list[str]:
        return page.eval(
            f"(() => {{ const t = document.querySelector('#{table}');"
            "const i = Array.from(t.querySelectorAll('thead th')).map(h => h.textContent)"
            f".indexOf({json.dumps(header)});"
            "return Array.from(t.querySelectorAll('tbody tr')).map(r => r.cells[i].textContent);"
            "})()"
        )

    for table, header in (
        ("t-accuracy", "accuracy % [interval]"),
        ("t-efficiency", "tokens K mean"),
        ("t-efficiency", "cost/task USD"),
        ("t-pass_at_k", "pass@2 %"),
    ):
        cells = column(table, header)
        assert len(cells) == 6, (table, cells)
        assert page.eval(f"{json.dumps(cells)}.every(c => {interval}.test(c))"), (table, cells)
    assert all(g and g.isalpha() for g in column("t-accuracy", "group"))
    # the matrix: 6 x 6 cells, off-diagonal ones with a difference, interval and p
    cells = page.eval(
        "Array.from(document.querySelectorAll('#t-pairwise-matrix td')).map(c => c.textContent)"
    )
    assert len(cells) == 36 and cells.count("·") == 6
    assert all("[" in c and "p=" in c and "tasks" in c for c in cells if c != "·")
    wide = page.eval(
        "Array.from(document.querySelectorAll('.wrap')).filter(w => w.scrollWidth > "
        "w.clientWidth + 1).map(w => w.querySelector('table').id)"
    )
    assert wide == [], wide
    assert page.eval("document.documentElement.scrollWidth") <= 1366
    # the tasks no agent solved link to their traces and to the review console
    links = page.eval(
        "Array.from(document.querySelectorAll('#unsolved a')).map(a => a.getAttribute('href'))"
    )
    unsolved = page.eval("document.querySelectorAll('#unsolved li').length")
    if unsolved:
        assert any(h.startswith("http://127.0.0.1:8765/#task_") for h in links), links
        assert any(h.startswith("report/traces/") for h in links), links
    shots = _shots() or tmp_path
    page.screenshot(str(shots / "report-pairwise.png"), max_height=3200)


def test_a_wait_goes_on_across_a_reload_that_cuts_its_evaluation_off():
    """The review console reloads itself on logout; a wait polling then must not fail.

    The poll's first evaluation blocks in a synchronous request to a loopback server; while
    it blocks, the page is reloaded, which cuts the evaluation off ("Inspected target
    navigated or closed"). The server lets the blocked request go only once the evaluation
    has been cut off, so that happens on every run, not by chance.
    """
    blocked, gate = threading.Event(), threading.Event()
    seen: list[str] = []
    page_html = b"<body><script>sessionStorage.loads = +(sessionStorage.loads || 0) + 1</script>"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            if self.path == "/block":
                blocked.set()
                gate.wait(20)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page_html)))
            self.end_headers()
            self.wfile.write(page_html)

        def log_message(self, *args) -> None:
            pass

    server, _ = LoopbackHTTPServer.serve(Handler, name="reloading-page")
    b = report_browser.Browser(_chromium_or_skip(), allow_hosts=("127.0.0.1",))
    try:
        page = b.new_page()
        page.goto(f"http://127.0.0.1:{server.server_port}/")
        cut_off: list[str] = []
        evaluate = page.eval

        def noting_cut_offs(expression: str):
            try:
                return evaluate(expression)
            except RuntimeError as e:
                cut_off.append(str(e))
                gate.set()
                raise

        page.eval = noting_cut_offs  # type: ignore[method-assign]

        def reload_when_blocked() -> None:
            if blocked.wait(20):
                b.send("Page.reload", {}, session=page.session)

        reloader = threading.Thread(target=reload_when_blocked)
        reloader.start()
        block = "(x => (x.open('GET', '/block', false), x.send(), false))(new XMLHttpRequest())"
        value = page.wait_for(f"+sessionStorage.loads >= 2 ? 'reloaded' : {block}", timeout=30)
        reloader.join(30)
        assert value == "reloaded"
        assert len(cut_off) == 1 and "navigated or closed" in cut_off[0], cut_off
        # a poll may reach the new document before its script has counted the load
        pages = [path for path in seen if path != "/favicon.ico"]
        assert pages[:3] == ["/", "/block", "/"] and set(pages[3:]) <= {"/block"}, seen
    finally:
        gate.set()
        b.close()
        server.shutdown()
        server.server_close()
