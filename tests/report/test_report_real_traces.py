"""Trace pages of real attempts of every harness, in headless Chromium.

Each attempt runs through the attempt runner (``run_attempt``: a real local sandbox, the
real evaluator) on a small release; the model harnesses talk to the scripted servers on
loopback (Chat Completions; Responses for the real Codex CLI, Anthropic Messages for the
real Claude Code CLI, both behind their relays), with rate-limit faults injected. The
report over those attempts is opened in Chromium and each trace page is checked against the
attempt's results row: turns, tool calls, per-turn tokens and cost adding up to the row,
the question, the prediction beside the gold with the evaluator's explanation, retries
marked, images inline, and no console error.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import report_browser

from dataspace.testing.scripted_server import ScriptedServer
from dataspace.testing.scripted_wire import ScriptedMessagesServer, ScriptedResponsesServer
from dataspace.testing.synthetic import sample_png

pytestmark = [pytest.mark.integration, pytest.mark.sandbox, pytest.mark.llm]

KEY_ENV = "DATASPACE_TEST_MODEL_KEY"
SECRET = "sk-test-7d1f0c2be9a84e31b6c5a0d4"
PRICES = {"input": 2.0, "cached_input": 0.5, "output": 8.0}
ROWS = [["Lyon", 522000], ["Graz", 291000], ["Porto", 232000], ["Turku", 195000]]
QUESTIONS = {
    "task_1": "Which cities have a population above 250000?",
    "task_2": "哪些城市的人口超过 200000？Which cities have a population above 200000?",
}
THRESHOLDS = {"task_1": 250000, "task_2": 200000}


def _csv(rows: list[list[object]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def _bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


SUBMIT = {"name": "submit_answer", "arguments": {"path": "/output/prediction.csv"}}


def _program(threshold: int) -> str:
    return (
        "import pandas as pd; d = pd.read_csv('/workspace/cities.csv'); "
        f"d[d.population > {threshold}][['city', 'population']]"
        ".to_csv('/output/prediction.csv', index=False)"
    )


REACT_SCRIPTS = {
    # solves it: a rate-limited first turn, an image, a long output, then the answer
    "task_1": [
        {
            "content": "Let me look at the workspace first.",
            "tool_calls": [_bash("ls -la /workspace && head -3 /workspace/cities.csv")],
            "faults": [{"status": 429, "retry_after": 0.01, "times": 2}],
        },
        {"tool_calls": [{"name": "view_image", "arguments": {"path": "/workspace/chart.png"}}]},
        {"tool_calls": [_bash("seq 1 4000")]},
        {
            "content": "I will compute the answer with pandas.",
            "tool_calls": [_bash(f'python3 -c "{_program(250000)}"')],
        },
        {"tool_calls": [SUBMIT]},
    ],
    # answers with the wrong threshold: one city too many
    "task_2": [
        {"tool_calls": [_bash(f'python3 -c "{_program(150000)}"')]},
        {"tool_calls": [SUBMIT]},
    ],
}
SMOL_LOOK = (
    "Thought: look at the data\n<code>\nimport pandas as pd\n"
    "df = pd.read_csv('/workspace/cities.csv')\nprint(df.shape)\n</code>"
)
SMOL_WRITE = (
    "Thought: write the answer\n<code>\n"
    "df[df['population'] > 250000][['city', 'population']]"
    ".to_csv('/output/prediction.csv', index=False)\nfinal_answer('done')\n</code>"
)
NATIVE_SCRIPT = [
    # the native CLIs run their own shell tool
    {
        "content": "Let me look at the workspace first.",
        "shell": "ls /workspace && head -3 /workspace/cities.csv",
    },
    {"shell": f'python3 -c "{_program(250000)}" && cat /output/prediction.csv'},
    {"content": "prediction.csv is written: Lyon and Graz."},
]
NATIVE = {"codex": ScriptedResponsesServer, "claude-code": ScriptedMessagesServer}
# Claude Code retries a rate-limited request itself; Codex 0.145.0 in the official
# configuration gives up on the first 429 ("exceeded retry limit"), so its script has none
NATIVE_FAULTS = {"claude-code": [{"status": 429, "retry_after": 0.01, "times": 1}], "codex": []}


def _native_script(harness: str) -> list[dict[str, Any]]:
    first = {**NATIVE_SCRIPT[0], "faults": NATIVE_FAULTS[harness]}
    return [first, *NATIVE_SCRIPT[1:]]


SMOL_SCRIPTS = {
    "task_1": [
        {"content": SMOL_LOOK, "faults": [{"status": 429, "retry_after": 0.01, "times": 1}]},
        {"content": SMOL_WRITE},
    ]
}


@pytest.fixture(scope="module")
def local_backend() -> Any:
    try:
        from dataspace.sandbox import get_backend

        return get_backend("local")
    except Exception as exc:  # the backend refuses hosts without namespaces
        pytest.skip(f"local sandbox backend unavailable: {exc}")


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from dataspace.release import ReleaseWriter, TaskArtifacts

    dest = tmp_path_factory.mktemp("real-traces") / "release"
    with ReleaseWriter(dest) as w:
        for task, threshold in THRESHOLDS.items():
            cfg = {
                "schema_version": "1.0",
                "task_id": task,
                "order_sensitive": False,
                "columns": [
                    {"gold_index": 0, "gold_name": "city", "type": "text"},
                    {
                        "gold_index": 1,
                        "gold_name": "population",
                        "type": "number",
                        "comparison": {"mode": "integer"},
                    },
                ],
            }
            w.add_task(
                TaskArtifacts(
                    task_id=task,
                    question=QUESTIONS[task],
                    context={
                        "cities.csv": _csv(
                            [["city", "country", "population"]] + [[c, "XX", n] for c, n in ROWS]
                        ),
                        "chart.png": sample_png(120, 80),
                    },
                    gold_csv=_csv([["city", "population"], *[r for r in ROWS if r[1] > threshold]]),
                    config=cfg,
                )
            )
    for p in [dest, *dest.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return dest


def _agent(name: str, harness: str, url: str | None) -> Any:
    from dataspace.runs.spec import parse_spec

    entry: dict[str, Any] = {"name": name, "harness": harness}
    if url is not None:
        entry["model"] = {
            "id": "scripted-model",
            "base_url": url,
            "key_env": KEY_ENV,
            "prices": PRICES,
        }
        if harness not in NATIVE:
            entry["settings"] = {"retry": {"initial_backoff": 0.01, "max_backoff": 0.05}}
    # a native CLI (Node) needs more memory and processes than a Python loop
    sandbox = {"backend": "local", "cpus": 1, "memory": "1GiB"}
    if harness in NATIVE:
        sandbox = {"backend": "local", "cpus": 2, "memory": "4GiB", "pids": 512}
    spec = parse_spec(
        {
            "run_id": "real",
            "release": "/unused",
            "store": "/unused",
            "agents": [entry],
            "limits": {"wall_seconds": 180, "command_timeout": 60},
            "sandbox": sandbox,
        },
        source="test",
    )
    return spec.agents[0], spec


@pytest.fixture(scope="module")
def run(local_backend, release, tmp_path_factory):
    """Real attempts of gold, dataspace-agent, smolagents, Codex and Claude Code, and the
    report over them."""
    from dataspace.report import build_report
    from dataspace.runs.attempt import AttemptRequest, run_attempt
    from dataspace.runs.results import rows_to_parquet

    os.environ[KEY_ENV] = SECRET
    store = tmp_path_factory.mktemp("real-store")
    rows: list[dict[str, Any]] = []
    plan: list[tuple[str, str, dict[str, Any] | None, list[str]]] = [
        ("gold", "gold", None, ["task_1", "task_2"]),
        ("react", "dataspace-agent", REACT_SCRIPTS, ["task_1", "task_2"]),
    ]
    from dataspace.agents.smolagents_adapter import install_problem

    if install_problem() is not None:
        pytest.fail(f"the set-up installs the smolagents harness: {install_problem()}")
    plan.append(("smol", "smolagents", SMOL_SCRIPTS, ["task_1"]))
    from dataspace.agents.native.install import harness_state

    for harness in NATIVE:
        if not harness_state(harness).ready:
            pytest.fail(f"{harness} is installed by the set-up: {harness_state(harness).fix}")
        plan.append((harness, harness, {"task_1": _native_script(harness)}, ["task_1"]))
    for name, harness, scripts, tasks in plan:
        kind = NATIVE.get(harness, ScriptedServer)
        server = kind(scripts) if scripts is not None else None
        try:
            if server is not None:
                server.__enter__()
            agent, spec = _agent(name, harness, server.url if server else None)
            for task in tasks:
                rows.append(
                    run_attempt(
                        AttemptRequest(
                            run_id="real",
                            store_uri=str(store),
                            release_root=str(release),
                            agent=agent,
                            task_id=task,
                            attempt=1,
                            key=f"{name}-{task}",
                            limits=spec.limits,
                            sandbox=spec.sandbox,
                            submitted_at=time.time(),
                        )
                    )
                )
        finally:
            if server is not None:
                server.__exit__(None, None, None)
    run_dir = store / "runs" / "real"
    (run_dir / "results.parquet").write_bytes(rows_to_parquet(rows))
    res = build_report([str(run_dir)], out=str(run_dir), release=str(release))
    return rows, run_dir, res


@pytest.fixture(scope="module")
def browser():
    path = report_browser.find_chromium()
    if path is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    b = report_browser.Browser(path)
    yield b
    b.close()


def _row(rows: list[dict[str, Any]], agent: str, task: str) -> dict[str, Any]:
    return next(r for r in rows if r["agent"] == agent and r["task_id"] == task)


def _open(browser: Any, run_dir: Path, agent: str, task: str) -> Any:
    page = browser.new_page()
    load = page.goto((run_dir / f"report/traces/real/{agent}/{task}-1.html").as_uri())
    load = page.settle(load)
    assert load.errors == [], load.errors
    for url in load.requests:
        assert url.startswith(("file://", "data:", "about:")), url
    return page


def _column(page: Any, index: int) -> list[str]:
    return page.eval(
        "Array.from(document.querySelectorAll('#turns tbody tr')).filter(r => "
        "!r.id).map(r => r.cells[" + str(index) + "].textContent)"
    )


def _number(text: str) -> float:
    return 0.0 if text in ("", "-") else float(text.replace(",", ""))


def _check_usage(page: Any, row: dict[str, Any], turns: int | None = None) -> None:
    """Per-turn tokens and cost in the page add up to the attempt's results row."""
    turns = row["model_turns"] if turns is None else turns
    for index, key in ((3, "input_tokens"), (4, "cached_input_tokens"), (5, "output_tokens")):
        cells = _column(page, index)
        assert len(cells) == turns
        assert sum(_number(c) for c in cells) == row[key], (key, cells)
        assert row[key] > 0 or key == "cached_input_tokens"
    cost = sum(_number(c) for c in _column(page, 7))
    assert cost == pytest.approx(row["cost_usd"], abs=1e-5 * max(1, turns))
    assert not page.eval("!!document.getElementById('usage-mismatch')")


