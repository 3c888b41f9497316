"""Controller-side safety of DataSpace-Agent's tools: images, submitted answers, CSV limits.

Each test guards one finding of a hostile trajectory: an image that decodes to gigabytes on
the controller, an answer rewritten after it was accepted, and CSVs that ``submit_answer``
accepted though the evaluator always rejects them.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path
from typing import Any

import pytest
from agents_helpers import bash, run_agent, submit, workspace

from dataspace.agents._react_tools import ToolBox, ToolConfig
from dataspace.agents.dataspace_agent import DataSpaceAgent
from dataspace.agents.protocol import EXTENDED, OFFICIAL

pytestmark = [pytest.mark.sandbox]

ROOT = Path(__file__).resolve().parents[2]


def png(width: int, height: int, *, rgba: bool = False) -> bytes:
    """A flat-colour PNG: a huge raster in a small file, written without holding it.

    Each block of rows is deflated once, ending in a full flush so that the compressed
    block can simply be repeated; the zlib header and checksum are written by hand.
    """
    channels, colour = (4, 6) if rgba else (1, 0)

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    row = b"\x00" + b"\x80" * (width * channels)
    block = row * 64
    blocks, rest = divmod(height, 64)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    middle = comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH)
    tail = comp.compress(row * rest) + comp.flush()
    adler = 1
    for _ in range(blocks):
        adler = zlib.adler32(block, adler)
    adler = zlib.adler32(row * rest, adler)
    idat = b"\x78\xda" + middle * blocks + tail + struct.pack(">I", adler)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("images") / "workspace"
    ws.mkdir()
    (ws / "bomb-grey.png").write_bytes(png(19_999, 19_999))
    (ws / "bomb-rgba.png").write_bytes(png(19_999, 19_999, rgba=True))
    (ws / "large.png").write_bytes(png(9_000, 9_000))
    for p in [ws, *ws.iterdir()]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return ws


# Runs view_image in a fresh controller process and reports its own peak memory and its
# children's (the sandbox's helpers and the image decoder), in KiB.
_PROBE = textwrap.dedent(
    """
    import json, resource, sys
    from pathlib import Path
    from dataspace.agents._react_tools import ToolBox, ToolConfig
    from dataspace.sandbox import Limits, SandboxSpec, get_backend

    sb = get_backend("local").create(SandboxSpec(
        workspace=Path(sys.argv[1]),
        limits=Limits(cpus=1, memory_bytes=1024**3, wall_seconds=600, command_timeout=120)))
    try:
        tools = ToolBox(sb, ToolConfig())
        tools.execute("bash", json.dumps({"command": "true"}))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out = tools.execute("view_image", json.dumps({"path": sys.argv[2]}))
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    finally:
        sb.close()
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"result": out.result, "before_kib": before, "after_kib": after,
                      "children_kib": children}))
    """
)


def probe(ws: Path, name: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(ws), name],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["bomb-grey.png", "bomb-rgba.png"])
def test_decompression_bombs_are_refused_without_growing_the_controller(
    images: Path, name: str
) -> None:
    """Guards the 439 KB PNG that took the controller to 2.3 GB (and its RGBA twin)."""
    assert (images / name).stat().st_size < 2 * 1024**2  # small files, huge rasters
    got = probe(images, name)
    result = got["result"]
    assert result["ok"] is False
    # the official tool's own refusal: Pillow's ceiling, checked from the header
    assert result["error_type"] == "DecompressionBombError"
    assert "399960001 pixels" in result["error"]
    grown_mib = (got["after_kib"] - got["before_kib"]) / 1024
    assert grown_mib < 64, f"the controller grew by {grown_mib:.0f} MiB"


def test_large_images_are_decoded_outside_the_controller(images: Path) -> None:
    """Guards that a legitimate large image is decoded in the bounded child, not here."""
    got = probe(images, "large.png")
    image = got["result"]["image"]
    assert (image["original_width"], image["original_height"]) == (9000, 9000)
    assert (image["normalized_width"], image["normalized_height"]) == (1600, 1600)
    assert image["encoding"] == "image/jpeg" and image["jpeg_quality"] == 90
    grown_mib = (got["after_kib"] - got["before_kib"]) / 1024
    assert grown_mib < 64, f"the controller grew by {grown_mib:.0f} MiB"
    assert got["children_kib"] / 1024 > 81  # the 81-megapixel raster lived in the child


def test_the_decoder_runs_under_a_memory_bound(images: Path) -> None:
    """Guards the bound itself: an image needing more than the limit is refused."""
    from dataspace.agents._image import ImageRefused, normalize_image

    data = (images / "large.png").read_bytes()
    with pytest.raises(ImageRefused) as info:
        normalize_image(data, max_edge=1600, quality=90, memory_bytes=160 * 1024**2)
    assert info.value.error_type == "MemoryError"


def test_images_are_reencoded_as_the_official_tool_does(local_backend: Any, tmp_path: Path) -> None:
    """Guards the official normalization (EXIF orientation, RGB, 1,600 px, JPEG q90)."""
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated: the official tool applies the orientation first
    Image.new("RGBA", (3200, 1000), (10, 200, 30, 128)).save(buf, format="PNG", exif=exif)
    ws = workspace(tmp_path, {"wide.png": buf.getvalue()})
    sb = local_backend.create(_spec(ws))
    try:
        out = ToolBox(sb, ToolConfig()).execute("view_image", json.dumps({"path": "wide.png"}))
    finally:
        sb.close()
    meta = out.result["image"]
    assert (meta["original_width"], meta["original_height"]) == (1000, 3200)
    assert (meta["normalized_width"], meta["normalized_height"]) == (500, 1600)
    assert out.image_message is not None
    url = out.image_message["content"][1]["image_url"]["url"]
    jpeg = base64.b64decode(url.split(",", 1)[1])
    with Image.open(io.BytesIO(jpeg)) as shown:
        assert shown.format == "JPEG" and shown.mode == "RGB" and shown.size == (500, 1600)


def _spec(ws: Path) -> Any:
    from dataspace.sandbox import Limits, SandboxSpec

    return SandboxSpec(workspace=ws, limits=Limits(cpus=1, memory_bytes=1024**3, wall_seconds=300))


def _submit(local_backend: Any, tmp_path: Path, data: bytes, profile: Any) -> Any:
    ws = workspace(tmp_path, {"readme.txt": b"x"})
    sb = local_backend.create(_spec(ws))
    try:
        sb.write_file("/output/prediction.csv", data)
        tools = ToolBox(sb, ToolConfig(protocol=profile))
        return tools.execute("submit_answer", json.dumps({"path": "/output/prediction.csv"}))
    finally:
        sb.close()


EVALUATOR_REJECTS = {
    "nul": (b"a,b\n1,\x002\n", "NUL byte"),
    "columns": ((",".join(f"c{i}" for i in range(65)) + "\n").encode(), "64-column"),
    "rows": (b"a\n" + b"1\n" * 100_001, "100000-data-row"),
    "cell": (b"a\n" + b"x" * (2 * 1024**2 + 1) + b"\n", "field larger than field limit"),
}


@pytest.mark.parametrize("case", sorted(EVALUATOR_REJECTS))
def test_extended_submit_refuses_what_the_evaluator_rejects(
    case: str, local_backend: Any, tmp_path: Path
) -> None:
    """Guards submit_answer accepting CSVs the evaluator always rejects (extended profile)."""
    data, message = EVALUATOR_REJECTS[case]
    pred = tmp_path / "p.csv"
    pred.write_bytes(data)
    from evaluator.csvfile import read_csv
    from evaluator.errors import CsvError

    with pytest.raises(CsvError):  # the evaluator's own reader rejects it
        read_csv(pred)
    out = _submit(local_backend, tmp_path, data, EXTENDED)
    assert out.submitted_path is None
    assert out.result["ok"] is False
    assert "the evaluator would reject this CSV" in out.result["error"]
    assert message in out.result["error"]
    # the official profile keeps the official behaviour: a rectangular CSV is accepted
    (tmp_path / "official").mkdir()
    official = _submit(local_backend, tmp_path / "official", data, OFFICIAL)
    assert official.result.get("accepted") is True


def test_the_submitted_bytes_are_what_is_scored(local_backend: Any, tmp_path: Path, server) -> None:
    """Guards the answer rewritten after submit_answer accepted it (trace sha != scored)."""
    import hashlib

    ws = workspace(tmp_path, {"readme.txt": b"x"})
    answer = b"city\nLyon\n"
    server.set_script(
        "task_1",
        [
            {"tool_calls": [bash("printf 'city\\nLyon\\n' > /output/prediction.csv")]},
            {"tool_calls": [submit()]},
        ],
    )

    def rewrite(sb: Any) -> None:  # a process left in the sandbox rewrites the answer
        res = sb.exec(["sh", "-c", "printf 'city\\nWRONG\\n' > /output/prediction.csv"])
        assert res.exit_code == 0

    run = run_agent(local_backend, ws, tmp_path, server, inspect=rewrite)
    assert run.result.end_state == "submitted"
    assert run.outputs["prediction.csv"] == b"city\nWRONG\n"  # the file did change
    snap = run.result.prediction
    assert snap is not None and snap.data == answer
    assert snap.sha256 == hashlib.sha256(answer).hexdigest()
    submit_event = next(e for e in run.events if e["type"] == "submit")
    assert submit_event["sha256"] == snap.sha256


def test_official_profile_scores_prediction_csv_whatever_was_submitted(
    local_backend: Any, tmp_path: Path
) -> None:
    """Guards the official runner's scored file: always /output/prediction.csv."""
    ws = workspace(tmp_path, {"readme.txt": b"x"})
    for profile, expected in ((OFFICIAL, b"a\nscored\n"), (EXTENDED, b"a\nsubmitted\n")):
        sb = local_backend.create(_spec(ws))
        try:
            sb.write_file("/output/prediction.csv", b"a\nscored\n")
            sb.write_file("/output/answer.csv", b"a\nsubmitted\n")
            tools = ToolBox(sb, ToolConfig(protocol=profile))
            out = tools.execute("submit_answer", json.dumps({"path": "/output/answer.csv"}))
        finally:
            sb.close()
        assert out.submitted_path == "/output/answer.csv"
        assert out.snapshot is not None and out.snapshot.data == expected, profile.name
    sb = local_backend.create(_spec(ws))
    try:
        sb.write_file("/output/answer.csv", b"a\nsubmitted\n")
        tools = ToolBox(sb, ToolConfig(protocol=OFFICIAL))
        out = tools.execute("submit_answer", json.dumps({"path": "/output/answer.csv"}))
    finally:
        sb.close()
    assert out.result["accepted"] is True  # the official tool accepts it, but scores nothing
    assert out.snapshot is not None and out.snapshot.data is None
    assert "prediction.csv" in (out.snapshot.problem or "")


