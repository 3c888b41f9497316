import json

import pytest

from dataspace.errors import ConfigError
from dataspace.runs.spec import diff_identity, fingerprint, load_spec, parse_size, parse_spec

BASE = {
    "run_id": "r1",
    "release": "/rel",
    "store": "file:///s",
    "agents": [{"name": "gold", "harness": "gold"}],
}


def test_defaults_are_the_papers_limits():
    spec = parse_spec(BASE, source="spec.yaml")
    assert (spec.limits.model_turns, spec.limits.tool_actions) == (60, 50)
    assert (spec.limits.wall_seconds, spec.limits.command_timeout) == (1800, 180)
    assert spec.sandbox.backend == "local"
    assert spec.attempts == 1


def test_yaml_file_relative_paths_resolve_against_the_spec(tmp_path):
    p = tmp_path / "spec.yaml"
    p.write_text(
        "run_id: r\nrelease: rel\nstore: out/store\nagents:\n"
        "  - {name: gold, harness: gold}\nsandbox: {memory: 512MiB}\n"
    )
    spec = load_spec(p)
    assert spec.release == str(tmp_path / "rel")
    assert spec.store == str(tmp_path / "out" / "store")
    assert spec.limits.memory_bytes == 512 * 1024**2


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ({"run_id": "bad id"}, "run_id"),
        ({"agents": []}, "agents"),
        (
            {"agents": [{"name": "a", "harness": "gold"}, {"name": "a", "harness": "gold"}]},
            "unique",
        ),
        ({"limits": {"model_turns": 0}}, "limits.model_turns"),
        ({"limits": {"turns": 3}}, "limits.turns: unknown key; did you mean 'model_turns'?"),
        ({"sandbox": {"memory": "lots"}}, "sandbox.memory"),
        ({"concurrency": "2"}, "concurrency"),
        (
            {"agents": [{"name": "m", "harness": "x", "model": {"id": "m", "prices": {"inp": 1}}}]},
            "agents[0].model.prices",
        ),
    ],
)
def test_bad_specs_name_the_key(patch, needle):
    with pytest.raises(ConfigError) as ei:
        parse_spec({**BASE, **patch}, source="spec.yaml")
    msg = str(ei.value)
    assert msg.startswith("spec.yaml")
    assert needle in msg
    assert "\n" not in msg


def test_invalid_yaml_is_one_line_with_the_line_number(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("run_id: r\nagents: [\n")
    with pytest.raises(ConfigError) as ei:
        load_spec(p)
    assert str(p) in str(ei.value) and "line" in str(ei.value)


def test_fingerprint_ignores_concurrency_but_not_limits():
    a = parse_spec(BASE, source="s")
    b = parse_spec({**BASE, "concurrency": 8, "ray": {"address": "auto"}}, source="s")
    c = parse_spec({**BASE, "limits": {"model_turns": 10}}, source="s")
    fa, fb, fc = (fingerprint(x.identity("rel")) for x in (a, b, c))
    assert fa == fb
    assert fa != fc
    assert diff_identity(a.identity("rel"), c.identity("rel")) == ["limits.model_turns"]
    assert fingerprint(a.identity("rel")) != fingerprint(a.identity("other-release"))
    json.dumps(a.to_dict())  # serializable


def test_parse_size():
    assert parse_size("1GiB", what="x") == 1024**3
    assert parse_size("1000b", what="x") == 1000
    with pytest.raises(ConfigError, match="x: 1000 has no unit; did you mean 1000g"):
        parse_size(1000, what="x")  # a bare number was once read as bytes (issue 24)
    with pytest.raises(ConfigError):
        parse_size(True, what="x")
