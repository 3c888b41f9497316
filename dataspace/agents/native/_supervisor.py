"""In-sandbox supervisor of one native CLI: loopback forwarder, wall deadline, clean stop.

Run inside the sandbox as ``python3 -I -S _supervisor.py CONFIG.json`` (standard library
only). It

1. listens on ``127.0.0.1:<port>`` of the sandbox's own network namespace and forwards
   each connection to the relay: its Unix socket bound into the sandbox (``socket``; the
   local backend, where the sandbox has no route to anywhere else), or its TCP port on
   the controller (``connect``: ``[host, port]``; the kubernetes backend, where the pod's
   NetworkPolicy allows that and nothing else);
2. starts the CLI in its own session and process group, stdout and stderr to files;
3. at the wall deadline (or on SIGTERM: the run was stopped) sends SIGTERM to the process
   group, then SIGKILL after the grace period; after the CLI exits, whatever is left in
   its group, or escaped it, is killed: with ``sweep: all`` (the local sandbox, where
   nothing else of this user runs) ``kill(-1)`` inside the sandbox's PID namespace; with
   ``sweep: new`` (a pod, whose own init and exec helper run as the same user) every
   process that did not exist when the supervisor started;
4. writes ``status`` as JSON: ``exit_code``, ``timed_out``, ``stopped``, ``signal`` sent,
   ``seconds``.

Config keys: ``socket`` or ``connect``, ``port``, ``sweep``, ``argv``, ``env``, ``cwd``,
``wall_seconds``, ``grace_seconds``, ``stdout``, ``stderr``, ``status``, ``pid_file``.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def forward(conn, target):
    try:
        if isinstance(target, str):
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(target)
        else:
            upstream = socket.create_connection(target, timeout=30)
            upstream.settimeout(None)
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        conn.close()
        return
    back = threading.Thread(target=pump, args=(upstream, conn), daemon=True)
    back.start()
    pump(conn, upstream)
    back.join()
    conn.close()
    upstream.close()


def serve(listener, target):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=forward, args=(conn, target), daemon=True).start()


def kill_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def pids():
    return {int(p) for p in os.listdir("/proc") if p.isdigit()}


def sweep_new(keep):
    """SIGKILL every process not in ``keep`` until none is left (forks race the sweep)."""
    for _ in range(50):
        found = pids() - keep
        if not found:
            return
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def main(config_path):
    with open(config_path, encoding="utf-8") as fh:
        cfg = json.load(fh)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(cfg["port"])))
    listener.listen(64)
    target = cfg["socket"] if "socket" in cfg else (cfg["connect"][0], int(cfg["connect"][1]))
    threading.Thread(target=serve, args=(listener, target), daemon=True).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open(cfg["pid_file"], "w") as fh:
        fh.write(str(os.getpid()))
    keep = pids() | {os.getpid()}
    started = time.monotonic()
    deadline = started + float(cfg["wall_seconds"])
    grace = float(cfg.get("grace_seconds", 5.0))
    with open(cfg["stdout"], "wb") as out, open(cfg["stderr"], "wb") as err:
        child = subprocess.Popen(
            cfg["argv"],
            cwd=cfg["cwd"],
            env=cfg["env"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    sent = None
    timed_out = False
    while child.poll() is None:
        if stop.is_set() or time.monotonic() >= deadline:
            timed_out = not stop.is_set()
            sent = "SIGTERM"
            kill_group(child.pid, signal.SIGTERM)
            try:
                child.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                sent = "SIGKILL"
                kill_group(child.pid, signal.SIGKILL)
                child.wait()
            break
        time.sleep(0.05)
    kill_group(child.pid, signal.SIGKILL)  # what the CLI left behind in its group
    # and what escaped the group (setsid, daemons)
    if cfg.get("sweep", "all") == "all":
        # every other process this user may signal in the sandbox's PID namespace;
        # nothing else runs there during the attempt
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(-1, signal.SIGKILL)
    else:
        sweep_new(keep)
    status = {
        "exit_code": child.returncode,
        "timed_out": timed_out,
        "stopped": stop.is_set(),
        "signal": sent,
        "seconds": round(time.monotonic() - started, 6),
    }
    with open(cfg["status"], "w", encoding="utf-8") as fh:
        json.dump(status, fh)
    listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
