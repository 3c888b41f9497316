"""What a solver cannot guess, said once: one note per question, ties kept with their rule.

Guards the stacked notes earlier builds wrote ("（以…为当前时间。）（排名并列时…）（结果按第一列
的字符编码顺序升序排列。）") and the top-N items they dropped when ties gave more than 3 x N
rows (13% of the MIMIC valid split): the paper keeps such questions and states how ties count.
"""

from __future__ import annotations

import dataclasses
import re

from builder.driver import stage_context
from builder.semantics import SemanticsOptions, note, rank_limit, tie_clause
from builder.stages import STAGES, initial_state, run_stages
from dataspace.release import Release
from tests.builder.conftest import plain_spec

TIES_SQL = (
    "select t1.subject_id from ( select admissions.subject_id, dense_rank() over ( order by "
    "count(*) asc ) as c1 from admissions group by admissions.subject_id ) as t1 "
    "where t1.c1 <= 1"
)


def _ties_item(bundled_items):
    base = next(i for i in bundled_items if i.corpus == "clinical" and "dense_rank" in i.sql)
    return dataclasses.replace(
        base,
        id="ties-top-1",
        question="Which patient was admitted the fewest times?",
        sql=TIES_SQL,
        extra={},
    )


def test_a_top_n_answer_with_many_ties_is_kept_with_its_tie_rule(bundled_items, tmp_path):
    state = initial_state(_ties_item(bundled_items), languages=("en", "en"), build_seed=0)
    spec = plain_spec(semantics=SemanticsOptions(order_share=0.0))
    done = run_stages(state, stage_context(spec, tmp_path), STAGES)
    assert rank_limit(TIES_SQL) == 1 and len(done.answer.rows) > 3  # past the old 3 x N cap
    question = done.artifacts.question
    tie = note([tie_clause(1, "en")], "en")
    assert question == f"Which patient was admitted the fewest times? {tie}"
    assert done.stated["tie_rule"] == "dense"


def test_the_old_cap_is_an_opt_in(bundled_items, tmp_path):
    """``max_tie_factor`` still rejects, when a spec asks for it."""
    from builder.errors import BuildError

    spec = plain_spec(semantics=SemanticsOptions(max_tie_factor=3.0))
    state = initial_state(_ties_item(bundled_items), languages=("en", "en"), build_seed=0)
    try:
        run_stages(state, stage_context(spec, tmp_path), STAGES)
    except BuildError as exc:
        assert exc.stage == "semantics" and "ties past 3 x N" in exc.reason
    else:
        raise AssertionError("the opt-in cap did not reject")


def test_every_question_of_a_build_has_at_most_one_note(bundled_release):
    """Over the bundled corpora (now, ties and requested orders all occur): no question
    holds two notes, none a bracketed note, none an order by character code."""
    release_dir, _report = bundled_release
    release = Release(release_dir)
    first = re.compile(
        r"以\d{4}年|并列的名次|按(?:日期|时间|数值|名称)|Take the current time|Rows that tie|"
        r"List the rows"
    )
    noted = 0
    for task_id in release.task_ids():
        question = release.task(task_id).question
        assert "（以" not in question and "(Take" not in question, question
        assert "字符编码" not in question and "character code" not in question, question
        m = first.search(question)
        if m is None:
            continue
        noted += 1
        tail = question[m.start() :]
        if re.search(r"[\u3400-\u9fff]", tail):
            assert tail.endswith("。") and tail.count("。") == 1, question
        else:
            assert tail.endswith(".") and ". " not in tail, question
    assert noted >= 5
