"""``dataspace audit RUN --agent A``: propose, confirm and revise root causes of failures.

::

    dataspace audit RUN --agent A --release REL [--models FILE --model NAME] [--all-attempts]
    dataspace audit RUN --agent A --confirm task_3=M1 [--confirm task_7:2=G4] [--by NAME]
    dataspace audit RUN --agent A --serve [--port 8766]

Without ``--model`` the proposals are left blank for a researcher to fill in.
"""

from __future__ import annotations

import argparse
import os
import sys

from dataspace.cli.args import PORT


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dataspace audit", description=__doc__.splitlines()[0])
    p.add_argument("run", help="the run folder (path or store URI of runs/<run_id>)")
    p.add_argument("--agent", required=True)
    p.add_argument("--release", help="the release the run used (needed to propose)")
    p.add_argument("--models", help="models file naming the auditor model")
    p.add_argument("--model", help="the auditor model's name in the models file")
    p.add_argument("--all-attempts", action="store_true", help="not only each task's first")
    p.add_argument("--confirm", action="append", default=[], metavar="TASK[:N]=SUBTYPE")
    p.add_argument("--note", default="")
    p.add_argument("--by", default=os.environ.get("USER", "researcher"))
    p.add_argument("--serve", action="store_true", help="open the confirm/revise console")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=PORT, default=8766)
    return p


def main(argv: list[str]) -> int:
    """Run ``dataspace audit``."""
    args = _parser().parse_args(argv)
    if args.confirm:
        from dataspace.audit.confirm import confirm_decisions

        for d in confirm_decisions(args.run, args.agent, args.confirm, by=args.by, note=args.note):
            print(
                f"{d.task_id} #{d.attempt}: {d.subtype} ({'revised' if d.revised else 'confirmed'})"
            )
        return 0
    if args.serve:
        from dataspace.audit.confirm import open_console

        console = open_console(args.run, args.agent, host=args.host, port=args.port, by=args.by)
        print(f"audit console on {console.url} ; Ctrl-C stops")
        sys.stdout.flush()
        try:
            console.httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            console.httpd.server_close()
        return 0
    from dataspace.audit.propose import propose_causes

    out = propose_causes(
        args.run,
        agent=args.agent,
        release=args.release,
        models=args.models,
        model=args.model,
        all_attempts=args.all_attempts,
    )
    print(
        f"audit of {args.agent}: {out.proposed} proposed, {out.blank} left blank, "
        f"{out.kept} kept from before -> {out.path}"
    )
    if out.usage:
        print(
            f"auditor model: {out.usage.get('model_calls', 0)} calls, "
            f"{out.usage.get('input_tokens', 0)} input / {out.usage.get('output_tokens', 0)} "
            f"output tokens, ${out.usage.get('cost_usd', 0.0):.4f}"
        )
    if not args.model:
        print("no auditor model given: proposals are blank; confirm with --confirm or --serve")
    return 0


__all__ = ["main"]
