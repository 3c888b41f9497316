"""The cluster simulator's logic (``scripts/simulate_cluster.py``), not its figures.

The simulator must schedule with the controller's own functions (the plan order, the
attempts in flight) and its event loop must follow the rules it states: hand-computed
makespans of tiny runs, before and after the turns.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

import dataspace.runs.expected
import dataspace.runs.turns

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "simulate_cluster.py"


@pytest.fixture(scope="module")
def sim():
    spec = importlib.util.spec_from_file_location("simulate_cluster", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["simulate_cluster"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("simulate_cluster", None)


def _attempts(sim, latencies, startup):
    return [
        sim.Attempt(backbone="b", task=i, latency=x, startup=startup, workspace=0.0)
        for i, x in enumerate(latencies)
    ]


def test_the_simulator_uses_the_controllers_own_scheduling_functions(sim):
    """Guards against a copy: the order and the attempts in flight are the controller's."""
    assert sim.longest_first is dataspace.runs.expected.longest_first
    assert sim.in_flight is dataspace.runs.turns.in_flight
    rng = random.Random(0)
    attempts = sim.draw_attempts(rng, sim.Scenario())
    ordered = sim.ordered(attempts, "longest-first", rng)
    first = [a.backbone for a in ordered[:: len(ordered) // 6]]
    means = {name: mean for name, (mean, _) in sim.BACKBONES.items()}
    assert first == sorted(means, key=lambda n: -means[n])  # Kimi K3 first, GPT-5.6 Sol last


def test_one_slot_before_holds_its_place_through_start_and_teardown(sim):
    """Before: each attempt holds its place for start-up (2 s) + agent (10 s) + teardown (1 s)."""
    sc = sim.Scenario(slots=1, staging="shared", teardown=1.0)
    out = sim.simulate(_attempts(sim, [10.0, 10.0], 2.0), sc)
    assert out.makespan == pytest.approx(26.0)
    assert out.ideal == pytest.approx(20.0)


def test_one_slot_after_prepares_the_next_sandbox_and_hands_the_turn_on_at_agent_end(sim):
    """After: the second sandbox starts beside the first agent; only the last teardown shows."""
    sc = sim.Scenario(slots=1, staging="shared", teardown=1.0, turns=True)
    assert dataspace.runs.turns.in_flight(1, dataspace.runs.turns.suggested_prestart(1)) == 2
    out = sim.simulate(_attempts(sim, [10.0, 10.0], 2.0), sc)
    assert out.makespan == pytest.approx(2.0 + 10.0 + 10.0 + 1.0)


def test_turns_never_run_more_agents_than_slots(sim):
    """Two slots, four equal attempts, instant sandboxes: two waves of agents, not one."""
    sc = sim.Scenario(slots=2, staging="shared", teardown=0.0, turns=True)
    out = sim.simulate(_attempts(sim, [5.0] * 4, 0.0), sc)
    assert out.makespan == pytest.approx(10.0)


def test_the_makespan_is_counted_after_the_pre_pull(sim):
    """The run starts when every node has the image; the pre-pull is reported apart."""
    sc = sim.Scenario(slots=1, staging="shared", teardown=0.0)
    out = sim.simulate(_attempts(sim, [4.0], 1.0), sc, prepull=30.0)
    assert out.makespan == pytest.approx(5.0) and out.prepull == 30.0
    assert out.ratio_with_prepull == pytest.approx(35.0 / 4.0)


def test_the_median_draw_is_the_same_attempts_before_and_after(sim):
    """Before and after see the same draws: the ideal (total agent time) is identical."""
    before = sim.median_outcome(sim.Scenario(order="longest-first"), repeats=1)
    after = sim.median_outcome(sim.Scenario(order="longest-first", turns=True), repeats=1)
    assert before.ideal == after.ideal
