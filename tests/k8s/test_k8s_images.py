"""The container images: Dockerfiles parse, reference files that exist, pin versions, and
the runtime is the official Data Workbench Runtime built from the lists the local set-up
installs too (docker cannot run here)."""

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
        if i.keyword in ("COPY", "ADD") and "--from=" not in i.args:  # not from a stage
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
    args = stage_args(instructions)
    for base in [i.args.split(" AS ")[0].strip() for i in instructions if i.keyword == "FROM"]:
        variable = re.fullmatch(r"\$\{(\w+)\}", base)
        image = args.get(variable.group(1)) if variable else base
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


#: The official workbench image's Debian packages beyond the paper's list.
OFFICIAL_APT_EXTRA = {"bash", "bubblewrap", "coreutils", "file", "findutils", "socat"}
#: The official workbench image's Python pins (baseline/docker/Dockerfile.workbench).
OFFICIAL_PINS = {
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
#: sha256 of the official workbench's TOOLS.md and capabilities.json.
OFFICIAL_SHA256 = {
    "TOOLS.md": "71faab0935ae2f9740c2a797816bae4d31c94065349519f5b80a9f7a20141c17",
    "capabilities.json": "4a0c3bed49e0227533694f8dbf96007a02b23626cc590423bfbed5976297aba0",
}


def listed_packages(path: Path) -> set[str]:
    return {
        line.split("#", 1)[0].strip()
        for line in path.read_text().splitlines()
        if line.split("#", 1)[0].strip()
    }


def test_the_runtime_installs_the_official_tools_from_the_one_list() -> None:
    packages = listed_packages(IMAGES / "workbench-packages.txt")
    assert packages == PAPER_APT | OFFICIAL_APT_EXTRA
    dockerfile = (IMAGES / "Dockerfile.runtime").read_text()
    instructions = parse_dockerfile(IMAGES / "Dockerfile.runtime")
    install = next(i.args for i in instructions if "apt-get install" in i.args)
    assert "/opt/dataspace/workbench-packages.txt" in install and "xargs" in install
    assert "COPY workbench-packages.txt" in dockerfile
    dev = (REPO / "scripts" / "dev.sh").read_text()
    assert "images/workbench-packages.txt" in dev  # the local set-up installs the same list
    assert "images/runtime-requirements.txt" in dev
    assert "images/smolagents-requirements.txt" in dev


def test_the_runtime_python_has_the_official_pins_and_generic_tools_only() -> None:
    instructions = parse_dockerfile(IMAGES / "Dockerfile.runtime")
    pins = pinned_requirements(IMAGES / "runtime-requirements.txt")
    assert set(pins) >= PAPER_PYTHON
    assert {name: pins[name] for name in OFFICIAL_PINS} == OFFICIAL_PINS
    assert "--no-deps" in next(
        i.args for i in instructions if "runtime-requirements" in i.args and i.keyword == "RUN"
    )
    solvers = {"langchain", "llama-index", "vanna", "sqlcoder", "transformers", "torch"}
    assert not solvers & set(pins), "the runtime offers generic tools only"
    # smolagents (and its model client) are the harness's, in a folder of their own
    assert not {"smolagents", "openai"} & set(pins)
    smol = next(
        i.args for i in instructions if "smolagents-requirements" in i.args and i.keyword == "RUN"
    )
    assert "--no-deps" in smol and "--target /opt/dataspace/harnesses/smolagents/site" in smol


def test_tools_md_and_capabilities_are_the_official_ones_and_baked_with_a_manifest() -> None:
    import hashlib

    for name, digest in OFFICIAL_SHA256.items():
        assert hashlib.sha256((IMAGES / name).read_bytes()).hexdigest() == digest, name
    dockerfile = (IMAGES / "Dockerfile.runtime").read_text()
    assert "COPY TOOLS.md capabilities.json workbench_manifest.py /opt/dataspace/" in dockerfile
    assert "workbench_manifest.py /opt/dataspace" in dockerfile.split("COPY TOOLS.md")[1]
    assert "DATASPACE_TOOLS_MANIFEST=/opt/dataspace/TOOLS.md" in dockerfile


def test_the_manifest_script_writes_versions_and_the_tools_hash(tmp_path: Path) -> None:
    import json
    import sys

    for name in ("TOOLS.md", "capabilities.json"):
        (tmp_path / name).write_bytes((IMAGES / name).read_bytes())
    listing = tmp_path / "packages.txt"
    listing.write_text("# one package this host has\ncoreutils\n")
    done = subprocess.run(
        [sys.executable, str(IMAGES / "workbench_manifest.py"), str(tmp_path), str(listing)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "runtime-manifest.json").read_text())
    assert manifest["runtime_version"] == "1.0"
    assert manifest["tools_sha256"] == OFFICIAL_SHA256["TOOLS.md"]
    assert manifest["system_packages"]["coreutils"]
    assert "pytest" in manifest["python_packages"]
    assert (tmp_path / "python-packages.txt").read_text().count("==") == len(
        manifest["python_packages"]
    )
    listing.write_text("no-such-package-here\n")
    missing = subprocess.run(
        [sys.executable, str(IMAGES / "workbench_manifest.py"), str(tmp_path), str(listing)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert missing.returncode == 1 and "no-such-package-here" in missing.stderr


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
