"""The Data Workbench Runtime inside a real local sandbox: the official tools at the official
paths, over a demo PDF and video made by the project's own renderers, and nothing of the
controller's Python."""

from __future__ import annotations

import io
import json
import wave
from pathlib import Path

import pytest

from dataspace.sandbox import SandboxSpec, workbench
from dataspace.sandbox.local import LocalBackend, LocalSandbox

pytestmark = pytest.mark.sandbox

OFFICIAL_IMPORTS = "import cv2, fitz, numpy, pandas, pdfplumber, PIL, pyarrow, pypdf, pytesseract"
OFFICIAL_VERSIONS = {
    "numpy": "2.4.6",
    "opencv-python-headless": "5.0.0.93",
    "pandas": "3.0.3",
    "pdfplumber": "0.11.10",
    "pillow": "12.3.0",
    "pyarrow": "25.0.0",
    "pymupdf": "1.28.0",
    "pypdf": "6.14.2",
    "pytesseract": "0.3.13",
}
OFFICIAL_TOOLS_SHA256 = "71faab0935ae2f9740c2a797816bae4d31c94065349519f5b80a9f7a20141c17"


def _silent_wav(seconds: float, rate: int = 16000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\0\0" * int(seconds * rate))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A task context with a PDF and a video rendered as the builder renders them."""
    from builder.render.pdf import markdown_to_pdf
    from builder.video.encoding import encode

    folder = tmp_path_factory.mktemp("workbench") / "context"
    folder.mkdir()
    pdf = markdown_to_pdf(
        "# Ward report\n\n## Admissions\n\nThe north ward admitted 42 patients in March.\n",
        title="Ward report",
    )
    (folder / "report.pdf").write_bytes(pdf)
    width, height, fps, seconds = 64, 48, 5, 2.0
    frames = [bytes([i * 20 % 256]) * (width * height * 3) for i in range(int(fps * seconds))]
    video = encode(
        frames, width=width, height=height, fps=fps, audio_wav=_silent_wav(seconds),
        seconds=seconds,
    )  # fmt: skip
    (folder / "clip.mp4").write_bytes(video)
    folder.chmod(0o755)
    for path in folder.iterdir():
        path.chmod(0o644)
    return folder


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> LocalSandbox:  # type: ignore[misc]
    backend = LocalBackend(state_dir=tmp_path_factory.mktemp("state"))
    with backend.create(SandboxSpec(workspace=workspace)) as box:
        yield box


def test_pdftotext_extracts_the_demo_pdf(sandbox: LocalSandbox) -> None:
    result = sandbox.exec("pdftotext -layout /workspace/report.pdf -")
    assert result.exit_code == 0, result.stderr
    assert "north ward admitted 42 patients" in " ".join(result.stdout.split())
    assert sandbox.exec("pdfinfo /workspace/report.pdf").stdout.count("Pages:") == 1


def test_ffprobe_reads_the_demo_video(sandbox: LocalSandbox) -> None:
    result = sandbox.exec(
        "ffprobe -v error -show_entries stream=codec_type,width,height -of json /workspace/clip.mp4"
    )
    assert result.exit_code == 0, result.stderr
    streams = json.loads(result.stdout)["streams"]
    video = next(s for s in streams if s["codec_type"] == "video")
    assert (video["width"], video["height"]) == (64, 48)
    frame = sandbox.exec("ffmpeg -v error -i /workspace/clip.mp4 -frames:v 1 /output/f.png")
    assert frame.exit_code == 0, frame.stderr
    assert sandbox.read_file("f.png")[:4] == b"\x89PNG"


def test_tesseract_has_english_and_simplified_chinese(sandbox: LocalSandbox) -> None:
    result = sandbox.exec("tesseract --list-langs")
    assert result.exit_code == 0, result.stderr
    langs = set(result.stdout.split())
    assert {"eng", "chi_sim"} <= langs


def test_the_workbench_python_is_the_official_one(sandbox: LocalSandbox) -> None:
    where = sandbox.exec(["python3", "-c", "import sys; print(sys.executable, sys.prefix)"])
    assert where.stdout.split() == ["/usr/local/bin/python3", "/usr/local"]
    imports = sandbox.exec(["python3", "-c", OFFICIAL_IMPORTS + "; print('ok')"], timeout=120)
    assert imports.stdout == "ok\n", imports.stderr
    script = (
        "import importlib.metadata as m, json; "
        f"print(json.dumps({{n: m.version(n) for n in {sorted(OFFICIAL_VERSIONS)!r}}}))"
    )
    versions = json.loads(sandbox.exec(["python3", "-c", script]).stdout)
    assert versions == OFFICIAL_VERSIONS
    tools = sandbox.exec("for t in jq rg socat sqlite3 file bwrap find; do command -v $t; done")
    assert len(tools.stdout.split()) == 7, tools.stdout


def test_the_controllers_python_is_not_visible(sandbox: LocalSandbox) -> None:
    import sys

    result = sandbox.exec(["python3", "-c", "import dataspace"])
    assert result.exit_code != 0
    assert "No module named 'dataspace'" in result.stderr
    import site

    # the controller's environment and its packages; its base Python too, unless that is
    # Debian's own under /usr, which the sandbox shows by design (the host's tools)
    paths = {sys.prefix, sys.executable, *site.getsitepackages()}
    if sys.base_prefix != "/usr":
        paths.add(sys.base_prefix)
    for path in paths:
        assert sandbox.exec(["test", "-e", path]).exit_code != 0, path


def test_tools_md_and_the_manifest_are_at_the_official_paths(sandbox: LocalSandbox) -> None:
    env = sandbox.exec("echo $DATASPACE_TOOLS_MANIFEST").stdout.strip()
    assert env == "/opt/dataspace/TOOLS.md"
    digest = sandbox.exec("sha256sum /opt/dataspace/TOOLS.md").stdout.split()[0]
    assert digest == OFFICIAL_TOOLS_SHA256
    caps = json.loads(sandbox.exec("cat /opt/dataspace/capabilities.json").stdout)
    assert caps["runtime"] == "Data Workbench Runtime" and caps["version"] == "1.0"
    assert sandbox.exec("touch /opt/dataspace/x").exit_code != 0
    inside = json.loads(sandbox.exec("cat /opt/dataspace/runtime-manifest.json").stdout)
    assert inside["tools_sha256"] == OFFICIAL_TOOLS_SHA256
    assert sandbox.info()["runtime"] == workbench.manifest_identity(inside)


def test_a_missing_workbench_is_a_clear_error(tmp_path: Path) -> None:
    from dataspace.errors import SandboxError

    with pytest.raises(SandboxError, match=r"Data Workbench Runtime.*scripts/dev.sh"):
        LocalBackend(state_dir=tmp_path / "state", runtime_root=tmp_path / "nowhere")


def test_etc_is_the_workbenchs_own_not_the_hosts(sandbox: LocalSandbox) -> None:
    """Guards the sandbox's /etc showing the host's users, host name and apt sources."""
    import socket

    users = sandbox.exec("cat /etc/passwd").stdout
    assert [line.split(":")[0] for line in users.splitlines()] == ["root", "nobody"]
    host_users = {
        line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines() if line
    } - {"root", "nobody"}
    assert not any(f"{user}:" in users for user in host_users)
    assert sandbox.exec("cat /etc/hostname").stdout == "sandbox\n"
    assert sandbox.exec("hostname").stdout == "sandbox\n"
    if socket.gethostname() != "sandbox":
        assert socket.gethostname() not in sandbox.exec("cat /etc/hosts /etc/hostname").stdout
    assert sandbox.exec("test -e /etc/apt").exit_code != 0
    assert sandbox.exec("ls /etc/apt /etc/shadow /etc/machine-id").exit_code != 0
    assert sandbox.exec("whoami").stdout == "nobody\n"
    lookup = "import socket; print(socket.gethostbyname('localhost'))"
    assert sandbox.exec(["python3", "-c", lookup]).stdout == "127.0.0.1\n"
    assert sandbox.exec("touch /etc/x").exit_code != 0  # read-only
    # what programs need of /etc still works: the loader, alternatives, fonts, UTC
    assert sandbox.exec("awk 'BEGIN { print 1 + 1 }'").stdout == "2\n"
    assert sandbox.exec("date +%Z").stdout == "UTC\n"
    assert sandbox.exec("fc-list | head -1").exit_code == 0
    assert sandbox.exec("bash -lc 'echo $PATH'").stdout.startswith("/usr/local/bin:")


def test_sqlite_jq_and_ripgrep_run(sandbox: LocalSandbox) -> None:
    """The command-line tools the workbench lists run with the sandbox's own /etc."""
    sql = sandbox.exec("sqlite3 :memory: 'select 6 * 7'")
    assert sql.stdout == "42\n", sql.stderr
    jq = sandbox.exec("echo '{\"a\": [1, 2]}' | jq -c '.a'")
    assert jq.stdout == "[1,2]\n", jq.stderr
    rg = sandbox.exec("printf 'north\\nsouth\\n' > /output/w.txt && rg -c south /output/w.txt")
    assert rg.stdout == "1\n", rg.stderr
    mime = sandbox.exec("file -b --mime-type /workspace/report.pdf")
    assert mime.stdout == "application/pdf\n", mime.stderr