def _shots() -> Path:
    path = Path(os.environ.get("DATASPACE_SCREENSHOTS") or "/tmp")
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_the_attempts_are_real(run):
    rows, _, res = run
    by = {(r["agent"], r["task_id"]): r for r in rows}
    assert by[("gold", "task_1")]["passed"] is True
    assert by[("react", "task_1")]["passed"] is True
    assert by[("react", "task_2")]["error_code"] == "row_count_mismatch"
    assert by[("smol", "task_1")]["passed"] is True
    assert by[("react", "task_1")]["model_retries"] == 2
    assert res.traces == len(rows)


def test_dataspace_agent_trace_reads_as_a_conversation(browser, run):
    rows, run_dir, _ = run
    row = _row(rows, "react", "task_1")
    page = _open(browser, run_dir, "react", "task_1")
    assert page.eval("document.querySelectorAll('section.turn').length") == row["model_turns"] == 5
    assert page.eval("document.querySelectorAll('.tool-call').length") == row["tool_actions"] == 5
    counts = page.eval("document.getElementById('counts').textContent")
    assert counts.startswith("5 model turns · 5 tool calls · 2 retries"), counts
    _check_usage(page, row)
    assert QUESTIONS["task_1"] in page.eval("document.getElementById('question').textContent")
    prompt = page.eval("document.getElementById('system-prompt').textContent")
    assert "submit_answer" in prompt and len(prompt) > 500
    # the two rate-limited requests are marked on the first turn
    assert page.eval("document.querySelectorAll('#turn-1 .infra-retry').length") == 2
    # the image the model viewed is inline; the long output is folded
    assert page.eval("document.querySelectorAll('#turn-2 img.trace').length") == 1
    assert page.eval("document.querySelectorAll('#turn-3 details.fold').length") == 1
    assert "Let me look at the workspace" in page.eval(
        "document.querySelector('#turn-1 .model-message').textContent"
    )
    assert "ls -la /workspace" in page.eval("document.querySelector('#turn-1 .call').textContent")
    # the prediction beside the gold
    pred = page.eval("document.getElementById('prediction').textContent")
    gold = page.eval("document.getElementById('gold').textContent")
    assert "Lyon" in pred and "Graz" in pred and "Lyon" in gold and "Porto" not in gold
    page.screenshot(str(_shots() / "trace-dataspace-agent.png"), max_height=4000)


