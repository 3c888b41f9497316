"""Record the official DataSpace-Agent's request bodies for the protocol conformance test.

Runs the official baseline's own agent loop (``dataspace_agent.agent.DataSpaceAgent`` with
its ``OpenAICompatibleBackend`` and ``DockerSandbox``) over the scripted trajectories in
``tests/fixtures/protocol/official/cases/*/`` against the project's scripted model server,
and writes every request body the server received, byte for byte, next to each case.

The official code is not part of this project: pass the folder of an official ``baseline/``
checkout (copied outside the project and installed in a scratch virtualenv, see the
fixture folder's README) and run this script with that virtualenv's Python. The Docker
sandbox is kept as it is; only the ``docker`` executable it calls is replaced by a shim
(written into a temporary folder and put first on ``PATH``) that runs each
``docker exec ... timeout --signal=KILL Ns bash -lc CMD`` as a local process in the
workspace folder, with the container's environment. Everything the official code does
around that call (decoding with universal newlines, exit codes, ``timed_out``, truncation,
images, answer checks) runs unchanged.

Usage::

    /tmp/official/venv/bin/python scripts/record_official_fixtures.py \
        --baseline /tmp/official/baseline
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "protocol" / "official"
KEY_ENV = "DATASPACE_FIXTURE_KEY"
MODEL_ID = "scripted-model"

# The docker shim. ``run`` remembers the bind mounts, ``exec`` runs the command locally in
# the workspace folder (the official container's working directory) and exits with its
# status as ``docker exec`` does (128 + N for a signal), ``rm`` forgets.
_DOCKER_SHIM = r"""#!/usr/bin/env python3
import json, os, sys
state = os.environ["DOCKER_SHIM_STATE"]
args = sys.argv[1:]
if args[:1] == ["run"]:
    name, mounts, i = None, {}, 1
    while i < len(args):
        a = args[i]
        if a == "--name":
            name = args[i + 1]; i += 2; continue
        if a == "--mount":
            parts = dict(p.split("=", 1) for p in args[i + 1].split(",") if "=" in p)
            mounts[parts["dst"]] = parts["src"]; i += 2; continue
        i += 1
    with open(os.path.join(state, name + ".json"), "w") as fh:
        json.dump(mounts, fh)
    print(name)
    sys.exit(0)
if args[:1] == ["exec"]:
    workdir, i = "/workspace", 1
    while args[i].startswith("--"):
        if args[i] == "--workdir":
            workdir = args[i + 1]; i += 2
        else:
            i += 1
    name, command = args[i], args[i + 1:]
    with open(os.path.join(state, name + ".json")) as fh:
        mounts = json.load(fh)
    home = os.path.join(state, "home")
    os.makedirs(home, exist_ok=True)
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": home,
        "PYTHONUNBUFFERED": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "LANG": "C.UTF-8",
    }
    import subprocess
    # in a session of its own, as in a container; a signal death is 128 + N, as docker says
    rc = subprocess.call(command, cwd=mounts.get(workdir, workdir), env=env,
                         start_new_session=True)
    sys.exit(rc if rc >= 0 else 128 - rc)
if args[:1] == ["rm"]:
    for a in args[1:]:
        p = os.path.join(state, a + ".json")
        if os.path.exists(p):
            os.remove(p)
    sys.exit(0)
if args[:2] == ["image", "inspect"]:
    print("[]")
    sys.exit(1)
