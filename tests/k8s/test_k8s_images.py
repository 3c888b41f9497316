"""The container images: Dockerfiles parse, reference files that exist, pin versions, and
the runtime's TOOLS.md lists exactly what its Dockerfile installs (docker cannot run here)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "images"
INSTRUCTIONS = {
    "FROM",
    "RUN",
    "CMD",
    "LABEL",
    "EXPOSE",
    "ENV",
    "ADD",
    "COPY",
    "ENTRYPOINT",
    "VOLUME",
    "USER",
    "WORKDIR",
    "ARG",
    "ONBUILD",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
}
#: The runtime's tools as the paper's runtime image lists them (agent-protocol.md).
PAPER_APT = {
    "ffmpeg",
    "poppler-utils",
    "tesseract-ocr",
    "tesseract-ocr-eng",
    "tesseract-ocr-chi-sim",
    "sqlite3",
    "jq",
    "ripgrep",
}
PAPER_PYTHON = {
    "numpy",
    "pandas",
    "pyarrow",
    "opencv-python-headless",
    "pymupdf",
    "pypdf",
    "pdfplumber",
    "pillow",
    "pytesseract",
}


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def parse_dockerfile(path: Path) -> list[Instruction]:
    """Instructions of a Dockerfile (continuations joined, comments dropped)."""
    out: list[Instruction] = []
    buf, start = "", 0
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue
        if not buf:
            start = number
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        keyword, _, args = buf.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
        buf = ""
    assert not buf, f"{path}: dangling line continuation"
    return out


def stage_args(instructions: list[Instruction]) -> dict[str, str]:
    return {
        i.args.split("=", 1)[0]: i.args.split("=", 1)[1]
        for i in instructions
        if i.keyword == "ARG" and "=" in i.args
    }


def copy_sources(instructions: list[Instruction]) -> list[str]:
    sources = []
    for i in instructions:
        if i.keyword in ("COPY", "ADD"):
            parts = [p for p in i.args.split() if not p.startswith("--")]
            sources.extend(parts[:-1])
    return sources


def apt_packages(instructions: list[Instruction]) -> set[str]:
    found: set[str] = set()
    for i in instructions:
        if i.keyword == "RUN" and "apt-get install" in i.args:
            tail = i.args.split("apt-get install", 1)[1].split(";", 1)[0]
            found |= {w for w in tail.split() if not w.startswith("-")}
    return found


def pinned_requirements(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-]+)", line)
        assert m, f"{path.name}: {line!r} is not pinned with =="
        pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


@pytest.mark.parametrize(
    ("dockerfile", "context"),
    [("Dockerfile.runtime", IMAGES), ("Dockerfile.controller", REPO)],
)
def test_dockerfiles_parse_pin_their_base_and_copy_files_that_exist(
    dockerfile: str, context: Path
) -> None:
    path = IMAGES / dockerfile
    instructions = parse_dockerfile(path)
    assert {i.keyword for i in instructions} <= INSTRUCTIONS
    assert instructions[0].keyword in ("ARG", "FROM")
    base = next(i for i in instructions if i.keyword == "FROM").args
    image = stage_args(instructions).get("PYTHON_IMAGE") if "${PYTHON_IMAGE}" in base else base
    assert image and re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*", image), image
    assert "latest" not in image
    assert re.fullmatch(r"\d{8}T\d{6}Z", stage_args(instructions)["DEBIAN_SNAPSHOT"])
    for source in copy_sources(instructions):
        assert (context / source).exists(), f"{dockerfile}: COPY source {source} is missing"
    ignore = IMAGES / f"{dockerfile}.dockerignore"
    allowed = {ln[1:] for ln in ignore.read_text().splitlines() if ln.startswith("!")}
    for source in copy_sources(instructions):
        assert source in allowed, f"{dockerfile}: {source} is excluded by {ignore.name}"
    user = [i.args for i in instructions if i.keyword == "USER"]
    assert user and not user[-1].startswith(("0", "root")), "the image must not run as root"


def test_the_runtime_installs_the_papers_tools_and_only_pinned_python_packages() -> None:
    instructions = parse_dockerfile(IMAGES / "Dockerfile.runtime")
    apt = apt_packages(instructions)
    assert apt >= PAPER_APT
    assert apt - PAPER_APT <= {"file", "ca-certificates"}
    pins = pinned_requirements(IMAGES / "runtime-requirements.txt")
    assert set(pins) >= PAPER_PYTHON
    assert "--no-deps" in next(
        i.args for i in instructions if "runtime-requirements" in i.args and i.keyword == "RUN"
    )
    solvers = {"langchain", "llama-index", "vanna", "sqlcoder", "transformers", "torch"}
    assert not solvers & set(pins), "the runtime offers generic tools only"


def test_tools_md_lists_what_the_runtime_installs() -> None:
    tools = (IMAGES / "TOOLS.md").read_text()
    instructions = parse_dockerfile(IMAGES / "Dockerfile.runtime")
    listed = set(re.findall(r"^\| `([a-z0-9.\-]+)` \|", tools, flags=re.MULTILINE))
    apt = apt_packages(instructions) - {"ca-certificates"}
    pins = pinned_requirements(IMAGES / "runtime-requirements.txt")
    assert apt <= listed, f"installed but not in TOOLS.md: {sorted(apt - listed)}"
    assert listed >= PAPER_PYTHON
    assert listed <= apt | set(pins), (
        f"in TOOLS.md but not installed: {sorted(listed - apt - set(pins))}"
    )
    for name in PAPER_PYTHON:
        row = re.search(rf"^\| `{re.escape(name)}` \| ([^ |]+) \|", tools, flags=re.MULTILINE)
        assert row and row.group(1) == pins[name], (
            f"TOOLS.md version of {name} differs from the pin"
        )
    assert "COPY TOOLS.md" in (IMAGES / "Dockerfile.runtime").read_text()


def test_the_controller_image_installs_the_project_with_its_pins() -> None:
    instructions = parse_dockerfile(IMAGES / "Dockerfile.controller")
    run = " ".join(i.args for i in instructions if i.keyword == "RUN")
    assert "-c constraints.txt" in run and "controller-requirements.txt" in run
    pins = pinned_requirements(IMAGES / "controller-requirements.txt")
    assert "kubernetes" in pins
    assert {"dataspace", "builder", "evaluator", "ray_jobs"} <= {
        s.rstrip("/") for s in copy_sources(instructions)
    }


def test_build_script_is_valid_bash_and_names_both_dockerfiles() -> None:
    script = IMAGES / "build.sh"
    bash = shutil.which("bash")
    assert bash is not None
    check = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr
    text = script.read_text()
    assert "Dockerfile.runtime" in text and "Dockerfile.controller" in text
