"""``python -m dataspace.testing.scripted_server SCRIPTS.json [--port N]``.

Serves a scripted OpenAI-compatible model on loopback until interrupted, for trying a run
spec by hand. The only command line that reaches ``dataspace.testing``: the ``dataspace``
command never imports it.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Serve scripts from a JSON file until interrupted (for trying a run spec by hand).

    ``python -m dataspace.testing.scripted_server SCRIPTS.json [--port N]`` prints the base
    URL to use as the model's ``base_url``; the file maps script names to steps.
    """
    from dataspace.errors import ConfigError
    from dataspace.testing.scripted_server import ScriptedServer, load_scripts

    parser = argparse.ArgumentParser(prog="python -m dataspace.testing.scripted_server")
    parser.add_argument("scripts", help="JSON file: script name -> list of steps")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any)")
    args = parser.parse_args(argv)
    try:
        scripts = load_scripts(args.scripts)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    server = ScriptedServer(scripts)
    server.port_request = args.port
    server.start()
    print(f"scripted model server at {server.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        print(f"served {len(server.requests)} requests", flush=True)
    return 0


__all__ = ["main"]
