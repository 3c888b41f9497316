"""Translator providers: the glossary (offline) and the llm provider against a loopback server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from builder.transform import TransformOptions, transform
from builder.translate import (
    TranslationError,
    TranslationRequest,
    ask,
    get_translator,
    items_validator,
)
from dataspace.errors import ConfigError


class ChatServer:
    """A minimal OpenAI-compatible chat-completions server on 127.0.0.1.

    ``reply(body)`` returns the assistant message content for each request body.
    """

    def __init__(self, reply: Callable[[dict], str]) -> None:
        self.reply = reply
        self.bodies: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.bodies.append(body)
                content = server.reply(body)
                out = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": content},
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: object) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def api_key(monkeypatch):
    monkeypatch.setenv("DATASPACE_TRANSLATOR_API_KEY", "test-key")


def _user(body: dict) -> str:
    return body["messages"][1]["content"]


@pytest.mark.llm
def test_llm_replies_are_validated_and_retried_with_the_errors(api_key):
    replies = iter(
        [
            '{"items": [{"id": "a", "target": "甲"}]}',  # b is missing
            "Sure! Here is the map you asked for.",  # not JSON
            '```json\n{"items": [{"id": "a", "target": "甲"}, {"id": "b", "target": "乙"}]}\n```',
        ]
    )
    with ChatServer(lambda body: next(replies)) as server:
        tr = get_translator("llm", model="m1", base_url=server.url, max_retries=0)
        req = TranslationRequest(
            kind="values",
            source_language="en",
            target_language="zh",
            payload={
                "cluster_id": "c",
                "values": [{"id": "a", "value": "alpha"}, {"id": "b", "value": "beta"}],
            },
        )
        ans = ask(tr, req, items_validator(["a", "b"]), max_attempts=3)
        assert ans.attempts == 3
        assert ans.reply["items"][1] == {"id": "b", "target": "乙"}
        assert "id b is missing" in _user(server.bodies[1])
        assert "not valid JSON" in _user(server.bodies[2])
        assert all(b["temperature"] == 0 and b["model"] == "m1" for b in server.bodies)
        assert "test-key" not in json.dumps(tr.describe())


@pytest.mark.llm
def test_llm_gives_up_after_the_attempt_budget(api_key):
    with ChatServer(lambda body: '{"items": []}') as server:
        tr = get_translator("llm", model="m1", base_url=server.url, max_retries=0)
        req = TranslationRequest(
            kind="schema",
            source_language="en",
            target_language="zh",
            payload={"schema_items": [{"id": "t0", "kind": "table", "name": "x"}]},
        )
        with pytest.raises(TranslationError) as err:
            ask(tr, req, items_validator(["t0"]), max_attempts=2)
        assert len(server.bodies) == 2 and "id t0 is missing" in str(err.value)


@pytest.mark.llm
def test_llm_translator_drives_the_whole_stage_and_its_judge(api_key, db_from_script, tmp_path):
    db = db_from_script(
        "h.sqlite",
        """
        create table drugs (id integer primary key, name text, route text);
        insert into drugs values (1, 'aspirin', 'oral'), (2, 'heparin', 'iv'),
                                 (3, 'insulin', 'iv');
    """,
    )
    names = {
        "drugs": "药品表",
        "id": "编号",
        "name": "名称",
        "route": "给药途径",
        "aspirin": "阿司匹林",
        "heparin": "肝素",
        "insulin": "胰岛素",
        "oral": "口服",
        "iv": "静脉注射",
    }
    judged = []

    def reply(body: dict) -> str:
        system = body["messages"][0]["content"]
        payload = json.loads(_user(body).split("INPUT\n", 1)[1].split("\n\nYour previous")[0])
        if system.startswith("You localize"):
            return json.dumps(
                {
                    "items": [
                        {"id": it["id"], "target": names[it["name"]]}
                        for it in payload["schema_items"]
                    ]
                }
            )
        if system.startswith("Translate database values"):
            return json.dumps(
                {
                    "cluster_id": payload["cluster_id"],
                    "items": [
                        {"id": it["id"], "target": names[it["value"]]} for it in payload["values"]
                    ],
                }
            )
        if system.startswith("Translate an analytical question"):
            return json.dumps(
                {"question": "哪些药品通过静脉注射给药？", "used_mapping_ids": ["v0"]}
            )
        judged.append(payload["translated_question"])
        if len(judged) == 1:
            return json.dumps(
                {
                    "status": "repair",
                    "issues": [{"type": "fields", "description": "ask for the drug names"}],
                    "revised_question": "哪些药品名称通过静脉注射给药？",
                }
            )
        return json.dumps({"status": "pass", "issues": [], "revised_question": ""})

    with ChatServer(reply) as server:
        tr = get_translator("llm", model="m1", base_url=server.url, max_retries=0)
        res = transform(
            db,
            "Which drugs are given iv?",
            "select drugs.name from drugs where drugs.route = 'iv'",
            question_language="zh",
            db_language="zh",
            translator=tr,
            source_question_language="en",
            source_db_language="en",
            options=TransformOptions(cache_dir=tmp_path / "c"),
        )
    assert (
        res.sql == 'SELECT "药品表"."名称" FROM "药品表" WHERE "药品表"."给药途径" = \'静脉注射\''
    )
    assert res.question == "哪些药品名称通过静脉注射给药？"
    assert res.ledger["gates"]["judge"]["status"] == "repaired"
    assert judged == ["哪些药品通过静脉注射给药？", "哪些药品名称通过静脉注射给药？"]
    assert res.ledger["gates"]["execution"]["ok"]


def test_glossary_is_deterministic_and_lists_unknown_terms():
    tr = get_translator("glossary")
    req = TranslationRequest(
        kind="values",
        source_language="en",
        target_language="zh",
        payload={
            "cluster_id": "c",
            "values": [{"id": "a", "value": "furosemide"}, {"id": "b", "value": "zorblax"}],
        },
    )
    one, two = tr.complete(req), tr.complete(req)
    assert one == two
    assert one["items"] == [{"id": "a", "target": "呋塞米"}, {"id": "b", "target": "zorblax"}]
    assert one["unknown"] == ["zorblax"]
    assert tr.supports_judge is False


def test_glossary_question_keeps_numbers_dates_and_entities(tmp_path):
    """A Chinese question comes from a sentence template (here a layered glossary's); its
    slot keeps every number, date and focused entity."""
    extra = tmp_path / "templates.json"
    extra.write_text(
        json.dumps(
            {"templates": [{"en": "how many patients {who}?", "zh": "有多少患者{who}？"}]},
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    tr = get_translator("glossary", glossary=[extra])
    req = TranslationRequest(
        kind="question",
        source_language="en",
        target_language="zh",
        payload={
            "source_question": "How many patients aged 60 or older "
            "had potassium above 5.5 on 2104-03-01?",
            "focused_glossary": [{"id": "v0", "source": "potassium", "target": "钾"}],
        },
    )
    out = tr.complete(req)
    assert out["question"].startswith("有多少患者")
    for kept in ("60", "5.5", "2104-03-01", "钾"):
        assert kept in out["question"]
    assert out["used_mapping_ids"] == ["v0"]


def test_registry_names_providers_and_refuses_bad_configs(monkeypatch):
    with pytest.raises(ConfigError, match="known translators: glossary, llm"):
        get_translator("deepl")
    monkeypatch.delenv("DATASPACE_TRANSLATOR_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="DATASPACE_TRANSLATOR_API_KEY"):
        get_translator("llm", model="m")
