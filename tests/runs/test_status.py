"""The attempt statuses are one list: the agents' end states plus the run's own."""

from dataspace.agents import END_STATES
from dataspace.report.tables import INFRA_STATUS, NO_OUTCOME, NOT_SCHEDULED
from dataspace.runs.controller import SKIPPED, UNFINISHED
from dataspace.status import AGENT_END_STATES, AttemptStatus


def test_statuses_are_the_agent_end_states_and_the_runs_own():
    assert set(AGENT_END_STATES) == set(END_STATES)
    assert set(UNFINISHED) == {INFRA_STATUS, NOT_SCHEDULED}
    assert set(NO_OUTCOME) == {*UNFINISHED, SKIPPED}
    assert {s.value for s in AttemptStatus} == {*END_STATES, *NO_OUTCOME}
