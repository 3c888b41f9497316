"""The container images: Dockerfiles parse, reference files that exist, pin versions, and
the runtime is the official Data Workbench Runtime, built on the docker backend's image and
so on the one Debian 12 root that the local set-up makes from the same lists."""

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


# the runtime's context is the harness folder build.sh assembles (``harnesses/``)
@pytest.mark.parametrize(
    ("dockerfile", "context"),
    [("Dockerfile.runtime", None), ("Dockerfile.controller", REPO)],
)
def test_dockerfiles_parse_pin_their_base_and_copy_files_that_exist(
    dockerfile: str, context: Path | None
) -> None:
    path = IMAGES / dockerfile
    instructions = parse_dockerfile(path)
    assert {i.keyword for i in instructions} <= INSTRUCTIONS
    assert instructions[0].keyword in ("ARG", "FROM")
    args = stage_args(instructions)
    for base in [i.args.split(" AS ")[0].strip() for i in instructions if i.keyword == "FROM"]:
        variable = re.fullmatch(r"\$\{(\w+)\}", base)
        image = args.get(variable.group(1)) if variable else base
        if image == dev_sh_docker_image():
            continue  # built here from the Debian root (test_every_image_is_on_the_one_root)
        assert image and re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*", image), image
        assert "latest" not in image
    if dockerfile == "Dockerfile.controller":
        assert re.fullmatch(r"\d{8}T\d{6}Z", args["DEBIAN_SNAPSHOT"])
    if context is None:
        assert copy_sources(instructions) == ["harnesses"]
        script = (IMAGES / "build.sh").read_text()
        assert 'mkdir "$context/harnesses"' in script
        assert '-f "$here/Dockerfile.runtime" -t "$runtime" "$context"' in script
    else:
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


def dev_sh_docker_image() -> str:
    """The docker backend's image that ``scripts/dev.sh`` builds (its default name)."""
    dev = (REPO / "scripts" / "dev.sh").read_text()
    found = re.search(r'local image="\$\{DATASPACE_DOCKER_IMAGE:-([^}]+)\}"', dev)
    assert found, "scripts/dev.sh names no docker image"
    return found.group(1)


def test_every_image_is_built_on_the_one_debian_root() -> None:
    """Guards the cluster's image drifting from the other backends' files: dev.sh makes the
    Debian 12 root with debootstrap from the workbench list, imports it as the base of the
    docker backend's image (Dockerfile.workbench), and the cluster's runtime image
    (Dockerfile.runtime, built by build.sh) is that image plus the harnesses."""
    dev = (REPO / "scripts" / "dev.sh").read_text()
    image = dev_sh_docker_image()
    # the root: debootstrap of the workbench's Debian packages (and Debian's python3.11)
    assert re.search(r"sed -e 's/#\.\*//' images/workbench-packages.txt; echo python3\.11", dev)
    assert 'debootstrap --variant=minbase --include="$(debian_root_packages' in dev
    # imported as the base image, the docker backend's image built on it
    assert 'base="dataspace/debian:bookworm-$(cat "$root/root/.stamp")"' in dev
    assert 'tar -C "$root/root" --numeric-owner -c . | docker import - "$base"' in dev
    build = re.search(r"docker build [^\n]*\\\n[^\n]*", dev)
    assert build, "dev.sh builds no image"
    assert '--build-arg BASE_IMAGE="$base"' in build.group(0)
    assert '-t "$image" -f "$context/Dockerfile.workbench"' in build.group(0)
    workbench = parse_dockerfile(IMAGES / "Dockerfile.workbench")
    assert [i.args for i in workbench if i.keyword == "FROM"] == ["${BASE_IMAGE}"]
    assert stage_args(workbench)["BASE_IMAGE"].startswith("dataspace/debian:bookworm")
    # the cluster's image: the docker backend's image, as build.sh builds it
    runtime = parse_dockerfile(IMAGES / "Dockerfile.runtime")
    froms = [i.args for i in runtime if i.keyword == "FROM"]
    assert froms[-1] == "${BASE_IMAGE}" and stage_args(runtime)["BASE_IMAGE"] == image
    assert not any("apt-get" in i.args for i in runtime), "Debian packages are the root's"
    script = (IMAGES / "build.sh").read_text()
    assert f'workbench="${{DATASPACE_DOCKER_IMAGE:-{image}}}"' in script
    assert '--build-arg "BASE_IMAGE=$workbench" -f "$here/Dockerfile.runtime"' in script


def test_the_runtime_installs_the_official_tools_from_the_one_list() -> None:
    packages = listed_packages(IMAGES / "workbench-packages.txt")
    assert packages == PAPER_APT | OFFICIAL_APT_EXTRA
    dev = (REPO / "scripts" / "dev.sh").read_text()
    assert "images/workbench-packages.txt" in dev  # the root every image is built on
    assert "images/runtime-requirements.txt" in dev
    assert "images/smolagents-requirements.txt" in dev


def test_the_runtime_python_has_the_official_pins_and_generic_tools_only() -> None:
    instructions = parse_dockerfile(IMAGES / "Dockerfile.runtime")
    pins = pinned_requirements(IMAGES / "runtime-requirements.txt")
    assert set(pins) >= PAPER_PYTHON
    assert {name: pins[name] for name in OFFICIAL_PINS} == OFFICIAL_PINS
    dev = (REPO / "scripts" / "dev.sh").read_text()
    assert re.search(r"--no-deps \\\n\s*-r images/runtime-requirements.txt", dev)
    solvers = {"langchain", "llama-index", "vanna", "sqlcoder", "transformers", "torch"}
    assert not solvers & set(pins), "the runtime offers generic tools only"
    # smolagents (and its model client) are the harness's, in a folder of their own: the
    # one dev.sh installs, which the runtime image copies and checks
    assert not {"smolagents", "openai"} & set(pins)
    assert re.search(r"--no-deps \\\n\s*--target \"\$hroot/\$build/site\"", dev)
    smol = next(i.args for i in instructions if "smolagents/site" in i.args and i.keyword == "RUN")
    assert "PYTHONPATH=$h/smolagents/site" in smol and "${SMOLAGENTS_VERSION}" in smol
    assert not any("pip" in i.args for i in instructions if i.keyword == "RUN")


def test_tools_md_and_capabilities_are_the_official_ones_and_baked_with_a_manifest() -> None:
    import hashlib

    for name, digest in OFFICIAL_SHA256.items():
        assert hashlib.sha256((IMAGES / name).read_bytes()).hexdigest() == digest, name
    dockerfile = (IMAGES / "Dockerfile.workbench").read_text()  # the runtime's base
    assert "COPY TOOLS.md capabilities.json" in dockerfile
    assert "runtime-manifest.json /opt/dataspace/" in dockerfile
    assert "DATASPACE_TOOLS_MANIFEST=/opt/dataspace/TOOLS.md" in dockerfile
    dev = (REPO / "scripts" / "dev.sh").read_text()
    assert "images/workbench_manifest.py" in dev  # written against the root's packages


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
