"""The failure audit: proposals through the metered client against the scripted model
server, blank proposals without a model, confirmation and revision (CLI and console), and
the confirmed Figure-7 matrix and Table-13 subtypes in the run report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from dataspace.audit.confirm import AuditConsole, AuditFile
from dataspace.audit.propose import run_audit, trace_steps
from dataspace.llm.client import MeteredClient
from dataspace.llm.models import ModelSpec
from dataspace.store import open_store
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer
from dataspace.testing.synthetic import SyntheticAgent, write_synthetic_run

pytestmark = pytest.mark.integration

KEY_ENV = "DATASPACE_TEST_AUDITOR_KEY"


@pytest.fixture()
def run_dir(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    release = write_tiny_release(tmp_path / "release", tasks=6)
    store = open_store(str(tmp_path / "store"))
    agent = SyntheticAgent(
        name="weak", model="example/weak", skill=0.2, tokens=50_000, price_per_mtok=1.0
    )
    rows = write_synthetic_run(store, "r1", agents=[agent], tasks=6, seed=3)
    failed = sorted(
        r["task_id"]
        for r in rows
        if not r["passed"] and r["status"] != "infrastructure_error" and r["attempt"] == 1
    )
    assert len(failed) >= 2, rows
    return tmp_path / "store" / "runs" / "r1", release, failed


def _events(run: Path, task: str) -> list[dict]:
    path = run / "attempts" / "weak" / task / "1" / "events.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_audit_proposes_through_the_scripted_model_and_report_shows_confirmed(
    run_dir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, release, failed = run_dir
    scripts = {}
    cited = {}
    for k, task in enumerate(failed):
        steps = trace_steps(_events(run, task))
        event = next(s["event"] for s in steps if s["kind"] == "tool_call")
        cited[task] = event
        answer = {
            "subtype": "M1" if k % 2 == 0 else "Q1",
            "event": event,
            "counterfactual": "project only city and population",
            "rationale": f"event {event} writes the wrong columns",
        }
        first = {"content": json.dumps({"subtype": "Z9", "event": 9999})} if k == 0 else None
        scripts[task] = [s for s in (first, {"content": json.dumps(answer)}) if s]
    monkeypatch.setenv(KEY_ENV, "sk-test-not-a-real-key")
    with ScriptedServer(scripts) as srv:
        client = MeteredClient(
            ModelSpec(
                id="auditor", base_url=srv.url, key_env=KEY_ENV, price_input=1.0, price_output=2.0
            )
        )
        out = run_audit(str(run), agent="weak", release=str(release), client=client)
        # The refused first answer went back to the model with the problems named.
        retry_msgs = [r for r in srv.requests if failed[0] in json.dumps(r.body)]
        assert any("not in the taxonomy" in json.dumps(r.body) for r in retry_msgs)
    assert out.proposed == len(failed) and out.blank == 0
    assert out.usage["model_calls"] == len(failed) + 1 and out.usage["cost_usd"] > 0
    doc = json.loads((run / "audit" / "weak" / "audit.json").read_text())
    by_task = {i["task_id"]: i for i in doc["items"]}
    assert set(by_task) == set(failed)
    results = pd.read_parquet(run.parent.parent / "runs" / "r1" / "results.parquet")
    for task, item in by_task.items():
        p = item["proposal"]
        assert p["event"] == cited[task] and p["event_summary"]
        assert p["stage"] == p["subtype"][0] and p["model"] == "auditor"
        code = results[(results["task_id"] == task) & (results["attempt"] == 1)]["error_code"]
        assert item["error_code"] == code.iloc[0]
        assert item["symptom"]

    # Rerun without a model keeps every proposal (resumable).
    again = run_audit(str(run), agent="weak", release=str(release), client=None)
    assert again.kept == len(failed) and again.proposed == 0

    # Confirm one proposal from the CLI, revise another in the console.
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "dataspace.cli",
            "audit",
            str(run),
            "--agent",
            "weak",
            "--confirm",
            f"{failed[0]}=M1",
            "--by",
            "lead",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert f"{failed[0]} #1: M1 (confirmed)" in res.stdout
    console = AuditConsole(AuditFile(str(run), "weak"), by="sam").start()
    try:
        bad = urllib.request.Request(console.url.split("?")[0], method="GET")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(bad, timeout=30)
        assert info.value.code == 401
        page = urllib.request.urlopen(console.url, timeout=30).read().decode()
        assert failed[1] in page and "Confirm" in page
        form = urllib.parse.urlencode(
            {
                "task": failed[1],
                "attempt": "1",
                "subtype": "G4",
                "note": "the trace merges two sources",
            }
        ).encode()
        token = console.url.split("token=")[1]
        req = urllib.request.Request(
            f"{console.url.split('?')[0]}confirm?token={token}", data=form, method="POST"
        )
        page = urllib.request.urlopen(req, timeout=30).read().decode()
        assert "confirmed G4 by sam" in page
    finally:
        console.stop()
    doc = json.loads((run / "audit" / "weak" / "audit.json").read_text())
    by_task = {i["task_id"]: i for i in doc["items"]}
    assert by_task[failed[1]]["confirmed"]["revised"] is (
        by_task[failed[1]]["proposal"]["subtype"] != "G4"
    )

    # The report counts confirmed causes only.
    res = subprocess.run(
        [sys.executable, "-m", "dataspace.cli", "report", str(run), "--out", str(tmp_path / "rep")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    html = (tmp_path / "rep" / "report.html").read_text()
    assert 'id="audit"' in html and "audit-matrix-weak" in html
    assert "2 confirmed causes" in html
    assert f"{len(failed) - 2} awaiting a decision" in html
    sym0 = by_task[failed[0]]["symptom"]
    assert f"<th>{sym0}</th>" in html
    assert "<td>M1</td>" in html and "<td>G4</td>" in html


def test_audit_without_a_model_leaves_proposals_blank(run_dir) -> None:
    run, release, failed = run_dir
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "dataspace.cli",
            "audit",
            str(run),
            "--agent",
            "weak",
            "--release",
            str(release),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert res.returncode == 0, res.stderr
    assert f"0 proposed, {len(failed)} left blank" in res.stdout
    doc = json.loads((run / "audit" / "weak" / "audit.json").read_text())
    assert all(i["proposal"] is None for i in doc["items"])
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "dataspace.cli",
            "audit",
            str(run),
            "--agent",
            "nobody",
            "--release",
            str(release),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "no attempts of agent 'nobody'" in res.stderr
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "dataspace.cli",
            "audit",
            str(run),
            "--agent",
            "weak",
            "--confirm",
            f"{failed[0]}=X1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "not a subtype" in res.stderr


def test_audit_console_in_the_browser(run_dir, tmp_path: Path) -> None:
    import report_browser

    exe = report_browser.find_chromium()
    if exe is None:
        pytest.skip("chromium is not installed (scripts/system-packages.txt lists it)")
    run, release, failed = run_dir
    run_audit(str(run), agent="weak", release=str(release), client=None)
    console = AuditConsole(AuditFile(str(run), "weak"), by="ria").start()
    browser = report_browser.Browser(exe, allow_hosts=("127.0.0.1",))
    try:
        page = browser.new_page()
        load = page.goto(console.url)
        rows = page.eval("document.querySelectorAll('#audit tr[data-task]').length")
        assert rows == len(failed)
        row = f"#audit tr[data-task={failed[0]}]"
        page.eval(f"document.querySelector('{row} select').value = 'E1'")
        page.eval(f"document.querySelector('{row} input[name=note]').value = 'page 2 skipped'")
        page.eval(f"document.querySelector('{row} button').click()")
        page.wait_for(
            f"(document.querySelector('{row} .ok') || {{}}).textContent === 'confirmed E1 by ria'"
        )
        page.settle(load)
        assert [e for e in load.errors if e.startswith(("exception", "console"))] == []
        page.screenshot(str(tmp_path / "audit-console.png"))
    finally:
        browser.close()
        console.stop()
    doc = json.loads((run / "audit" / "weak" / "audit.json").read_text())
    item = next(i for i in doc["items"] if i["task_id"] == failed[0])
    assert item["confirmed"]["subtype"] == "E1" and item["confirmed"]["revised"] is True
    assert item["confirmed"]["note"] == "page 2 skipped"
