"""The review console in headless Chromium: two reviewers and an administrator.

Task 1 reaches consensus and is accepted; task 2 disagrees on the config, is discussed,
repaired, rechecked and accepted; task 3 is removed. Every step goes through the page
(forms, viewers, buttons), so the console's requests are the ones a person makes. The
export is a valid release whose repaired task carries version 2, and the event log
replays to the stored state. The page fetches nothing outside the server.
Screenshots go to ``$DATASPACE_SCREENSHOTS`` when set (else the test's temporary folder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import report_browser
from conftest import PASSWORD

from builder.review import Database, ReviewService
from dataspace.release import Release

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HELPERS = r"""
window.T = {
  set(sel, v) { const e = document.querySelector(sel); e.value = v;
    e.dispatchEvent(new Event('input', {bubbles: true}));
    e.dispatchEvent(new Event('change', {bubbles: true})); return true; },
  click(sel) { document.querySelector(sel).click(); return true; },
  check(sel, on) { const e = document.querySelector(sel); e.checked = on; return true; },
  visible(sel) { const e = document.querySelector(sel); return !!e && !e.closest('.hidden'); },
  text(sel) { const e = document.querySelector(sel); return e ? e.textContent : null; },
};
true
"""


def _await(page: report_browser.Page, expression: str, timeout: float = 30.0) -> Any:
    res = page.b.send(
        "Runtime.evaluate",
        {"expression": expression, "awaitPromise": True, "returnByValue": True},
        session=page.session,
        timeout=timeout,
    )
    if "exceptionDetails" in res:
        raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
    return res["result"].get("value")


class Person:
    """One user driving the console in the page."""

    def __init__(self, page: report_browser.Page, base: str, shots: Path) -> None:
        self.page = page
        self.base = base
        self.shots = shots
        self.loads: list[report_browser.PageLoad] = []

    def login(self, name: str) -> None:
        load = self.page.goto(self.base + "/")
        self.loads.append(load)
        self.page.eval(HELPERS)
        self.page.wait_for("T.visible('#login-form')")
        self.page.eval(f"T.set('#login-name', {json.dumps(name)})")
        self.page.eval(f"T.set('#login-password', {json.dumps(PASSWORD)})")
        self.page.eval("T.click('#login-submit')")
        self.page.wait_for("document.body.dataset.ready === '1'")
        assert self.page.eval("T.text('#whoami')").startswith(name)

    def logout(self) -> None:
        self.page.eval("T.click('#logout')")
        self.page.wait_for("!window.T || T.visible('#login-form')", timeout=15)

    def open(self, task: str) -> None:
        self.page.eval("document.body.dataset.task = ''")
        self.page.eval(f"document.querySelector('[data-task={task}]').click()")
        self.page.wait_for(f"document.body.dataset.task === '{task}'")

    def act(self, button: str, task: str, error: str) -> None:
        """Click a button that reloads the task view; fail with the page's error text."""
        self.page.eval("document.body.dataset.task = ''")
        self.page.eval(f"T.click('{button}')")
        self.page.wait_for(f"document.body.dataset.task === '{task}' || T.text('{error}')")
        assert self.page.eval(f"T.text('{error}')") == ""

    def shot(self, name: str) -> None:
        self.page.screenshot(str(self.shots / f"{name}.png"))

    def file(self, path: str) -> None:
        self.page.eval(f"document.querySelector('[data-path=\"{path}\"]').click()")
        self.page.wait_for(f"document.querySelector('#viewer').dataset.loaded === '{path}'")

    def solve(self, task: str, rows: list[tuple[str, int]], *, explore: bool = False) -> None:
        """Phase 1 in the page: look at the workspace, anchor evidence, submit."""
        self.open(task)
        assert self.page.eval("T.visible('#phase1')") and not self.page.eval(
            "T.visible('#comparison')"
        )
        self.file("cities.csv")
        self.page.wait_for("document.querySelectorAll('#viewer table tbody tr').length === 4")
        self.page.eval("T.set('#row-anchor', '2-4')")
        self.page.eval("T.click('#viewer .anchor-btn')")
        if explore:
            self.explore()
        csv = "city,population\n" + "".join(f"{c},{p}\n" for c, p in rows)
        self.page.eval(f"T.set('#p1-result', {json.dumps(csv)})")
        n = self.page.eval("document.querySelectorAll('#evidence-rows tr.evidence').length")
        for i in range(1, n + 1):
            row = f"#evidence-rows tr.evidence:nth-child({i})"
            self.page.eval(f"T.set('{row} .ev-fact', 'population above the threshold')")
            self.page.eval(f"T.set('{row} .ev-role', 'filter')")
        self.page.eval("T.set('#sem-grain', 'one row per city')")
        self.page.eval("T.set('#p1-confidence', '4')")
        self.page.eval("T.check('#p1-issues input[value=\"question.ambiguous_unit\"]', true)")
        if explore:
            self.shot(f"phase1-{task}")
        self.act("#p1-submit", task, "#p1-error")
        assert self.page.eval("T.visible('#phase2') && T.visible('#comparison')")

    def explore(self) -> None:
        """Every native viewer: SQLite query, Markdown, PDF page, video timestamp anchor."""
        p = self.page
        p.eval("document.querySelector('[data-modality=sqlite]').click()")
        p.wait_for("document.querySelectorAll('#file-list li').length === 1")
        self.file("db/countries.sqlite")
        p.eval("T.set('#sql-input', 'SELECT code, name FROM countries ORDER BY code')")
        p.eval("T.click('#sql-run')")
        p.wait_for("document.querySelectorAll('#sql-output tbody tr').length === 4")
        p.eval("T.set('#sql-input', 'DELETE FROM countries')")
        p.eval("T.click('#sql-run')")
        p.wait_for("(T.text('#sql-output') || '').includes('refused')")
        p.eval("document.querySelector('[data-modality=all]').click()")
        p.wait_for("document.querySelectorAll('#file-list li').length === 6")
        self.file("docs/readme.md")
        p.wait_for("!!document.querySelector('#markdown-view strong')")
        assert p.eval("document.querySelector('#markdown-view script') === null")
        assert not p.eval("window.__md_pwned === 1")
        self.file("docs/census.pdf")
        p.wait_for("document.querySelector('#pdf-page').naturalWidth > 100")
        p.eval("T.set('#pdf-page-num', '2')")
        p.wait_for("document.querySelector('#pdf-page').src.endsWith('page=2')")
        p.wait_for("document.querySelector('#pdf-page').complete")
        self.shot("viewer-pdf")
        self.file("media/briefing.mp4")
        p.wait_for("document.querySelector('#video-view').readyState >= 1", timeout=30)
        assert p.eval("document.querySelector('#video-view').duration") > 1.5
        p.eval("T.set('#video-time', '1.2')")
        p.eval("T.click('#video-seek')")
        p.wait_for("Math.abs(document.querySelector('#video-view').currentTime - 1.2) < 0.01")
        p.eval("T.click('#video-grab')")
        assert p.eval("T.text('#video-time') !== null")
        p.eval("T.click('#viewer .anchor-btn')")
        last = "#evidence-rows tr.evidence:last-child"
        assert p.eval(f"document.querySelector('{last} .ev-kind').value") == "timestamp"
        assert p.eval(f"document.querySelector('{last} .ev-anchor').value") == "1.20"
        assert p.eval(f"document.querySelector('{last} .ev-modality').value") == "video"

    def verify(
        self, *, population: str = "number", verdict: str = "match", disposition: str = "pass"
    ) -> None:
        """Phase 2 in the page: read the comparison, author the config, submit."""
        p = self.page
        p.wait_for("T.visible('#phase2')")
        assert p.eval("document.querySelectorAll('#gold-table tbody tr').length") >= 1
        p.eval(f"T.set('#p2-verdict', '{verdict}')")
        p.eval(f"T.set('#p2-disposition', '{disposition}')")
        p.eval(f"T.set('#cfg-rows tr.cfg:nth-child(2) .cfg-type', '{population}')")
        p.eval("T.set('#cfg-rows tr.cfg:nth-child(2) .cfg-mode', 'integer')")
        self.act("#p2-submit", str(p.eval("document.body.dataset.task")), "#p2-error")
        assert p.eval("!T.visible('#phase2') && T.visible('#records')")

    def state(self) -> str:
        return str(self.page.eval("document.body.dataset.taskState"))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dataspace.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_two_reviewers_and_an_admin_in_the_browser(review, tmp_path: Path) -> None:
    exe = report_browser.find_chromium()
    if exe is None:
        pytest.skip("chromium is not installed (scripts/system-packages.txt lists it)")
    shots = Path(os.environ.get("DATASPACE_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    browser = report_browser.Browser(exe, allow_hosts=("127.0.0.1",))
    try:
        me = Person(browser.new_page(), review.url, shots)
        gold = {
            "task_1": [("Lyon", 522000), ("Graz", 291000), ("Porto", 232000)],
            "task_2": [("Lyon", 522000), ("Graz", 291000), ("Porto", 232000)],
            "task_3": [("Lyon", 522000), ("Graz", 291000), ("Porto", 232000)],
        }

        # ana: all three tasks; the first with every viewer.
        me.login("ana")
        me.solve("task_1", gold["task_1"], explore=True)
        assert "equals the gold" in me.page.eval("T.text('#diag-summary')")
        me.shot("phase2-task_1")
        me.verify()
        me.solve("task_2", gold["task_2"])
        me.verify()
        me.solve("task_3", gold["task_3"][:2])
        assert "differs" in me.page.eval("T.text('#diag-summary')")
        assert "missing from yours" in me.page.eval("T.text('#diag-rows')")
        me.verify(verdict="mismatch", disposition="remove")
        me.logout()

        # ben: same answers; on task_2 he writes population as text.
        me.login("ben")
        me.solve("task_1", gold["task_1"])
        me.verify()
        assert me.state() == "consensus"
        me.shot("records-task_1")
        me.solve("task_2", gold["task_2"])
        me.verify(population="text")
        assert me.state() == "adjudication"
        me.page.wait_for("T.visible('#discussion')")
        me.page.eval("T.set('#msg-text', 'cities.csv holds integer counts; compare as integers')")
        me.page.eval("T.set('#msg-path', 'cities.csv')")
        me.page.eval("T.set('#msg-anchor', 'column population')")
        me.page.eval("T.click('#msg-submit')")
        me.page.wait_for("document.querySelectorAll('#messages li').length === 1")
        me.solve("task_3", gold["task_3"])
        me.verify()
        me.logout()

        # root: accept task_1, repair task_2's config, remove task_3, look at the overview.
        me.login("root")
        me.open("task_1")
        me.act("#accept-btn", "task_1", "#decision-error")
        assert me.state() == "accepted"
        me.open("task_2")
        assert me.state() == "adjudication"
        assert me.page.eval("T.visible('#repair')")
        me.page.eval("T.check('#scope-config', true)")
        me.page.eval("T.set('#repair-reason', 'population is an integer count (ben, cities.csv)')")
        cfg = {
            "order_sensitive": False,
            "columns": [
                {"type": "text"},
                {"type": "number", "comparison": {"mode": "decimal_places", "digits": 0}},
            ],
        }
        me.page.eval(f"T.set('#repair-config', {json.dumps(json.dumps(cfg))})")
        me.act("#repair-submit", "task_2", "#repair-error")
        assert me.state() == "recheck"
        assert "version 2" in me.page.eval("T.text('#versions')")
        me.open("task_3")
        me.page.eval("T.click('#accept-btn')")
        me.page.wait_for("(T.text('#decision-error') || '').includes('not in consensus')")
        me.page.eval("T.set('#remove-reason', 'ambiguous threshold; near-duplicate of task_1')")
        me.act("#remove-btn", "task_3", "#decision-error")
        assert me.state() == "removed"
        me.logout()

        # Recheck of version 2 by the same reviewers (phase 2 only).
        for name in ("ana", "ben"):
            me.login(name)
            me.open("task_2")
            assert me.page.eval("T.text('#todo')").endswith("phase2")
            assert not me.page.eval("T.visible('#phase1')")
            assert "version 2" in me.page.eval("T.text('#versions')")
            me.verify()
            me.logout()

        me.login("root")
        me.open("task_2")
        assert me.state() == "consensus"
        me.act("#accept-btn", "task_2", "#decision-error")
        assert me.state() == "accepted"
        me.page.eval("T.click('#show-status')")
        me.page.wait_for("T.visible('#overview')")
        overview = me.page.eval("T.text('#overview')")
        assert (
            "accepted after repair1" in overview.replace(" ", "")
            or "accepted after repair" in overview
        )
        me.shot("overview")
        # The page fetched only from the server, and threw nothing.
        for load in me.loads:
            me.page.settle(load)
            outside = [u for u in load.requests if not u.startswith((review.url, "data:", "blob:"))]
            assert outside == [], outside
            assert [e for e in load.errors if e.startswith(("exception", "console"))] == []
    finally:
        browser.close()

    out = tmp_path / "reviewed"
    res = _cli("review", "export", "--db", review.db_url, "--out", str(out))
    assert res.returncode == 0, res.stderr
    val = _cli("validate", str(out), "--require-gold")
    assert val.returncode == 0, val.stderr
    rel = Release(out)
    assert rel.task_ids() == ["task_1", "task_2"]
    assert (rel.metadata("task_2") or {})["review"]["version"] == 2
    assert (rel.metadata("task_1") or {})["review"]["version"] == 1
    record = json.loads((rel.ledger_dir("task_2") / "review.json").read_text())
    assert [v["scope"] for v in record["versions"]] == [[], ["config"]]
    assert {e["actor"] for e in record["events"]} >= {"ana", "ben", "root"}
    res = _cli("review", "status", "--db", review.db_url)
    assert res.returncode == 0 and "replays to the stored state: yes" in res.stdout
    fresh = ReviewService(Database(review.db_url), tmp_path / "c")
    assert {t: str(fresh.fold(t).state) for t in fresh.task_ids()} == {
        "task_1": "accepted",
        "task_2": "accepted",
        "task_3": "removed",
    }


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_link_to_one_task_opens_it_after_login(review, tmp_path: Path) -> None:
    """Guards the report's links (``<console>/#task_N``): the console opens that task."""
    exe = report_browser.find_chromium()
    if exe is None:
        pytest.skip("chromium is not installed (scripts/system-packages.txt lists it)")
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    browser = report_browser.Browser(exe, allow_hosts=("127.0.0.1",))
    try:
        page = browser.new_page()
        page.goto(review.url + "/#task_2")
        page.eval(HELPERS)
        page.wait_for("T.visible('#login-form')")
        page.eval(f"T.set('#login-name', {json.dumps('ana')})")
        page.eval(f"T.set('#login-password', {json.dumps(PASSWORD)})")
        page.eval("T.click('#login-submit')")
        page.wait_for("document.body.dataset.ready === '1'")
        assert page.eval("document.body.dataset.task") == "task_2"
    finally:
        browser.close()