class RewritingAgent(DataSpaceAgent):
    """DataSpace-Agent, then a process in its sandbox rewrites the answer it submitted."""

    name = "rewriting-agent"

    def run(self, ctx: Any) -> Any:
        result = super().run(ctx)
        res = ctx.sandbox.exec(
            ["sh", "-c", "printf 'city,population\\nWRONG,1\\n' > prediction.csv"]
        )
        assert res.exit_code == 0
        return result


@pytest.mark.parametrize("protocol", ["official", "extended"])
def test_the_stored_and_scored_answer_is_the_submitted_one(
    protocol: str, tiny_release: Path, local_backend: Any, tmp_path: Path
) -> None:
    """Guards the stored/scored prediction differing from the one submit_answer accepted."""
    import hashlib
    import time

    from agents_helpers import model_for

    from dataspace.agents import register_harness
    from dataspace.runs.attempt import AttemptRequest, run_attempt
    from dataspace.runs.spec import AgentSpec, Limits, SandboxConfig
    from dataspace.store import open_store
    from dataspace.testing.scripted_server import ScriptedServer

    answer = b"city,population\nLyon,522000\nGraz,291000\n"
    write = "printf 'city,population\\nLyon,522000\\nGraz,291000\\n' > /output/prediction.csv"
    register_harness("rewriting-agent", f"{__name__}:RewritingAgent")
    with ScriptedServer(
        {"task_1": [{"tool_calls": [bash(write)]}, {"tool_calls": [submit()]}]}
    ) as srv:
        row = run_attempt(
            AttemptRequest(
                run_id="snap",
                store_uri=f"file://{tmp_path / 'store'}",
                release_root=str(tiny_release),
                agent=AgentSpec(name="a", harness="rewriting-agent", model=model_for(srv)),
                task_id="task_1",
                attempt=1,
                key="k1",
                limits=Limits(wall_seconds=120, command_timeout=30, memory_bytes=1024**3),
                sandbox=SandboxConfig(backend="local"),
                submitted_at=time.time(),
                protocol=protocol,
            )
        )
    assert row["status"] == "submitted" and row["passed"] is True, row
    store = open_store(f"file://{tmp_path / 'store'}")
    stored = [k for k in store.list("") if k.endswith("output/prediction.csv")]
    assert stored and all(store.get_bytes(k) == answer for k in stored)
    meta = json.loads(next(store.get_bytes(k) for k in store.list("") if k.endswith("run.json")))
    assert meta["scored_sha256"] == hashlib.sha256(answer).hexdigest()