def test_a_wrong_answer_shows_the_evaluator_diagnosis(browser, run):
    rows, run_dir, _ = run
    row = _row(rows, "react", "task_2")
    page = _open(browser, run_dir, "react", "task_2")
    assert page.eval("document.querySelectorAll('section.turn').length") == row["model_turns"]
    _check_usage(page, row)
    why = page.eval("document.getElementById('diagnosis').textContent")
    assert "prediction row(s) are not in the gold" in why, why
    assert "row_count_mismatch" in page.eval("document.getElementById('answer').textContent")
    assert "Turku" in page.eval("document.getElementById('prediction').textContent")
    assert "Turku" not in page.eval("document.getElementById('gold').textContent")
    assert "哪些城市" in page.eval("document.getElementById('question').textContent")


def test_smolagents_trace_pairs_steps_with_model_calls(browser, run):
    rows, run_dir, _ = run
    row = _row(rows, "smol", "task_1")
    page = _open(browser, run_dir, "smol", "task_1")
    assert page.eval("document.querySelectorAll('section.turn').length") == row["model_turns"] == 2
    assert page.eval("document.querySelectorAll('.tool-call').length") == row["tool_actions"]
    _check_usage(page, row)
    text = page.eval("document.getElementById('conversation').textContent")
    assert "look at the data" in text and "final_answer" in text
    assert "(3, 3)" in text or "(4, 3)" in text  # the observation of print(df.shape)
    assert page.eval("document.querySelectorAll('#turn-1 .infra-retry').length") == 1
    assert QUESTIONS["task_1"] in page.eval("document.getElementById('question').textContent")
    assert "Lyon" in page.eval("document.getElementById('prediction').textContent")


