"""Drive the review console in headless Chromium as a person would, counting what they do.

Every interaction goes through the page: a click is an element's ``click()``, a field is
set as typing would set it (value + input + change events), a key is a real key event
sent through the DevTools protocol. :class:`Person` counts clicks, fields and keys, so the
walk-through test and ``scripts/bench_review.py`` measure the same steps.

Besides the script's own wall time, :class:`Tally` estimates a person's time with the
keystroke-level model (Card, Moran and Newell): a click is a mental step, a pointing and a
button press (M + P + BB = 1.35 + 1.1 + 0.2 s); a text field adds 0.28 s per character
typed; a drop-down is a click more; a shortcut key is M + K (1.35 + 0.28 s).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import report_browser

HELPERS = r"""
window.T = {
  set(sel, v) { const e = document.querySelector(sel); e.value = v;
    e.dispatchEvent(new Event('input', {bubbles: true}));
    e.dispatchEvent(new Event('change', {bubbles: true})); return e.tagName; },
  click(sel) { document.querySelector(sel).click(); return true; },
  check(sel, on) { const e = document.querySelector(sel); e.checked = on;
    e.dispatchEvent(new Event('change', {bubbles: true})); return true; },
  visible(sel) { const e = document.querySelector(sel);
    return !!e && !e.closest('.hidden') && e.getClientRects().length > 0; },
  text(sel) { const e = document.querySelector(sel); return e ? e.textContent : null; },
  count(sel) { return document.querySelectorAll(sel).length; },
};
true
"""


KLM_M, KLM_P, KLM_BB, KLM_K = 1.35, 1.1, 0.2, 0.28
KLM_CLICK = KLM_M + KLM_P + KLM_BB


@dataclass
class Tally:
    """What a person did: clicks, fields filled, keys pressed, and the time it took."""

    clicks: int = 0
    fields: int = 0
    keys: int = 0
    seconds: float = 0.0
    klm_seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    @property
    def actions(self) -> int:
        return self.clicks + self.fields + self.keys


class Person:
    """One user at the console (one page of one browser)."""

    def __init__(self, page: report_browser.Page, base: str, password: str, shots: Path) -> None:
        self.page = page
        self.base = base
        self.password = password
        self.shots = shots
        self.loads: list[report_browser.PageLoad] = []
        self.tally = Tally()

    # ---- primitive interactions (counted) ---------------------------------------------
    def click(self, sel: str) -> None:
        self.page.eval(f"T.click({json.dumps(sel)})")
        self.tally.clicks += 1
        self.tally.klm_seconds += KLM_CLICK

    def fill(self, sel: str, value: str) -> None:
        tag = self.page.eval(f"T.set({json.dumps(sel)}, {json.dumps(value)})")
        self.tally.fields += 1
        if tag == "SELECT":
            self.tally.klm_seconds += 2 * KLM_CLICK - KLM_M
        else:
            self.tally.klm_seconds += KLM_CLICK + KLM_K * len(value)

    def tick(self, sel: str, on: bool = True) -> None:
        self.page.eval(f"T.check({json.dumps(sel)}, {json.dumps(on)})")
        self.tally.clicks += 1
        self.tally.klm_seconds += KLM_CLICK

    def key(self, key: str, *, ctrl: bool = False) -> None:
        """A real key press (keyDown + keyUp) on the focused element."""
        params: dict[str, Any] = {"key": key, "modifiers": 2 if ctrl else 0}
        if len(key) == 1 and not ctrl:
            params["text"] = key
        if key == "Enter":
            params.update(code="Enter", windowsVirtualKeyCode=13)
        self.page.b.send("Input.dispatchKeyEvent", {"type": "keyDown", **params}, self.page.session)
        self.page.b.send("Input.dispatchKeyEvent", {"type": "keyUp", **params}, self.page.session)
        self.tally.keys += 1
        self.tally.klm_seconds += KLM_M + KLM_K

    # ---- reading the page (not counted) -----------------------------------------------
    def eval(self, expression: str) -> Any:
        return self.page.eval(expression)

    def wait(self, expression: str, timeout: float = 30.0) -> Any:
        return self.page.wait_for(expression, timeout=timeout)

    def text(self, sel: str) -> str:
        return str(self.page.eval(f"T.text({json.dumps(sel)})") or "")

    def visible(self, sel: str) -> bool:
        return bool(self.page.eval(f"T.visible({json.dumps(sel)})"))

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.page.screenshot(str(path))
        return path

    # ---- composite steps -------------------------------------------------------------
    def goto(self, url: str) -> None:
        self.loads.append(self.page.goto(url))
        self.page.eval(HELPERS)

    def reopen(self, url: str) -> None:
        """Open a URL afresh (as a reload or a new tab would): a new document, same storage."""
        self.page.goto("about:blank")
        self.goto(url)

    def login(self, name: str) -> None:
        self.goto(self.base + "/")
        self.wait("document.body.dataset.ready")
        if self.eval("document.body.dataset.ready") == "1":  # still logged in: log out first
            self.logout()
        self.fill("#login-name", name)
        self.fill("#login-password", self.password)
        self.click("#login-submit")
        self.wait("document.body.dataset.ready === '1'")
        assert self.text("#whoami").startswith(name)

    def logout(self) -> None:
        self.click("#logout")
        self.wait("!!document.body && document.body.dataset.ready === 'login'", timeout=15)
        self.page.eval(HELPERS)

    def confirm(self, ok: bool = True) -> str:
        """Answer the confirmation dialog; returns what it said (title, text, warnings)."""
        self.wait("document.querySelector('#confirm').open")
        said = self.text("#confirm h3") + " | " + self.text("#confirm-text")
        said += " | " + self.text("#confirm-warnings")
        self.eval("document.body.dataset.action = ''")
        self.click("#confirm-ok" if ok else "#confirm-cancel")
        self.wait("!document.querySelector('#confirm').open")
        return said

    def open_task(self, task: str) -> None:
        """From anywhere: the inbox link of the task."""
        if not self.visible(f"#inbox [data-task={task}]"):
            self.click("#nav-inbox")
            self.wait("document.body.dataset.view === 'inbox'")
        self.click(f"#inbox [data-task={task}]")
        self.wait(f"document.body.dataset.task === '{task}'")

    def next_task(self, task: str) -> None:
        """The shortcut ``n``: the next task waiting for this person."""
        self.eval("document.activeElement && document.activeElement.blur()")
        self.key("n")
        self.wait(f"document.body.dataset.task === '{task}'")

    def open_file(self, path: str) -> None:
        self.click(f'#file-list [data-path="{path}"]')
        self.wait(f"document.querySelector('#viewer').dataset.loaded === '{path}'")

    def act(self, button: str, error: str, *, confirm: bool = True) -> str:
        """Click a button (confirm when asked) and wait for the page's outcome.

        Returns what the confirmation dialog said; fails with the page's error text.
        """
        if not confirm:
            self.eval("document.body.dataset.action = ''")
        self.click(button)
        said = self.confirm() if confirm else ""
        try:
            outcome = self.wait("document.body.dataset.action")
        except TimeoutError:
            state = self.eval(
                "JSON.stringify({flash: T.text('#flash-text'), ds: {...document.body.dataset}})"
            )
            raise AssertionError(
                f"{button}: no outcome; error {self.text(error)!r}; {state}"
            ) from None
        assert outcome == "ok", self.text(error)
        assert self.text(error) == ""
        return said

    def solve(
        self,
        rows: list[tuple[str, int]],
        anchor_rows: tuple[int, ...] = (1, 2, 3),
        *,
        grain: str = "one row per city",
    ) -> None:
        """Phase 1 with click-to-anchor: click table rows, name the fact, type the answer."""
        assert self.visible("#phase1") and not self.visible("#comparison")
        self.open_file("cities.csv")
        for n in anchor_rows:
            self.click(f"#viewer tbody tr[data-row='{n}']")
            k = self.eval("T.count('#evidence-rows tr.evidence')")
            self.fill(f"#evidence-rows tr.evidence:nth-child({k}) .ev-fact", "population above it")
        csv = "city,population\n" + "".join(f"{c},{p}\n" for c, p in rows)
        self.fill("#p1-result", csv)
        self.fill("#sem-grain", grain)

    def lock_phase1(self) -> str:
        return self.act("#p1-submit", "#p1-error")

    def verify(
        self,
        *,
        verdict: str = "match",
        disposition: str = "pass",
        digits: int | None = None,
        population: str | None = None,
    ) -> str:
        """Phase 2: verdict, disposition, the config (suggested; changed where asked)."""
        self.wait("T.visible('#phase2')")
        self.fill("#p2-verdict", verdict)
        self.fill("#p2-disposition", disposition)
        row = "#p2-config tr.cfg[data-col=population]"
        if population is not None:
            self.fill(f"{row} .cfg-type", population)
        if digits is not None:
            self.fill(f"{row} .cfg-mode", "decimal_places")
            self.fill(f"{row} .cfg-digits", str(digits))
        return self.act("#p2-submit", "#p2-error")

    def finish(self) -> float:
        self.tally.seconds = time.perf_counter() - self.tally.started
        return self.tally.seconds
