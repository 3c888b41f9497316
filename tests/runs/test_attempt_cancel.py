"""A graceful cancel reaches an attempt blocked in a system call (a model's reply, a
harness process), in a real Ray worker of an instance of its own."""

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

import pytest

pytestmark = [pytest.mark.ray]

_PROBE = r"""
import json, socket, sys, tempfile, time
from pathlib import Path
import ray
from dataspace.runs.ray_start import connect_ray

guarded = sys.argv[1] == "guarded"
folder = Path(tempfile.mkdtemp())


def blocked(folder, guarded):
    import contextlib
    from dataspace.runs.attempt import interrupts_wake_blocking_calls

    server = socket.create_server(("127.0.0.1", 0))
    conn = socket.create_connection(server.getsockname())
    guard = interrupts_wake_blocking_calls() if guarded else contextlib.nullcontext()
    try:
        with guard:
            Path(folder, "started").touch()
            conn.recv(1)  # a reply that never comes
    finally:
        Path(folder, "cleaned").touch()


connect_ray(num_cpus=1)
ref = ray.remote(max_retries=0)(blocked).remote(str(folder), guarded)
end = time.monotonic() + 120
while not (folder / "started").exists() and time.monotonic() < end:
    time.sleep(0.05)
ray.cancel(ref, force=False)
# unguarded, the call never returns: a few seconds show it
ready, _ = ray.wait([ref], timeout=60 if guarded else 3)
error = None
if ready:
    try:
        ray.get(ref)
    except Exception as exc:
        error = "cancelled" if isinstance(exc, ray.exceptions.TaskCancelledError) else repr(exc)
print(json.dumps({"ended": bool(ready), "error": error, "cleaned": (folder / "cleaned").exists()}))
"""


def _sigint(disposition: signal.Handlers) -> Callable[[], None]:
    """A ``preexec_fn``: the child starts with SIGINT at ``disposition`` (``SIG_IGN``: as a
    background job's children do, ``nohup dataspace run … &``)."""
    return lambda: signal.signal(signal.SIGINT, disposition)


@pytest.mark.parametrize("sigint", ["default", "ignored"])
@pytest.mark.parametrize("guarded", [True, False])
def test_a_graceful_cancel_ends_a_blocked_call_and_runs_the_cleanup(guarded, sigint):
    """Guards ``interrupts_wake_blocking_calls``: Ray's graceful cancel only marks SIGINT as
    pending, so an attempt waiting on a reply that never came stayed blocked until the
    controller killed its worker, and its own cleanup never ran; under a controller started
    in the background (SIGINT ignored, inherited by Ray's workers) it marked nothing."""
    disposition = signal.SIG_DFL if sigint == "default" else signal.SIG_IGN
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, "guarded" if guarded else "bare"],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_sigint(disposition),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    if guarded:
        assert seen == {"ended": True, "error": "cancelled", "cleaned": True}
    else:  # what a worker did before: still blocked, and only a kill ends it
        assert seen == {"ended": False, "error": None, "cleaned": False}


def test_the_guard_is_idle_outside_a_ray_worker():
    import signal

    from dataspace.runs.attempt import interrupts_wake_blocking_calls

    before = threading.active_count()
    with interrupts_wake_blocking_calls():
        assert threading.active_count() == before  # no watcher in a controller
    assert signal.set_wakeup_fd(-1) == -1  # no wake-up fd was left behind