@pytest.mark.parametrize("harness", list(NATIVE))
def test_native_cli_trace_reads_as_a_conversation(browser, run, harness):
    """The real Codex / Claude Code attempt: relay calls and the CLI's stream as turns."""
    rows, run_dir, _ = run
    row = _row(rows, harness, "task_1")
    assert row["passed"] is True, row
    page = _open(browser, run_dir, harness, "task_1")
    # one turn per model reply (Codex counts the whole exec as one turn of its own);
    # the rate-limited request is a retry on the first turn, not a turn
    turns, retries = len(NATIVE_SCRIPT), len(NATIVE_FAULTS[harness])
    assert page.eval("document.querySelectorAll('section.turn').length") == turns
    # the relay meters as the client does: a failed request is a retry, not a model call
    assert (row["model_calls"], row["model_retries"]) == (turns, retries)
    assert page.eval("document.querySelectorAll('#turn-1 .infra-retry').length") == retries
    assert page.eval("document.querySelectorAll('.tool-call').length") == row["tool_actions"] == 2
    counts = page.eval("document.getElementById('counts').textContent")
    assert counts.startswith(f"{turns} model turns · 2 tool calls · {retries} retries"), counts
    _check_usage(page, row, turns)
    assert QUESTIONS["task_1"] in page.eval("document.getElementById('question').textContent")
    assert len(page.eval("document.getElementById('system-prompt').textContent")) > 500
    assert "Let me look at the workspace" in page.eval(
        "document.querySelector('#turn-1 .model-message').textContent"
    )
    first = page.eval("document.querySelector('#turn-1 .tool-call').textContent")
    assert "head -3 /workspace/cities.csv" in first and "Lyon,XX,522000" in first, first
    second = page.eval("document.querySelector('#turn-2 .tool-call').textContent")
    assert "pandas" in second and "Graz,291000" in second, second
    assert "Lyon and Graz" in page.eval(
        "document.querySelector('#turn-3 .model-message').textContent"
    )
    assert page.eval("!!document.getElementById('harness-output')")
    pred = page.eval("document.getElementById('prediction').textContent")
    assert "Lyon" in pred and "Graz" in pred and "Porto" not in pred
    assert "correct" in page.eval("document.getElementById('answer').textContent")
    assert SECRET not in page.eval("document.documentElement.outerHTML")
    page.screenshot(str(_shots() / f"trace-{harness}.png"), max_height=4000)


