"""Query-conditioned videos: both strategies, constants read back from decoded frames."""

from __future__ import annotations

import json
import sqlite3

import pytest

from builder.gold import execute_gold
from builder.render.video import VideoOptions, VideoRejected, build_video, schema_of
from builder.sqlinfo import order_sensitive
from builder.video.atoms import display, extract_atoms
from builder.video.checks import alphabet_for, check_video, read_text, same_text
from builder.video.encoding import frame_at, frame_index, probe, probe_frames
from builder.video.frames import draw_scene
from builder.video.narration import espeak_path
from builder.video.storyboard import LlmPlanner, StoryboardRejected
from builder.video.strategies import leaks, run_restricted
from dataspace.testing.scripted_server import ScriptedServer
from tests.builder.conftest import scripted_client

FAST = VideoOptions(scene_seconds=0.6, fps=5, narration=False)


def _item(items, item_id):
    return next(i for i in items if i.id == item_id)


def _build(item, strategy, options=FAST, **kw):
    conn = sqlite3.connect(item.db_path)
    gold = execute_gold(conn, item.sql)
    video = build_video(
        item.sql,
        gold,
        conn,
        item.question,
        strategy=strategy,
        language=item.db_language,
        seed=5,
        options=options,
        **kw,
    )
    return conn, gold, video


def _read_back(video, width, height):
    """Every evidence text read from decoded frames at each scene's mid-point."""
    alphabet = alphabet_for(i.text for layout in video.layouts for i in layout)
    out: dict[str, list[tuple[str, object]]] = {}
    for (start, end), layout in zip(video.timeline, video.layouts, strict=True):
        frame = frame_at(video.video, (start + end) / 2, width=width, height=height, fps=FAST.fps)
        for item in layout:
            if item.atom:
                out.setdefault(item.atom, []).append((read_text(frame, item, alphabet), item))
    return out, alphabet


@pytest.mark.parametrize(
    "item_id,strategy",
    [
        ("0a1388be5658f90d64861c22", "predicate_abstraction"),
        ("1eb7c49376ca6aade1adc15f", "answer_evidence"),
    ],
)
def test_constants_are_read_back_from_frames(bundled_items, item_id, strategy):
    item = _item(bundled_items, item_id)
    conn, gold, video = _build(item, strategy)
    # What must be shown comes from the SQL and the gold, not from the storyboard.
    atoms = extract_atoms(item.sql, gold.header, gold.rows, item.question, schema=schema_of(conn))
    wanted = {a.atom_id: display(a.value) for a in video.evidence.atoms}
    if strategy == "answer_evidence":
        assert {a.atom_id: a.display for a in atoms.answers} == wanted
    else:
        by_id = {a.atom_id: a for a in atoms.predicates}
        assert all(by_id[k].display == v for k, v in wanted.items())
    read, alphabet = _read_back(video, FAST.width, FAST.height)
    for atom_id, text in wanted.items():
        assert any(same_text(got, text, slot, alphabet) for got, slot in read[atom_id]), (
            atom_id,
            text,
            [g for g, _ in read[atom_id]],
        )
    conn.close()


def test_the_check_reads_from_one_decode_the_frames_a_seek_gives(bundled_items):
    """Guards the check's single decode: its description equals ``probe``'s, each scene's
    frame equals the one ``frame_at`` seeks to, and the verdict equals the verdict of the
    check that seeks every frame."""
    item = _item(bundled_items, "1eb7c49376ca6aade1adc15f")
    conn, _gold, video = _build(item, "answer_evidence")
    conn.close()
    w, h, rate = FAST.width, FAST.height, FAST.fps
    described = probe(video.video)
    fps = described.frames / described.seconds
    times = [a + 0.6 * (b - a) for a, b in video.timeline]
    wanted = [frame_index(t, rate=rate, fps=fps) for t in times]
    once, frames = probe_frames(video.video, wanted, width=w, height=h)
    assert once == described
    assert sorted(frames) == sorted(set(wanted))
    for t, n in zip(times, wanted, strict=True):
        assert (frames[n] == frame_at(video.video, t, width=w, height=h, fps=fps)).all()
    kw = {
        "timeline": video.timeline,
        "layouts": video.layouts,
        "expected": {a.atom_id: a.display for a in video.evidence.atoms},
        "width": w,
        "height": h,
        "tolerance": 0.4,
    }
    assert check_video(video.video, rate=rate, **kw) == check_video(video.video, **kw)
    assert video.check.ok


def test_predicate_abstraction_moves_the_condition_out_of_the_question(bundled_items):
    item = _item(bundled_items, "0a1388be5658f90d64861c22")
    conn, _gold, video = _build(item, "predicate_abstraction")
    moved = video.evidence.predicates
    assert {p.operator for p in moved} == {"year", ">="}
    assert "2104" not in video.question and "60" not in video.question
    assert "video" in video.question and "potassium" in video.question
    assert not any(leaks(video.question, p) for p in moved)
    assert video.withheld == ()
    kinds = [s.component["type"] for s in video.storyboard.scenes]
    assert "config_panel" in kinds and "time_window" in kinds and "table" in kinds
    panel = next(s for s in video.storyboard.scenes if s.component["type"] == "config_panel")
    assert "≥" in panel.visible_text and "60" in panel.visible_text
    roles = {r.role for r in video.evidence.records}
    assert roles == {"pass", "fail"}  # real records either side of the cutoff
    conn.close()


