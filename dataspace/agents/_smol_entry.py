"""Runs inside the sandbox: smolagents' CodeAgent against the relay, over the file bridge.

This file is executed as a script by the sandbox's Python (``python3 -c <source> CONFIG``);
it imports only the standard library, smolagents and the openai package, never
``dataspace`` (which is not installed inside). smolagents is not in that Python: the first
existing folder of the config's ``site_paths`` goes first on this process's ``sys.path``
(and not into ``PYTHONPATH``, so code actions' child processes see the workbench alone).
The config (JSON) gives the model id, the relay's base URL, the bridge folder, the step
budget, the per-action timeout and where to write the trace; the relay token comes from
``DATASPACE_RELAY_TOKEN``.

The trace (JSON) holds the final state (``success``, ``max_steps_error``,
``runtime_error``, ``terminated``), the token usage smolagents counted, and one entry per
step with its code action and observations (truncated).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

AUTHORIZED_IMPORTS = [
    "csv",
    "cv2",
    "fitz",
    "glob",
    "json",
    "numpy",
    "openpyxl",
    "os",
    "pandas",
    "pathlib",
    "PIL",
    "pyarrow",
    "pypdf",
    "shutil",
    "sqlite3",
    "subprocess",
    "tempfile",
    "xml",
    "zipfile",
]
KEPT = (
    "step_number",
    "timing",
    "tool_calls",
    "error",
    "model_output",
    "code_action",
    "observations",
    "action_output",
    "token_usage",
    "is_final_answer",
    "plan",
)


class Terminated(SystemExit):
    """SIGTERM from the controller (wall clock)."""


def _terminate(_signum: int, _frame: Any) -> None:
    raise Terminated(143)


def _httpx() -> Any:
    try:
        import httpx2 as httpx
    except ImportError:  # openai releases built on httpx
        import httpx  # type: ignore[no-redef]
    return httpx


def bridge_transport(directory: str, timeout: float) -> Any:
    """An httpx transport that exchanges requests through files in ``directory``."""
    httpx = _httpx()
    folder = Path(directory)

    class FileBridgeTransport(httpx.BaseTransport):  # type: ignore[name-defined]
        def handle_request(self, request: Any) -> Any:
            rid = uuid.uuid4().hex
            envelope = {
                "method": request.method,
                "path": request.url.raw_path.decode("ascii", "replace"),
                "headers": dict(request.headers.items()),
                "body": request.read().decode("utf-8", "replace"),
            }
            tmp = folder / f"req-{rid}.tmp"
            tmp.write_text(json.dumps(envelope), encoding="utf-8")
            os.rename(tmp, folder / f"req-{rid}.json")
            done = folder / f"resp-{rid}.done"
            deadline = time.monotonic() + timeout
            pause = 0.002
            while not done.exists():
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("relay bridge timed out", request=request)
                time.sleep(pause)
                pause = min(0.02, pause * 1.5)
            resp_path = folder / f"resp-{rid}.json"
            answer = json.loads(resp_path.read_text(encoding="utf-8"))
            for p in (resp_path, done, folder / f"req-{rid}.claimed"):
                with contextlib.suppress(OSError):
                    p.unlink()
            headers = {
                k: v for k, v in answer.get("headers", {}).items() if k.lower() != "content-length"
            }
            return httpx.Response(
                int(answer["status"]),
                headers=headers,
                content=answer.get("body", "").encode("utf-8"),
                request=request,
            )

    return FileBridgeTransport()


def _steps(steps: list[Any]) -> list[dict[str, Any]]:
    out = []
    for step in steps:
        d = step if isinstance(step, dict) else getattr(step, "dict", lambda: {})()
        if not isinstance(d, dict):
            continue
        kept: dict[str, Any] = {k: d.get(k) for k in KEPT if k in d}
        for k in ("model_output", "observations", "code_action", "action_output"):
            v = kept.get(k)
            if isinstance(v, str) and len(v) > 20_000:
                kept[k] = v[:20_000] + "... [truncated]"
        out.append(kept)
    return out


def _write(path: str, payload: dict[str, Any]) -> None:
    p = Path(path)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, ensure_ascii=False, default=str), encoding="utf-8")
    os.replace(tmp, p)


def main(argv: list[str]) -> int:
    """Run one task; always writes the trace."""
    cfg = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    for site in cfg.get("site_paths") or []:
        if os.path.isdir(site):
            sys.path.insert(0, site)
            break
    signal.signal(signal.SIGTERM, _terminate)
    Path(cfg["pid_file"]).write_text(str(os.getpid()), encoding="utf-8")
    trace: dict[str, Any] = {
        "harness": "smolagents",
        "model": cfg["model"],
        "state": "runtime_error",
    }
    agent = None
    started = time.time()
    try:
        import smolagents
        from smolagents import CodeAgent, OpenAIModel
        from smolagents.monitoring import LogLevel

        trace["smolagents_version"] = smolagents.__version__
        httpx = _httpx()
        client = httpx.Client(
            transport=bridge_transport(cfg["bridge_dir"], cfg["request_timeout"]),
            timeout=cfg["request_timeout"],
        )
        model = OpenAIModel(
            model_id=cfg["model"],
            api_base=cfg["base_url"],
            api_key=os.environ.get("DATASPACE_RELAY_TOKEN", ""),
            client_kwargs={"http_client": client, "max_retries": 0},
            max_tokens=cfg["max_tokens"],
        )
        # the paper's runtime image has every module of the list; elsewhere the missing ones
        # are dropped (smolagents refuses to start otherwise) and recorded in the trace
        import importlib.util

        present = [m for m in AUTHORIZED_IMPORTS if importlib.util.find_spec(m) is not None]
        trace["missing_authorized_imports"] = sorted(set(AUTHORIZED_IMPORTS) - set(present))
        agent = CodeAgent(
            tools=[],
            model=model,
            additional_authorized_imports=present,
            max_steps=cfg["max_steps"],
            verbosity_level=LogLevel.OFF,
            executor_kwargs={"timeout_seconds": cfg["command_timeout"]},
            return_full_result=True,
        )
        prompt = Path(cfg["prompt_file"]).read_text(encoding="utf-8")
        result = agent.run(prompt, return_full_result=True)
        usage = result.token_usage.dict() if result.token_usage is not None else {}
        trace.update(
            {
                "state": result.state,
                "output": str(result.output)[:2000],
                "usage": usage,
                "steps": _steps(result.steps),
            }
        )
        return 0
    except BaseException as exc:
        terminated = isinstance(exc, Terminated | KeyboardInterrupt)
        trace.update(
            {
                "state": "terminated" if terminated else "runtime_error",
                "error": f"{type(exc).__name__}: {exc}"[:2000],
            }
        )
        if agent is not None:
            memory = getattr(agent, "memory", None)
            steps = memory.get_succinct_steps() if memory is not None else []
            trace["steps"] = _steps(steps)
        if not terminated:
            traceback.print_exc(file=sys.stderr)
        return 143 if terminated else 1
    finally:
        trace["duration_seconds"] = time.time() - started
        _write(cfg["trace"], trace)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
