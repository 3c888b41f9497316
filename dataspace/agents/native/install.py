"""Where the native harness CLIs live, their pinned versions, and how they are installed.

Each native CLI is installed once per host under ``/opt/dataspace/harnesses/<name>/``
(``DATASPACE_HARNESS_ROOT`` overrides the root) with ``bin/<executable>`` and a
``VERSION`` file, and is bound read-only into the sandboxes of its attempts; nothing is
downloaded at attempt time (inside, the attempt's harness is at ``/opt/harness/<name>``).
The pins are those of the paper (Table 9) and the official
baseline's ``configs/harness.yaml``:

- Codex 0.145.0: the npm package ``@openai/codex@0.145.0-linux-x64`` (a static musl
  binary, no Node runtime needed);
- Claude Code 2.1.217: the npm package ``@anthropic-ai/claude-code-linux-x64@2.1.217``
  (a self-contained binary, no Node runtime needed);
- Grok Build 0.2.106: x.ai's own installer, not on a package registry; installed from a
  binary or installer the user provides (``python -m dataspace.agents.native.install
  grok-build --from PATH``).

Both npm packages are fetched with the ordinary npm client (``npm pack``), the way the
official ``install_harness_runtimes.sh`` takes the same platform tarballs.

``harness_status()`` reports each harness's pinned and installed version and whether it is
ready, for ``dataspace doctor`` and ``dataspace harnesses``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dataspace.errors import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_ROOT = "/opt/dataspace/harnesses"
SANDBOX_ROOT = "/opt/harness"
"""Where the attempt's harness folder is bound (read-only) inside its sandbox: a path of
its own, so the bind never lands inside another read-only mount (the runtime root at
``/opt/dataspace``) and works whatever ``DATASPACE_HARNESS_ROOT`` is."""


@dataclass(frozen=True, kw_only=True)
class HarnessPin:
    """One native harness: its pinned version and where it comes from."""

    name: str
    version: str
    executable: str
    npm_package: str | None
    version_output: str
    """What ``<executable> --version`` prints for the pinned version (a substring)."""
    package_subdir: str = ""
    """The folder of the npm tarball whose contents form the install (``bin/`` inside)."""


PINS: dict[str, HarnessPin] = {
    "codex": HarnessPin(
        name="codex",
        version="0.145.0",
        executable="codex",
        npm_package="@openai/codex@0.145.0-linux-x64",
        version_output="codex-cli 0.145.0",
        package_subdir="package/vendor/x86_64-unknown-linux-musl",
    ),
    "claude-code": HarnessPin(
        name="claude-code",
        version="2.1.217",
        executable="claude",
        npm_package="@anthropic-ai/claude-code-linux-x64@2.1.217",
        version_output="2.1.217 (Claude Code)",
        package_subdir="package",
    ),
    "grok-build": HarnessPin(
        name="grok-build",
        version="0.2.106",
        executable="grok",
        npm_package=None,
        version_output="grok 0.2.106 ",
    ),
}


@dataclass(frozen=True, kw_only=True)
class HarnessState:
    """The installed state of one native harness on this host."""

    name: str
    pinned: str
    installed: str | None
    ready: bool
    path: str
    problem: str | None = None
    fix: str | None = None


def harness_root() -> Path:
    """The host folder that holds the native harnesses."""
    return Path(os.environ.get("DATASPACE_HARNESS_ROOT") or DEFAULT_ROOT)


def harness_dir(name: str) -> Path:
    """The host folder of one native harness."""
    return harness_root() / name


def executable_path(name: str) -> Path:
    """The host path of a harness's executable."""
    pin = _pin(name)
    return harness_dir(name) / "bin" / pin.executable


def sandbox_executable(name: str) -> str:
    """The path of a harness's executable inside its sandbox."""
    return f"{SANDBOX_ROOT}/{name}/bin/{_pin(name).executable}"


def _pin(name: str) -> HarnessPin:
    try:
        return PINS[name]
    except KeyError:
        raise ConfigError(
            f"unknown native harness {name!r}; known: {', '.join(sorted(PINS))}"
        ) from None


def _fix(name: str) -> str:
    if name == "grok-build":
        return (
            "Grok Build is not on a package registry: install it with x.ai's installer, "
            "then run `python -m dataspace.agents.native.install grok-build --from "
            "PATH/TO/grok` (a binary or the installer script)"
        )
    return f"run `scripts/dev.sh shell true` or `python -m dataspace.agents.native.install {name}`"