# ---- linked and oversized answers, through a real attempt -------------------------------

ANSWER = b"city,population\nLyon,522000\nGraz,291000\n"
WRITE_ANSWER = (
    "mkdir -p /output/answers && "
    "printf 'city,population\\nLyon,522000\\nGraz,291000\\n' > /output/answers/final.csv"
)
BIG_ANSWER = "{ echo city,population; yes Lyon,522000 | head -n 2000000; } > /output/prediction.csv"


def _attempt(
    steps: list[dict[str, Any]], protocol: str, release: Path, tmp_path: Path, **limits: Any
) -> tuple[dict[str, Any], int, Any]:
    """One real attempt (local sandbox, scoring, store) of a scripted DataSpace-Agent.

    Returns its result row, the number of model requests and the run's store.
    """
    import time

    from agents_helpers import model_for

    from dataspace.runs.attempt import AttemptRequest, run_attempt
    from dataspace.runs.spec import AgentSpec, Limits, SandboxConfig
    from dataspace.store import open_store
    from dataspace.testing.scripted_server import ScriptedServer

    store = f"file://{tmp_path / 'store'}"
    with ScriptedServer({"task_1": steps}) as srv:
        row = run_attempt(
            AttemptRequest(
                run_id="answers",
                store_uri=store,
                release_root=str(release),
                agent=AgentSpec(name="a", harness="dataspace-agent", model=model_for(srv)),
                task_id="task_1",
                attempt=1,
                key="k1",
                limits=Limits(wall_seconds=120, command_timeout=60, memory_bytes=1024**3, **limits),
                sandbox=SandboxConfig(backend="local"),
                submitted_at=time.time(),
                protocol=protocol,
            )
        )
        requests = len(srv.requests)
    return row, requests, open_store(store)