def test_answer_evidence_withholds_its_table_and_distractors_keep_the_answer(bundled_items):
    item = _item(bundled_items, "1eb7c49376ca6aade1adc15f")
    conn, gold, video = _build(item, "answer_evidence")
    ev = video.evidence
    assert video.withheld == (ev.table,) == ("D_ICD_DIAGNOSES",)
    assert "video" in ev.note  # the stage adds it to the question's one note
    assert any(r.role == "distractor" for r in ev.records)
    shown = run_restricted(conn, item.sql, ev.table, [r.rowid for r in ev.records])
    assert sorted(shown) == sorted(gold.rows) and not order_sensitive(item.sql)
    conn.close()


@pytest.mark.skipif(espeak_path() is None, reason="espeak-ng is not installed")
def test_narrated_video_has_audio_and_the_planned_duration(bundled_items):
    item = _item(bundled_items, "9")
    conn, _gold, video = _build(
        item, "predicate_abstraction", options=VideoOptions(scene_seconds=0.5, fps=4)
    )
    p = probe(video.video)
    assert p.has_audio and p.has_video and not p.errors
    assert abs(p.seconds - video.duration) <= 0.5
    assert video.narration_engine == "espeak-ng" and video.warnings == ()
    assert video.evidence.language == "zh" and "视频中" in video.question
    assert "【" not in video.question
    assert video.check.ok and video.check.readable_frames == len(video.timeline)
    conn.close()


def test_silent_track_is_recorded_as_a_warning(bundled_items):
    item = _item(bundled_items, "31")
    conn, _gold, video = _build(item, "answer_evidence")
    assert probe(video.video).has_audio
    assert video.narration_engine == "silent" and video.warnings
    assert video.ledger()["warnings"]
    conn.close()


def test_strategies_reject_tasks_that_do_not_fit(bundled_items):
    item = _item(bundled_items, "2ff82d0af48c7d5693173d79")  # 8 answer rows, no stated value
    for strategy in ("predicate_abstraction", "answer_evidence"):
        with pytest.raises(VideoRejected):
            _build(item, strategy)


def test_glyph_reader_tells_close_constants_apart():
    comp = {
        "type": "config_panel",
        "title": "Rule",
        "rows": [
            ["Field", "PCTOfTotalShares", None],
            ["Direction", "≥", None],
            ["Cutoff", "0.05", "P1"],
        ],
    }
    canvas = draw_scene(comp, "", width=640, height=360)
    import numpy as np

    gray = np.asarray(canvas.image.convert("L"))
    slot = next(i for i in canvas.items if i.atom == "P1")
    alphabet = alphabet_for(["≥"])
    assert read_text(gray, slot, alphabet) == "0.05"
    other = draw_scene({**comp, "rows": [*comp["rows"][:2], ["Cutoff", "0.06", "P1"]]}, "")
    gray2 = np.asarray(other.image.convert("L"))
    assert read_text(gray2, slot, alphabet) == "0.06"


def _scene_json(video_like, constants):
    return json.dumps(
        {
            "scenes": [
                {
                    "scene_id": "S1",
                    "duration_hint": "1s",
                    "component": "title",
                    "title": "Briefing",
                    "narration": "A rule briefing.",
                },
                {
                    "scene_id": "S2",
                    "duration_hint": "1.5s",
                    "component": "time_window",
                    "evidence_ids": ["P1"],
                    "data_constants": [{"atom_id": "P1", "value": constants[0]}],
                    "title": "Window",
                },
                {
                    "scene_id": "S3",
                    "duration_hint": "1.5s",
                    "component": "config_panel",
                    "evidence_ids": ["P2"],
                    "data_constants": [{"atom_id": "P2", "value": constants[1]}],
                    "title": "Age rule",
                },
            ]
        }
    )


def test_llm_storyboard_with_a_wrong_constant_is_regenerated(bundled_items):
    item = _item(bundled_items, "0a1388be5658f90d64861c22")
    steps = [
        {"content": _scene_json(None, ["2104", "65"])},
        {"content": _scene_json(None, ["2104", "60"])},
    ]
    with ScriptedServer({"*": steps}) as server:
        planner = LlmPlanner(scripted_client(server.url))
        conn, _gold, video = _build(item, "predicate_abstraction", planner=planner)
        assert "'65'" in server.requests[1].body["messages"][-1]["content"]
    assert video.storyboard.planner == "llm" and video.storyboard.attempts == 2
    assert video.check.atoms_read == {"P1": "2104", "P2": "60"}
    conn.close()
    with ScriptedServer({"*": [{"content": _scene_json(None, ["2014", "60"])}] * 2}) as server:
        planner = LlmPlanner(scripted_client(server.url), max_attempts=2)
        with pytest.raises(VideoRejected, match="storyboard"):
            _build(item, "predicate_abstraction", planner=planner)
    assert issubclass(StoryboardRejected, ValueError)
