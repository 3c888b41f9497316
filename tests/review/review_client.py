"""A small HTTP client for the review API (urllib, cookie session, JSON)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


class Client:
    def __init__(self, base: str) -> None:
        self.base = base
        self.cookie: str | None = None

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Reply:
        url = self.base + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = raw
        hdrs = dict(headers or {})
        if body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        if self.cookie:
            hdrs.setdefault("Cookie", self.cookie)
        req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return Reply(resp.status, resp.read(), dict(resp.headers))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, exc.read(), dict(exc.headers))

    def get(self, url_path: str, /, **params: Any) -> Reply:
        return self.request("GET", url_path, params=params or None)

    def post(self, path: str, body: Any = None) -> Reply:
        return self.request("POST", path, {} if body is None else body)

    def ok(self, method: str, url_path: str, body: Any = None, /, **params: Any) -> Any:
        r = self.request(method, url_path, body, params=params or None)
        assert r.status == 200, f"{method} {url_path}: {r.status} {r.body[:500]!r}"
        ctype = r.headers.get("Content-Type", "")
        return r.json() if ctype.startswith("application/json") else r.body

    def login(self, name: str, password: str) -> None:
        r = self.request("POST", "/api/login", {"name": name, "password": password})
        assert r.status == 200, r.body
        cookie = r.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        self.cookie = cookie.split(";", 1)[0]


def phase1_body(
    rows: list[list[object]],
    *,
    header: tuple[str, ...] = ("city", "population"),
    evidence: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    lines = [",".join(header)] + [",".join(str(c) for c in r) for r in rows]
    return {
        "result_csv": "\n".join(lines) + "\n",
        "evidence": evidence
        if evidence is not None
        else [
            {
                "path": "cities.csv",
                "modality": "csv",
                "anchor_kind": "row",
                "anchor": "2-4",
                "fact": "population per city",
                "role": "filter",
            },
        ],
        "semantics": {"grain": "one row per city", "predicates": "population above threshold"},
        "issues": [],
        "confidence": 4,
    }


def config_body(*, population_type: str = "number", ordered: bool = False) -> dict[str, Any]:
    pop: dict[str, Any] = {"type": population_type}
    if population_type == "number":
        pop["comparison"] = {"mode": "integer"}
    return {"order_sensitive": ordered, "columns": [{"type": "text"}, pop]}


def phase2_body(
    config: dict[str, Any] | None = None, *, verdict: str = "match", disposition: str = "pass"
) -> dict[str, Any]:
    return {
        "verdict": verdict,
        "disposition": disposition,
        "config": config or config_body(),
        "issues": [],
        "rationale": "",
    }