def _stored(store: Any, suffix: str) -> list[bytes]:
    return [bytes(store.get_bytes(k)) for k in store.list("") if k.endswith(suffix)]


@pytest.mark.parametrize("protocol", ["official", "extended"])
def test_a_prediction_linked_inside_output_is_scored_as_its_target(
    protocol: str, tiny_release: Path, local_backend: Any, tmp_path: Path
) -> None:
    """Guards the linked prediction.csv that the official runner scores and we scored 0%."""
    link = "ln -s answers/final.csv /output/prediction.csv && readlink /output/prediction.csv"
    row, requests, store = _attempt(
        [{"tool_calls": [bash(f"{WRITE_ANSWER} && {link}")]}, {"tool_calls": [submit()]}],
        protocol,
        tiny_release,
        tmp_path,
    )
    assert row["status"] == "submitted" and row["passed"] is True, row
    assert requests == 2
    # what is stored is the link's target, taken from inside the sandbox
    assert _stored(store, "output/prediction.csv") == [ANSWER]
    meta = json.loads(_stored(store, "run.json")[0])
    assert meta["scored_path"] == "/output/answers/final.csv"


@pytest.mark.parametrize(
    "target", ["/workspace/cities.csv", "../workspace/cities.csv", "/etc/passwd"]
)
def test_a_prediction_linked_out_of_output_is_refused(
    target: str, tiny_release: Path, local_backend: Any, tmp_path: Path
) -> None:
    """Guards that resolving links never follows one out of /output (workspace, /etc)."""
    row, _, store = _attempt(
        [
            {"tool_calls": [bash(f"ln -s {target} /output/prediction.csv")]},
            {"tool_calls": [submit()]},
        ],
        "official",
        tiny_release,
        tmp_path,
        model_turns=3,
    )
    assert row["status"] == "model_turns_exhausted" and row["passed"] is False, row
    events = [json.loads(line) for line in _stored(store, "events.jsonl")[0].splitlines()]
    refusal = [
        e for e in events if e.get("type") == "tool_result" and e.get("tool") == "submit_answer"
    ]
    assert refusal, [e.get("type") for e in events]
    text = json.dumps(refusal[0])
    assert "path escapes the permitted workspace/output roots" in text
    assert _stored(store, "output/prediction.csv") == []


