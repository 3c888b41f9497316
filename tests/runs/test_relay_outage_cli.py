"""An endpoint outage under a harness whose calls go through the relay (smolagents).

Through the CLI against the scripted server, official profile: the server dies while the
attempt's second call is held; the attempt keeps its official outcome, is marked
``endpoint_unreachable``, the screen names the endpoint and the count, the exit code is 1,
and ``--retry endpoint_unreachable`` reruns it once the endpoint is back.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from cli_helpers import KEY_ENV, SECRET, cli_env, dataspace, model_agent, short_ray_dir, write_spec

from dataspace.agents.smolagents_adapter import install_problem
from dataspace.runs.results import read_results
from dataspace.store import open_store
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.ray,
    pytest.mark.sandbox,
    pytest.mark.llm,
    pytest.mark.integration,
]

LOOK = (
    "Thought: look at the data\n<code>\nimport os\nprint(sorted(os.listdir('/workspace')))\n</code>"
)
DONE = "Thought: nothing to add\n<code>\nfinal_answer('done')\n</code>"


@pytest.fixture
def ray_dir():
    d = short_ray_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_a_relayed_harness_outage_is_marked_and_rerun_with_retry(tmp_path, ray_dir):
    """Guards outages of relayed harnesses: smolagents' attempts used to end as an
    infrastructure fault ``model_endpoint`` with no mark, so neither the screen line, nor
    fail-fast, nor ``--retry endpoint_unreachable`` saw them.
    """
    if install_problem() is not None:
        pytest.fail(f"the smolagents harness is not installed: {install_problem()}")
    release = write_tiny_release(tmp_path / "release", tasks=1)
    store = tmp_path / "store"
    srv = ScriptedServer(
        {"*": [], "task_1": [{"content": LOOK}, {"faults": [{"wait": "outage"}], "content": DONE}]}
    ).start()
    try:
        url, port = srv.url, srv.port
        agent = {
            **model_agent(url, name="smol"),
            "harness": "smolagents",
            "settings": {
                "retry": {"initial_backoff": 0.01, "max_backoff": 0.05, "max_connect_retries": 1}
            },
        }
        spec = write_spec(tmp_path / "s.yaml", release, store, [agent])
        env = cli_env(ray_dir, **{KEY_ENV: SECRET})
        proc = subprocess.Popen(
            [sys.executable, "-m", "dataspace.cli", "run", str(spec)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 300
            while not srv.served("task_1", 1) and proc.poll() is None:
                assert time.monotonic() < deadline, "the second call never arrived"
                time.sleep(0.1)
            srv.kill()
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        assert proc.returncode == 1, out + err
        line = f"smol: 1 attempts ended endpoint_unreachable ({url}): rerun with --retry "
        assert line + "endpoint_unreachable" in err, out + err
        df = read_results(open_store(str(store)).get_bytes("runs/r1/results.parquet"))
        assert len(df) == 1 and bool(df["endpoint_unreachable"].iloc[0])
        assert df["status"].iloc[0] == "runtime_error"  # the official outcome stays
        assert url in df["error"].iloc[0] and "cannot be reached" in df["error"].iloc[0]

        srv.port_request = port  # the endpoint comes back
        srv.start()
        again = dataspace("run", str(spec), "--retry", "endpoint_unreachable", env=env)
    finally:
        srv.stop()
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 run now, 0 already finished" in again.stdout, again.stdout
    assert "endpoint_unreachable" not in again.stderr, again.stderr
    df = read_results(open_store(str(store)).get_bytes("runs/r1/results.parquet"))
    assert len(df) == 1 and not df["endpoint_unreachable"].any()
    assert df["status"].iloc[0] != "runtime_error" and list(df["infra_retries"]) == [1]
    assert srv.served("task_1", 0) == 2  # the first call of each try: once each
