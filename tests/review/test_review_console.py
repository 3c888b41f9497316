"""The review console in headless Chromium: two reviewers, a repairer and an administrator.

One browser plays the whole walk-through at 1,366 × 900, every step through the page:

* task_1 reaches consensus and is accepted after confirmation;
* task_2 is a config-only disagreement (digits 1 against 2): the adjudication view says
  why and marks the differing config key; the administrator accepts the builder's
  version citing the discussion, with no removal;
* task_3: ana's blind answer misses a row and she still chooses match: the page warns her
  before the lock and the administrator sees it; the repairer repairs the config in the
  same config editor (no JSON), the reviewers recheck version 2 with the v1 → v2 diff
  shown, and the administrator removes the task after confirming (a first cancel changes
  nothing).

On the way: the inbox with counts and progress, a URL per task and step that survives a
reload, drafts kept across the reload, click-to-anchor in every viewer, "use this query
result as my answer", row numbers, keyboard shortcuts, success messages that stay, errors
in the user's terms that clear after a later success, the source SQL after both phases
and the ledger for the repairer. The export and the log replay close the test.
Screenshots go to ``$DATASPACE_SCREENSHOTS`` when set (else the test's temporary folder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import report_browser
from conftest import PASSWORD
from console_driver import Person

from builder.review import Database, ReviewService
from dataspace.release import Release

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
GOLD = [("Lyon", 522000), ("Graz", 291000), ("Porto", 232000)]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dataspace.cli", *args], capture_output=True, text=True, timeout=300
    )


def _explore(me: Person) -> None:
    """Every viewer anchors by a click; the SQLite result can become the answer."""
    me.click("[data-modality=sqlite]")
    me.wait("T.count('#file-list li') === 1")
    me.open_file("db/countries.sqlite")
    me.fill("#sql-input", "SELECT code, name FROM countries ORDER BY code")
    me.click("#sql-run")
    me.wait("T.count('#sql-output tbody tr') === 4")
    assert me.text("#sql-output thead").startswith("# (1 = first data row)")
    me.click("#sql-use")
    assert me.eval("document.querySelector('#p1-result').value").startswith("code,name\nAT,Austria")
    me.fill("#sql-input", "DELETE FROM countries")
    me.click("#sql-run")
    me.wait("(T.text('#sql-output') || '').includes('refused')")
    me.click("[data-modality=all]")
    me.wait("T.count('#file-list li') === 6")
    me.open_file("docs/readme.md")
    me.wait("!!document.querySelector('#markdown-view strong')")
    assert me.eval("document.querySelector('#markdown-view script') === null")
    assert not me.eval("window.__md_pwned === 1")
    me.click("#markdown-view strong")  # inside the section "Cities"
    last = "#evidence-rows tr.evidence:last-child"
    assert me.eval(f"document.querySelector('{last} .ev-kind').value") == "section"
    assert me.eval(f"document.querySelector('{last} .ev-anchor').value") == "Cities"
    me.fill(f"{last} .ev-fact", "populations are census counts")
    me.open_file("docs/census.pdf")
    me.wait("document.querySelector('#pdf-page').naturalWidth > 100")
    me.fill("#pdf-page-num", "2")
    me.wait("document.querySelector('#pdf-page').src.endsWith('page=2')")
    me.wait("document.querySelector('#pdf-page').complete")
    me.click("#pdf-page")
    assert me.eval(f"document.querySelector('{last} .ev-anchor').value") == "2"
    assert me.eval(f"document.querySelector('{last} .ev-modality').value") == "pdf"
    me.fill(f"{last} .ev-fact", "Turku is below the threshold")
    me.open_file("media/briefing.mp4")
    me.wait("document.querySelector('#video-view').readyState >= 1", timeout=30)
    assert me.eval("document.querySelector('#video-view').duration") > 1.5
    me.fill("#video-time", "1.2")
    me.click("#video-seek")
    me.wait("Math.abs(document.querySelector('#video-view').currentTime - 1.2) < 0.01")
    me.click("#video-grab")
    assert me.eval(f"document.querySelector('{last} .ev-kind').value") == "timestamp"
    assert me.eval(f"document.querySelector('{last} .ev-anchor').value") == "1.20"
    me.fill(f"{last} .ev-fact", "the briefing names the threshold")


@SQLITE_ONLY
def test_walk_through_two_reviewers_a_repairer_and_an_admin(review, tmp_path: Path) -> None:
    exe = report_browser.find_chromium()
    if exe is None:
        pytest.skip("chromium is not installed (scripts/system-packages.txt lists it)")
    shots = Path(os.environ.get("DATASPACE_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    review.svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    browser = report_browser.Browser(exe, allow_hosts=("127.0.0.1",))
    try:
        me = Person(browser.new_page(), review.url, PASSWORD, shots)

        # ---- ana -------------------------------------------------------------------
        me.login("ana")
        assert me.eval("document.body.dataset.view") == "inbox"
        assert me.text("#inbox [data-step=phase1] .count") == "(3)"
        assert me.text("#inbox-progress").startswith("3 of your 3 tasks wait for you")
        me.shot("inbox")
        me.click("#help-btn")
        assert "next / previous task" in me.text("#help")
        me.click("#help-btn")
        me.click("#next-task")
        me.wait("document.body.dataset.task === 'task_1'")
        assert me.eval("location.hash") == "#/task/task_1/phase1"
        # the viewer sits beside the form at 1,366 px
        left = me.eval("JSON.stringify(document.querySelector('#left').getBoundingClientRect())")
        right = me.eval("JSON.stringify(document.querySelector('#right').getBoundingClientRect())")
        assert json.loads(right)["left"] >= json.loads(left)["right"]
        _explore(me)
        me.solve(GOLD, anchor_rows=(2,))
        assert me.text("#viewer thead th") == "# (1 = first data row)"
        # a draft survives a reload, and the URL keeps the place
        me.reopen(review.url + "/#/task/task_1/phase1")
        me.wait("document.body.dataset.task === 'task_1'")
        assert me.eval("T.count('#evidence-rows tr.evidence')") == 4
        assert me.eval("document.querySelector('#p1-result').value").startswith("city,population")
        me.open_file("cities.csv")
        me.shot("task-side-by-side")
        # an anchor typed by hand past the table's end: an error in the user's terms
        k = me.eval("T.count('#evidence-rows tr.evidence')")
        me.click("#add-evidence")
        row = f"#evidence-rows tr.evidence:nth-child({k + 1})"
        me.fill(f"{row} .ev-path", "cities.csv")
        me.fill(f"{row} .ev-anchor", "9999")
        me.fill(f"{row} .ev-fact", "a typo")
        me.click("#p1-submit")
        me.confirm()
        assert me.wait("document.body.dataset.action") == "error"
        err = me.text("#p1-error")
        assert err.startswith("Evidence anchor 5 (where): row must be 1..4"), err
        assert "<memory>" not in err and "evidence[" not in err
        me.click(f"{row} button")  # drop the bad anchor
        # cancel leaves everything open; confirm locks
        me.click("#p1-submit")
        said = me.confirm(ok=False)
        assert "Lock your phase-1 answer?" in said and me.visible("#phase1")
        me.lock_phase1()
        assert me.text("#p1-error") == ""  # the stale error is gone
        assert me.visible("#flash") and me.text("#flash-text").startswith("Phase 1 locked")
        assert me.eval("location.hash") == "#/task/task_1/phase2"
        assert "equals the gold" in me.text("#diag-summary")
        assert me.eval("T.count('#answer-table tbody tr')") == 3
        assert me.eval("T.count('#gold-table tbody tr')") == 3
        assert (
            me.eval(
                "document.querySelector('#p2-config tr.cfg[data-col=population] .cfg-type').value"
            )
            == "number"
        )
        me.verify()
        assert me.text("#flash-text").startswith("Phase 2 locked")
        assert "SQL-SENTINEL" in me.text("#source-sql")  # after both phases
        me.next_task("task_2")
        me.solve(GOLD)
        me.lock_phase1()
        me.verify(digits=1)
        me.next_task("task_3")
        me.solve(GOLD[:2])  # misses Porto
        me.lock_phase1()
        assert "differs" in me.text("#diag-summary")
        assert "1 gold row(s) have no equal prediction row" in me.text("#explain-list")
        me.fill("#p2-verdict", "match")
        me.fill("#p2-disposition", "pass")
        assert me.visible("#p2-warning")
        me.shot("phase2-answer-beside-gold")
        me.click("#p2-submit")
        said = me.confirm(ok=False)  # warned before the lock
        assert "yet you chose match" in said, said
        said = me.act("#p2-submit", "#p2-error")
        assert "yet you chose match" in said
        me.click("#nav-inbox")
        me.wait("document.body.dataset.view === 'inbox'")
        assert me.text("#inbox [data-step=waiting] .count") == "(3)"
        assert me.text("#progress-top") == "3 of 3 done"
        me.logout()

        # ---- ben ---------------------------------------------------------------------
        me.login("ben")
        me.click("#next-task")
        me.wait("document.body.dataset.task === 'task_1'")
        me.solve(GOLD)
        me.lock_phase1()
        me.verify()
        assert me.eval("document.body.dataset.taskState") == "consensus"
        me.next_task("task_2")
        me.solve(GOLD)
        me.eval("document.querySelector('#p1-result').focus()")
        me.key("Enter", ctrl=True)  # Ctrl+Enter submits the form being typed in
        me.confirm()
        assert me.wait("document.body.dataset.action") == "ok"
        assert me.eval("document.body.dataset.todo") == "phase2"
        me.verify(digits=2)
        assert me.eval("document.body.dataset.taskState") == "adjudication"
        me.wait("T.visible('#discussion')")
        me.fill("#msg-text", "cities.csv holds whole numbers; any digits give the same result")
        me.fill("#msg-path", "cities.csv")
        me.fill("#msg-anchor", "column population")
        me.click("#msg-submit")
        me.wait("T.count('#messages li') === 1")
        me.next_task("task_3")
        me.solve(GOLD)
        me.lock_phase1()
        me.verify(population="text")  # writes population as text: configs differ
        me.logout()

        # ---- root decides task_1 and task_2 -------------------------------------------
        me.login("root")
        assert me.text("#inbox [data-step=adjudication] .count") == "(2)"
        me.open_task("task_1")
        said = me.act("#accept-btn", "#decision-error")
        assert "Accept this task?" in said
        assert me.eval("document.body.dataset.taskState") == "accepted"
        assert me.text("#flash-text") == "task_1: Accepted."
        me.open_task("task_2")
        assert me.text("#why-list") == "the configs differ at population.comparison.digits"
        key_row = "#config-compare tr[data-key='population.comparison.digits']"
        assert me.eval(f'document.querySelector("{key_row} td").className') == "diff"
        assert me.visible("#exit-adjudicate") and me.visible("#exit-reopen")
        assert not me.visible("#exit-accept")
        me.shot("adjudication")
        me.fill("#adjudicate-reason", "whole numbers: the builder's integer rule is right")
        said = me.act("#adjudicate-btn", "#decision-error")
        assert "builder's version" in said
        assert me.eval("document.body.dataset.taskState") == "accepted"
        assert "by adjudication" in me.text("#decision-text")
        # task_3: the contradiction is there at decision time; the repairer goes first
        me.open_task("task_3")
        assert "ana's blind answer scores wrong" in me.text("#warning-list")
        missing = me.text(".answer[data-reviewer=ana] .missing")
        assert missing == "Gold rows missing from ana's answer: 3 (Porto, 232000)", missing
        me.logout()

        # ---- rita repairs task_3's config ----------------------------------------------
        me.login("rita")
        me.open_task("task_3")
        assert me.visible("#repair") and not me.visible("#decision")
        assert "SQL-SENTINEL" in me.text("#source-sql")
        assert '"seed": 3' in me.eval("document.querySelector('#ledger-body').textContent")
        me.tick("#scope-config")
        assert me.visible("#repair-config") and not me.visible("#repair-gold")
        cfg_row = "#repair-config tr.cfg[data-col=population]"
        assert me.eval(f"document.querySelector('{cfg_row} .cfg-mode').value") == "integer"
        me.fill(f"{cfg_row} .cfg-mode", "decimal_places")
        me.fill(f"{cfg_row} .cfg-digits", "0")
        me.fill("#repair-reason", "population is a whole-number count")
        me.act("#repair-submit", "#repair-error")
        assert me.eval("document.body.dataset.taskState") == "recheck"
        assert me.text("#flash-text").startswith("Version 2 stored")
        assert "population.comparison.mode" in me.text("#diff-config")
        assert '"integer"' in me.text("#diff-config")  # the repairer sees the values
        me.logout()

        # ---- recheck by the same reviewers (phase 2 only, the diff shown) ---------------
        for name in ("ana", "ben"):
            me.login(name)
            me.open_task("task_3")
            assert me.eval("location.hash") == "#/task/task_3/phase2"
            assert not me.visible("#phase1")
            assert me.text("#diff-title") == "Changes from version 1 to 2"
            assert "population.comparison.mode" in me.text("#diff-config")
            assert '"integer"' not in me.text("#diff-config")  # keys only, not the values
            me.verify(digits=0)
            me.logout()

        # ---- root removes task_3 after confirming -------------------------------------
        me.login("root")
        me.open_task("task_3")
        assert me.eval("document.body.dataset.taskState") == "consensus"
        assert "But see the contradictions above" in me.text("#decision-text")
        me.fill(
            "#remove-reason", "ana's blind answer missed Porto: the threshold reads ambiguously"
        )
        me.click("#remove-btn")
        said = me.confirm(ok=False)
        assert "Remove this task?" in said and "ana's blind answer" in said
        assert me.eval("document.body.dataset.taskState") == "consensus"
        said = me.act("#remove-btn", "#decision-error")
        assert me.eval("document.body.dataset.taskState") == "removed"
        me.click("#show-status")
        me.wait("T.visible('#overview')")
        measures = me.eval(
            "Object.fromEntries([...document.querySelectorAll('#overview tbody tr')]"
            ".map(r => [r.cells[1].textContent, r.cells[2].textContent]))"
        )
        assert measures["accepted by adjudication"] == "1"
        assert measures["repairs"] == "1" and measures["removed"] == "1"
        me.shot("overview")
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
    rel = Release(out)
    assert rel.task_ids() == ["task_1", "task_2"]
    assert (rel.metadata("task_2") or {})["review"]["version"] == 1
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
        ana = Person(browser.new_page(), review.url, PASSWORD, tmp_path)
        ana.goto(review.url + "/#task_2")
        ana.wait("document.body.dataset.ready === 'login'")
        ana.fill("#login-name", "ana")
        ana.fill("#login-password", PASSWORD)
        ana.click("#login-submit")
        ana.wait("document.body.dataset.ready === '1'")
        ana.wait("document.body.dataset.task === 'task_2'")
    finally:
        browser.close()
