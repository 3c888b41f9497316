"""The stages as one tuple: their order, partial runs, the final checks, one video default."""

from __future__ import annotations

import dataclasses
import sqlite3

import pytest

from builder.driver import bundled_spec, stage_context
from builder.errors import BuildError
from builder.spec import Stage3Options, stage3_options
from builder.stages import STAGES, TaskState, initial_state, run_stages
from tests.builder.conftest import plain_spec

NOW = "2105-12-31 23:59:00"


def _now_item(bundled_items):
    return next(i for i in bundled_items if i.corpus == "clinical" and NOW in i.sql)


def test_the_stages_run_in_the_order_of_one_tuple():
    assert [s.__name__ for s in STAGES] == [
        "translate",
        "sample",
        "gold",
        "route",
        "video",
        "render",
        "config",
        "ledger",
        "checks",
    ]


def test_a_prefix_of_the_stages_leaves_its_results_on_the_state(bundled_items, tmp_path):
    item = _now_item(bundled_items)
    ctx = stage_context(plain_spec(), tmp_path)
    state = initial_state(item, languages=("en", "en"), build_seed=0)
    done = run_stages(state, ctx, STAGES[:3])
    assert done.answer is not None and done.taskdb is not None
    assert done.artifacts is None and done.workspace is None
    assert done.stated["now"] == NOW and NOW in done.item.question
    assert set(done.timings) == {"translate", "sample", "gold"}
    with pytest.raises(sqlite3.ProgrammingError):  # the driver closed the task database
        done.taskdb.conn.execute("select 1")


def test_checks_reject_a_question_that_lost_its_stated_now(bundled_items, tmp_path):
    """Guards the last gate: a rewrite after the gold stage (here a stage that drops the
    sentence) cannot ship a "this year" question without its date."""

    def forget_now(state: TaskState, ctx) -> TaskState:
        art = state.artifacts
        question = art.question.split("Take the current time")[0].strip()
        return dataclasses.replace(state, artifacts=dataclasses.replace(art, question=question))

    item = _now_item(bundled_items)
    ctx = stage_context(plain_spec(), tmp_path)
    state = initial_state(item, languages=("en", "en"), build_seed=0)
    assert run_stages(state, ctx).artifacts.question.endswith(f"Take the current time to be {NOW}.")
    stages = (*STAGES[:-1], forget_now, STAGES[-1])
    with pytest.raises(BuildError) as err:
        run_stages(state, ctx, stages)
    assert err.value.stage == "checks" and err.value.item == item.id
    assert f"does not state the fixed now {NOW}" in err.value.reason


def test_video_share_has_one_default_that_the_demo_reads():
    default = Stage3Options().video_share
    assert default == 0.461  # the paper: 189 of 410 workspaces hold a video
    assert stage3_options({}).video_share == default
    assert bundled_spec().stage3_options().video_share == default
    assert stage3_options({"video_share": 0.2}).video_share == 0.2
