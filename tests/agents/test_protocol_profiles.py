"""The protocol profile as a run-spec field: default, validation, fingerprint, rows, reports."""

from __future__ import annotations

import pytest

from dataspace.agents.dataspace_agent import DataSpaceAgent
from dataspace.agents.protocol import EXTENDED, OFFICIAL, PROFILES, ProtocolProfile
from dataspace.errors import ConfigError
from dataspace.runs.spec import fingerprint, parse_spec

BASE = {
    "run_id": "r",
    "release": "/tmp/release",
    "store": "/tmp/store",
    "agents": [{"name": "a", "harness": "dataspace-agent", "model": {"id": "m"}}],
}


def test_official_is_the_default_and_extended_is_named() -> None:
    """Guards the faithful default: a spec without ``protocol`` runs the official profile."""
    assert parse_spec(BASE, source="s").protocol == "official"
    assert parse_spec({**BASE, "protocol": "extended"}, source="s").protocol == "extended"
    assert set(PROFILES) == {"official", "extended"}


def test_an_unknown_profile_names_the_key_and_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"spec\.yaml: protocol: unknown profile 'paper'"):
        parse_spec({**BASE, "protocol": "paper"}, source="spec.yaml")
    with pytest.raises(ConfigError, match="unknown protocol 'paper'"):
        DataSpaceAgent.check_settings({"protocol": "paper"}, has_model=True)


def test_the_profile_is_part_of_the_fingerprint() -> None:
    """Guards resuming a run under another profile (its results would mix)."""
    official = parse_spec(BASE, source="s").identity("rel")
    extended = parse_spec({**BASE, "protocol": "extended"}, source="s").identity("rel")
    assert official["protocol"] == "official"
    assert fingerprint(official) != fingerprint(extended)


def test_every_rule_differs_between_the_profiles_but_stripping() -> None:
    """Guards the one record of rules: each switch is a named field, read in one place."""
    rules = ProtocolProfile.rules()
    assert len(rules) == 14
    differing = {r for r in rules if getattr(OFFICIAL, r) != getattr(EXTENDED, r)}
    assert differing == set(rules) - {"strip_question"}


def test_result_rows_and_report_headings_carry_the_profile() -> None:
    from dataspace.report.basic import summary_markdown, summary_page
    from dataspace.runs.results import COLUMNS, normalize_row

    assert "protocol" in dict(COLUMNS)
    assert normalize_row({"protocol": "extended"})["protocol"] == "extended"
    summary = {"run_id": "r", "protocol": "extended", "attempts": 0, "wall_seconds": 0.0}
    summary["agents"] = {}
    assert "Protocol: extended." in summary_markdown(summary)
    assert "Protocol: extended." in summary_page(summary)
