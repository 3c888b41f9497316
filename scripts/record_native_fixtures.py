"""Record the official baseline's native-harness configuration as test fixtures.

Runs the official ``build_codex``/``build_claude_code``/``build_grok_build`` invocation
factories (HKUSTDial/DataSpace ``baseline/``, read from a checkout or the bare mirror) for
one fixed task and model, and writes what they generate (config files, the inner command,
the environment's model variables) to ``tests/fixtures/agents/native/official.json``.

    python scripts/record_native_fixtures.py [--repo /work/.mirror/HKUSTDial+DataSpace/repo]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
OUT = HERE / "tests" / "fixtures" / "agents" / "native" / "official.json"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default="/work/.mirror/HKUSTDial+DataSpace/repo")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ds-official-") as tmp:
        t = Path(tmp)
        subprocess.run(
            f"git -C {args.repo} archive HEAD baseline | tar -x -C {t}", shell=True, check=True
        )
        fakebin = t / "fakebin"
        fakebin.mkdir()
        (fakebin / "bwrap").write_text("#!/bin/sh\n")
        (fakebin / "bwrap").chmod(0o755)
        rootfs = t / "rootfs"
        for rel in ("usr/bin/bwrap", "usr/bin/socat", "opt/dataspace/TOOLS.md"):
            (rootfs / rel).parent.mkdir(parents=True, exist_ok=True)
            (rootfs / rel).write_text("")
            (rootfs / rel).chmod(0o755)
        ctx = t / "context"
        ctx.mkdir()
        sys.path.insert(0, str(t / "baseline" / "src"))
        os.environ["PATH"] = f"{fakebin}:{os.environ['PATH']}"
        os.environ["AI_GATEWAY_API_KEY"] = "sk-official-fixture"
        from dataspace_baselines.config import (
            DataWorkbenchConfig,
            ExperimentModelConfig,
            HarnessConfig,
            HarnessExperimentConfig,
        )
        from dataspace_baselines.core.task import TaskSpec
        from dataspace_baselines.harnesses.claude_code import build_claude_code
        from dataspace_baselines.harnesses.codex import build_codex
        from dataspace_baselines.harnesses.grok_build import build_grok_build

        model = ExperimentModelConfig(
            key="mimo-v2.5", model="xiaomi/mimo-v2.5", api_key_env="AI_GATEWAY_API_KEY",
            openai_base_url="https://ai-gateway.vercel.sh/v1",
            anthropic_base_url="https://ai-gateway.vercel.sh",
            max_output_tokens=32768, context_window=262144,
        )
        cfg = HarnessExperimentConfig(
            model=model, wall_time_seconds=1800, concurrency=1,
            workbench=DataWorkbenchConfig(image="dataspace-workbench:1.0", rootfs_path=rootfs),
            harnesses={},
        )
        task = TaskSpec(task_id="task_7", question="Which cities?", task_dir=t, context_dir=ctx)
        record = {}
        for key, build, opts in (
            ("codex", build_codex, {"version": "0.145.0", "wire_api": "responses"}),
            ("claude-code", build_claude_code, {"version": "2.1.217"}),
            ("grok-build", build_grok_build, {"version": "0.2.106",
                                               "api_backend": "chat_completions",
                                               "normalize_finish_reasons": True}),
        ):
            runner = build(cfg, HarnessConfig(key=key, options=opts))
            run_root = t / "runs" / key
            out = run_root / "output"
            out.mkdir(parents=True)
            inv = runner.invocation_factory(task, run_root, out)
            home = run_root / "runtime" / "home"
            files = {
                str(p.relative_to(home)): p.read_text()
                for p in sorted(home.rglob("*")) if p.is_file()
            }
            cmd = list(inv.command)
            inner = cmd[cmd.index("--") + 1 :] if "--" in cmd else cmd
            env = {k: v for k, v in inv.environment.items() if k != "AI_GATEWAY_API_KEY"}
            record[key] = {
                "files": files,
                "inner_command": inner,
                "environment": {k: ("<key>" if v == "sk-official-fixture" else v)
                                for k, v in env.items()},
                "metadata": json.loads(json.dumps(dict(inv.metadata), default=str)),
            }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, ensure_ascii=False, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