def test_official_profile_scores_a_linked_prediction_csv_only_inside_output(
    local_backend: Any, tmp_path: Path
) -> None:
    """Guards the official scored file when another path is submitted: a link is followed
    inside /output, and one that leaves it scores nothing."""
    ws = workspace(tmp_path, {"readme.txt": b"a\nsecret\n"})
    for target, expected in (("answers/final.csv", ANSWER), ("/workspace/readme.txt", None)):
        sb = local_backend.create(_spec(ws))
        try:
            sb.write_file("/output/answers/final.csv", ANSWER)
            sb.write_file("/output/other.csv", b"city\nnone\n")
            assert sb.exec(["ln", "-s", target, "/output/prediction.csv"]).exit_code == 0
            tools = ToolBox(sb, ToolConfig(protocol=OFFICIAL))
            out = tools.execute("submit_answer", json.dumps({"path": "/output/other.csv"}))
        finally:
            sb.close()
        assert out.result["accepted"] is True
        assert out.snapshot is not None and out.snapshot.data == expected, target
        if expected is None:
            assert "escapes" in (out.snapshot.problem or "")


def test_official_profile_accepts_an_oversized_answer_and_the_evaluator_rejects_it(
    tiny_release: Path, local_backend: Any, tmp_path: Path
) -> None:
    """Guards the submission over 20 MiB: official accepts it and ends; ours refused it and
    made one more request. The evaluator's own reader then judges the collected file."""
    row, requests, store = _attempt(
        [{"tool_calls": [bash(BIG_ANSWER)]}, {"tool_calls": [submit()]}],
        "official",
        tiny_release,
        tmp_path,
    )
    assert requests == 2  # the run ended at the accepted submission
    assert row["status"] == "submitted" and row["passed"] is False, row
    assert row["error_code"] == "invalid_prediction_csv"
    assert "20971520-byte limit" in row["verdict"]["error"]
    events = [json.loads(line) for line in _stored(store, "events.jsonl")[0].splitlines()]
    result = next(
        e for e in events if e.get("type") == "tool_result" and e.get("tool") == "submit_answer"
    )
    shape = json.dumps(result)
    assert '"data_rows": 2000000' in shape and '"accepted": true' in shape
    # stored as the official runner copies it, and it is the submitted file
    (stored,) = _stored(store, "output/prediction.csv")
    assert len(stored) > 20 * 1024**2 and stored.startswith(b"city,population\nLyon,522000\n")
    meta = json.loads(_stored(store, "run.json")[0])
    import hashlib

    assert meta["scored_sha256"] == hashlib.sha256(stored).hexdigest()