print("docker shim: unsupported command " + " ".join(args), file=sys.stderr)
sys.exit(2)
"""


def _install_shim(tmp: Path) -> None:
    bindir = tmp / "bin"
    state = tmp / "docker-state"
    bindir.mkdir()
    state.mkdir()
    shim = bindir / "docker"
    shim.write_text(_DOCKER_SHIM)
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.environ["PATH"] = f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ["DOCKER_SHIM_STATE"] = str(state)


def _record_case(case: Path, tmp: Path, official: dict[str, Any]) -> dict[str, Any]:
    from dataspace.testing.scripted_server import ScriptedServer

    task = json.loads((case / "task.json").read_text(encoding="utf-8"))
    scripts = json.loads((case / "script.json").read_text(encoding="utf-8"))
    # the official task layout: task.json and a context/ folder; the run folder beside it
    # holds output/, so ``../output`` from the workspace is the output folder in both
    task_dir = tmp / case.name
    shutil.copytree(FIXTURES / "workspace", task_dir / "context")
    (task_dir / "task.json").write_text(json.dumps(task, ensure_ascii=False), encoding="utf-8")
    with ScriptedServer(scripts) as server:
        os.environ[KEY_ENV] = "sk-fixture-not-a-real-key"
        model = official["ModelConfig"](
            key="scripted",
            model=MODEL_ID,
            api_key_env=KEY_ENV,
            base_url=server.url,
            max_output_tokens=32768,
        )
        agent_config = official["AgentConfig"]()  # configs/vercel.yaml's values
        sandbox_config = official["SandboxConfig"]()

        def sandbox_factory(workspace: Path, output: Path) -> Any:
            return official["DockerSandbox"](
                workspace_root=workspace,
                output_root=output,
                config=sandbox_config,
                max_output_chars=agent_config.max_tool_output_chars,
            )

        agent = official["DataSpaceAgent"](
            backend=official["OpenAICompatibleBackend"](model),
            agent_config=agent_config,
            sandbox_factory=sandbox_factory,
        )
        result = agent.run(official["TaskSpec"].load(task_dir), task_dir)
        requests = list(server.requests)
    out = case / "requests"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    for i, req in enumerate(requests):
        (out / f"{i:03d}.json").write_bytes(req.raw)
    # what the official runner copies and scores: the file, or a symbolic link's target
    prediction = task_dir / "output" / "prediction.csv"
    data = prediction.read_bytes() if prediction.is_file() else None
    summary = {
        "status": result.status,
        "model_turns": result.model_turns,
        "tool_actions": result.tool_actions,
        "requests": len(requests),
        "error_type": result.error.split(":", 1)[0] if result.error else None,
        # the text when it is small enough to read in a fixture, else only its size and digest
        "prediction_csv": data.decode("utf-8") if data is not None and len(data) <= 2**16 else None,
        "prediction_bytes": len(data) if data is not None else None,
        "prediction_sha256": hashlib.sha256(data).hexdigest() if data is not None else None,
    }
    (case / "result.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, type=Path, help="an official baseline/")
    parser.add_argument("--commit", default="", help="the official repository's commit")
    args = parser.parse_args(argv)
    src = args.baseline.resolve() / "src"
    if not (src / "dataspace_agent" / "agent.py").is_file():
        print(f"error: {src}/dataspace_agent/agent.py not found (pass the baseline/ folder)")
        return 2
    sys.path.insert(0, str(src))
    sys.path.insert(1, str(ROOT))  # only the scripted server (stdlib) is imported from here
    from dataspace_agent.agent import DataSpaceAgent
    from dataspace_agent.backend import OpenAICompatibleBackend
    from dataspace_agent.config import AgentConfig, ModelConfig, SandboxConfig
    from dataspace_agent.sandbox import DockerSandbox
    from dataspace_agent.task import TaskSpec

    official = {
        "DataSpaceAgent": DataSpaceAgent,
        "OpenAICompatibleBackend": OpenAICompatibleBackend,
        "AgentConfig": AgentConfig,
        "ModelConfig": ModelConfig,
        "SandboxConfig": SandboxConfig,
        "DockerSandbox": DockerSandbox,
        "TaskSpec": TaskSpec,
    }
    import openai
    import PIL

    with tempfile.TemporaryDirectory(prefix="ds-official-record-") as tmp_name:
        tmp = Path(tmp_name)
        _install_shim(tmp)
        for case in sorted(p for p in (FIXTURES / "cases").iterdir() if p.is_dir()):
            summary = _record_case(case, tmp, official)
            print(f"{case.name}: {summary['requests']} requests, status {summary['status']}")
    recording = {
        "official_commit": args.commit,
        "python": sys.version.split()[0],
        "openai": openai.__version__,
        "pillow": PIL.__version__,
    }
    (FIXTURES / "recording.json").write_text(json.dumps(recording, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