def probe_version(path: Path, timeout: float = 30.0) -> str | None:
    """What ``path --version`` prints (first line), or None when it cannot run."""
    try:
        res = subprocess.run(
            [str(path), "--version"],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir(), "NO_COLOR": "1"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (res.stdout or res.stderr).strip().splitlines()
    return out[0].strip() if res.returncode == 0 and out else None


def harness_state(name: str) -> HarnessState:
    """The pinned and installed version of one native harness and whether it is ready."""
    pin = _pin(name)
    exe = executable_path(name)
    recorded = harness_dir(name) / "VERSION"
    if not exe.is_file():
        return HarnessState(
            name=name,
            pinned=pin.version,
            installed=None,
            ready=False,
            path=str(exe),
            problem=f"{exe} is missing",
            fix=_fix(name),
        )
    seen = probe_version(exe)
    installed = recorded.read_text().strip() if recorded.is_file() else None
    if seen is None or pin.version_output not in seen + " ":
        return HarnessState(
            name=name,
            pinned=pin.version,
            installed=installed,
            ready=False,
            path=str(exe),
            problem=f"{exe} --version printed {seen!r}, not {pin.version_output.strip()!r}",
            fix=_fix(name),
        )
    return HarnessState(
        name=name, pinned=pin.version, installed=pin.version, ready=True, path=str(exe)
    )


def harness_status() -> list[HarnessState]:
    """The state of every native harness (for ``dataspace doctor`` / ``dataspace harnesses``)."""
    return [harness_state(name) for name in sorted(PINS)]


def install_npm(name: str) -> HarnessState:
    """Install a registry-served harness at its pinned version (no-op when it is ready)."""
    pin = _pin(name)
    if pin.npm_package is None:
        raise ConfigError(f"{name}: not on a package registry; {_fix(name)}")
    state = harness_state(name)
    if state.ready:
        return state
    npm = shutil.which("npm")
    if npm is None:
        raise ConfigError(f"{name}: npm is needed to install it (apt-get install npm)")
    with tempfile.TemporaryDirectory(prefix=f"ds-install-{name}-") as tmp:
        res = subprocess.run(
            [npm, "pack", pin.npm_package, "--silent", "--pack-destination", tmp],
            capture_output=True,
            text=True,
            check=False,
        )
        tgz = sorted(Path(tmp).glob("*.tgz"))
        if res.returncode != 0 or not tgz:
            raise ConfigError(
                f"{name}: `npm pack {pin.npm_package}` failed: "
                f"{(res.stderr or res.stdout).strip()[-300:]}; the pinned version may not "
                "be served by the registry"
            )
        unpack = Path(tmp) / "unpack"
        _extract(tgz[0], unpack)
        source = unpack / pin.package_subdir
        target = harness_dir(name)
        staging = target.with_name(f".{name}.new")
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, staging, symlinks=True)
        bin_dir = staging / "bin"
        if not (bin_dir / pin.executable).exists():  # Claude Code ships the binary at the top
            bin_dir.mkdir(exist_ok=True)
            shutil.move(str(staging / pin.executable), bin_dir / pin.executable)
        (bin_dir / pin.executable).chmod(0o755)
        (staging / "VERSION").write_text(pin.version + "\n")
        _chmod_readable(staging)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    state = harness_state(name)
    if not state.ready:
        raise ConfigError(f"{name}: installed, but not usable: {state.problem}")
    return state


def _extract(archive: Path, dest: Path) -> None:
    """Unpack an npm tarball: regular files, folders and links that stay inside ``dest``.

    Python's ``data`` filter where it exists (3.11.4+); else the same rules by hand.
    """
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
            return
        root = dest.resolve()
        for member in tar.getmembers():
            target = (root / member.name).resolve()
            link = (target.parent / member.linkname).resolve() if member.issym() else target
            if not (member.isfile() or member.isdir() or member.issym()) or not all(
                p == root or root in p.parents for p in (target, link)
            ):
                raise ConfigError(f"{archive.name}: refusing archive member {member.name!r}")
        tar.extractall(dest)


def install_grok(source: Path) -> HarnessState:
    """Install Grok Build from a binary, or run x.ai's installer script at ``source``."""
    pin = _pin("grok-build")
    target = harness_dir("grok-build")
    (target / "bin").mkdir(parents=True, exist_ok=True)
    if not source.is_file():
        raise ConfigError(f"grok-build --from {source}: no such file")
    if source.read_bytes()[:2] == b"#!":
        with tempfile.TemporaryDirectory(prefix="ds-grok-") as home:
            subprocess.run(
                ["bash", str(source), pin.version],
                env={
                    "HOME": home,
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "GROK_BIN_DIR": str(target / "bin"),
                    "GROK_DISABLE_AUTO_UPDATE": "1",
                    "SHELL": "/bin/false",
                },
                check=True,
            )
    else:
        shutil.copy2(source, target / "bin" / pin.executable)
    (target / "bin" / pin.executable).chmod(0o755)
    (target / "VERSION").write_text(pin.version + "\n")
    _chmod_readable(target)
    return harness_state("grok-build")


def _chmod_readable(root: Path) -> None:
    """Make the install readable (and its programs runnable) by the sandbox's user."""
    for dirpath, _dirs, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            p = Path(dirpath) / f
            if not p.is_symlink():
                p.chmod(0o755 if os.access(p, os.X_OK) else 0o644)


def install_harness(name: str, *, source: Path | None = None) -> HarnessState:
    """Install one native harness: from the package registry, or Grok Build from ``source``.

    Raises:
        ConfigError: an unknown name, Grok Build without ``source``, or an install that
            failed (the message says how to fix it).
        subprocess.CalledProcessError: x.ai's installer script failed.
    """
    if name == "grok-build":
        if source is None:
            raise ConfigError(_fix(name))
        return install_grok(source)
    return install_npm(name)


@dataclass(frozen=True, kw_only=True)
class InstallOutcome:
    """One harness of :func:`install_harnesses`: its state, or why it could not be had."""

    name: str
    state: HarnessState | None = None
    error: str | None = None


def install_harnesses(
    names: Sequence[str] = (), *, check: bool = False, source: Path | None = None
) -> Iterator[InstallOutcome]:
    """Install (or with ``check`` only inspect) each harness, yielding each as it is done.

    Args:
        names: the harnesses; empty: every one a package registry serves.
        check: report the states, install nothing.
        source: Grok Build's binary or installer script.
    """
    for name in names or [n for n, p in PINS.items() if p.npm_package]:
        try:
            state = harness_state(name) if check else install_harness(name, source=source)
        except (ConfigError, subprocess.CalledProcessError) as exc:
            yield InstallOutcome(name=name, error=str(exc))
        else:
            yield InstallOutcome(name=name, state=state)


if __name__ == "__main__":  # the command line lives with the others, in dataspace.cli
    from dataspace.cli.install import main

    sys.exit(main())