def test_gold_trace_shows_its_actions(browser, run):
    rows, run_dir, _ = run
    row = _row(rows, "gold", "task_1")
    page = _open(browser, run_dir, "gold", "task_1")
    assert page.eval("document.querySelectorAll('section.turn').length") == row["model_turns"] == 0
    assert page.eval("document.querySelectorAll('.tool-call').length") == row["tool_actions"] == 3
    assert "cities.csv" in page.eval("document.getElementById('conversation').textContent")
    assert page.eval("!!document.getElementById('submitted')")
    assert QUESTIONS["task_1"] in page.eval("document.getElementById('question').textContent")
    assert "correct" in page.eval("document.getElementById('answer').textContent")


def test_the_report_links_every_trace(browser, run):
    rows, run_dir, res = run
    page = browser.new_page()
    load = page.settle(page.goto((run_dir / "report.html").as_uri()))
    assert load.errors == [], load.errors
    hrefs = page.eval("Array.from(document.querySelectorAll('a.att')).map(a => a.href)")
    assert len(hrefs) == len(rows)
    for href in hrefs:
        assert Path(href.removeprefix("file://")).is_file(), href
    json.dumps(res.notes)
    questions = page.eval(
        "Array.from(document.querySelectorAll('#per-task td.q')).map(td => td.textContent)"
    )
    assert questions == [QUESTIONS["task_1"], QUESTIONS["task_2"]]
    # the Chinese question renders with real glyphs: a CJK font is installed, so a
    # character is as wide as the font's em, unlike the fallback box of an unknown one
    widths = page.eval(
        "(() => { const w = t => { const s = document.createElement('span');"
        " s.style.fontSize = '40px'; s.textContent = t; document.body.appendChild(s);"
        " const x = s.getBoundingClientRect().width; s.remove(); return x; };"
        " return [w('城市'), w('\\u0378\\u0378')]; })()"
    )
    assert widths[0] == pytest.approx(80, abs=2) and widths[0] != widths[1], widths
    assert "row count mismatch" in page.eval("document.getElementById('t-failures').textContent")
    page.set_viewport(1400)
    page.screenshot(str(_shots() / "report-real.png"), max_height=6000)