def test_extended_profile_refuses_an_oversized_answer(
    tiny_release: Path, local_backend: Any, tmp_path: Path
) -> None:
    """Guards the extended profile's own rule: over the evaluator's limit is refused."""
    row, requests, store = _attempt(
        [{"tool_calls": [bash(BIG_ANSWER)]}, {"tool_calls": [submit()]}],
        "extended",
        tiny_release,
        tmp_path,
        model_turns=3,
    )
    assert requests == 3  # the refusal went back to the model
    assert row["status"] == "model_turns_exhausted" and row["passed"] is False, row
    assert _stored(store, "output/prediction.csv") == []


def test_official_check_of_an_oversized_answer_keeps_its_errors(
    local_backend: Any, tmp_path: Path
) -> None:
    """Guards the in-sandbox answer check: a ragged large CSV is refused as official does."""
    ws = workspace(tmp_path, {"readme.txt": b"x"})
    sb = local_backend.create(_spec(ws))
    try:
        res = sb.exec(
            [
                "sh",
                "-c",
                "{ echo a,b; yes 1,2 | head -n 6000000; echo 3; } > /output/prediction.csv",
            ]
        )
        assert res.exit_code == 0
        tools = ToolBox(sb, ToolConfig(protocol=OFFICIAL))
        out = tools.execute("submit_answer", json.dumps({"path": "/output/prediction.csv"}))
    finally:
        sb.close()
    assert out.submitted_path is None
    assert out.result == {
        "ok": False,
        "error_type": "ValueError",
        "error": "row 6000002 has 1 columns; expected 2",
    }


def test_eight_attempts_decoding_bombs_at_once_stay_in_their_memory_groups() -> None:
    """Guards the decoder running on the host outside any cgroup (a 13,300-pixel PNG took it
    to 2.0 GB, bounded only by 3 GiB of address space per attempt): each decode is charged
    to a memory group of its own, killed at its limit, and the controller stays small."""
    from dataspace.sandbox.local import confine

    if not confine.available():
        pytest.skip("no writable cgroup hierarchy on this host (decoders use RLIMIT_AS)")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_image_bombs.py"),
         "--attempts", "8", "--pixels", "12000", "--memory-mib", "256"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["bomb_bytes"] < 2 * 1024**2 and got["pixels"] == 144_000_000
    limit = 256 * 1024**2
    for result in got["results"]:  # a clear tool error, not a crash
        assert result["ok"] is False and result["error_type"] == "MemoryError", result
        assert "256 MiB" in result["error"]
    assert len(got["decoders"]) == 8
    assert len({d["group"] for d in got["decoders"]}) == 8  # one group per decode
    for decoder in got["decoders"]:
        assert decoder["group"] and decoder["limit"] == limit and decoder["oom_killed"] is True
        # the raster was charged to that group, up to its limit
        assert 128 * 1024**2 < decoder["peak"] <= limit + 1024**2, decoder
    assert got["controller_peak_mib"] < 300, got["controller_peak_mib"]


def test_a_link_with_an_absolute_target_is_refused_under_official_only(
    local_backend: Any, tmp_path: Path
) -> None:
    """Guards prediction.csv -> /output/answers/final.csv: the official tool resolves it on
    the host (a host path, refused); the extended profile resolves it in the sandbox."""
    ws = workspace(tmp_path, {"readme.txt": b"x"})
    outcomes = {}
    for profile in (OFFICIAL, EXTENDED):
        sb = local_backend.create(_spec(ws))
        try:
            sb.write_file("/output/answers/final.csv", ANSWER)
            link = ["ln", "-s", "/output/answers/final.csv", "/output/prediction.csv"]
            assert sb.exec(link).exit_code == 0
            tools = ToolBox(sb, ToolConfig(protocol=profile))
            outcomes[profile.name] = tools.execute(
                "submit_answer", json.dumps({"path": "/output/prediction.csv"})
            )
        finally:
            sb.close()
    assert outcomes["official"].result == {
        "ok": False,
        "error_type": "ValueError",
        "error": "path escapes the permitted workspace/output roots",
    }
    extended = outcomes["extended"]
    assert extended.result["accepted"] is True
    assert extended.snapshot is not None and extended.snapshot.data == ANSWER
