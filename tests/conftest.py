"""Fixtures shared by every test package: one build cache, the demo release built once, and
Ray for the files that run attempts in-process (connected for one file at a time). Test files
run longest first, by the seconds ``durations.json`` records for each."""

from __future__ import annotations

import collections
import json
import os
import statistics
import sys
from pathlib import Path

import pytest

DEMO_BUILD_TIMEOUT = 1800
"""Seconds a test that uses the demo release may take (its first user pays for the build;
mark it ``pytest.mark.timeout(DEMO_BUILD_TIMEOUT)``)."""


DURATIONS = Path(__file__).with_name("durations.json")
"""Seconds each test file took in a whole-suite run on CI's machine (2 cores, the README's
test command): ``./scripts/dev.sh test --record-durations`` writes it again."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        nargs="?",
        const=str(DURATIONS),
        default=None,
        metavar="PATH",
        help="write each test file's seconds (set-up, call and tear-down of its tests) to "
        f"PATH as JSON (default {DURATIONS.relative_to(DURATIONS.parents[1])}), the order "
        "the next runs take the files in",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Test files longest first (a file not recorded counts the median), each file's tests
    in their own order: the workers (one test file at a time, ``--dist loadfile``, which
    ``scripts/dev.sh test`` runs without xdist's own reordering by test count) end
    together on short files instead of one worker finishing the longest files alone."""
    try:
        seconds: dict[str, float] = json.loads(DURATIONS.read_text())
    except FileNotFoundError:
        return
    except ValueError as exc:
        raise pytest.UsageError(
            f"{DURATIONS}: not JSON ({exc}); write it again with "
            "./scripts/dev.sh test --record-durations"
        ) from None
    default = statistics.median(seconds.values()) if seconds else 0.0
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(_file_of(item.nodeid), i)

    def key(item: pytest.Item) -> tuple[float, int]:
        f = _file_of(item.nodeid)
        return (-seconds.get(f, default), first[f])

    items.sort(key=key)  # stable: a file's tests keep their order


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


_recorded: collections.Counter[str] = collections.Counter()
_record_to: str | None = None  # where --record-durations writes (None: not recording here)


def pytest_configure(config: pytest.Config) -> None:
    global _record_to
    # in a plain run, and in the controller of a pytest-xdist run (which sees every report);
    # not in its workers (``workerinput``: the environment says nothing to a pytest started
    # by a test that runs in a worker)
    if not hasattr(config, "workerinput"):
        _record_to = config.getoption("--record-durations")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _record_to:
        _recorded[_file_of(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _record_to and _recorded:
        data = {f: round(s, 1) for f, s in sorted(_recorded.items())}
        Path(_record_to).write_text(json.dumps(data, indent=1) + "\n")


def _session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's temporary root, shared by every pytest-xdist worker of the session."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="module", autouse=True)
def ray_ends_with_its_test_file(request: pytest.FixtureRequest):
    """Fails the test file that leaves Ray connected (an in-process run connects and stays
    connected): a later file of the same worker would find it, and its model limiters
    would become actors of an instance it never asked for. Ray is disconnected here, and
    the local instance a file started is stopped, so each file starts its own.

    Each file also starts with Ray's authentication settings read again from the
    environment: a test that changed them (and had the change undone) leaves Ray holding
    the old ones, and a plain ``ray.init`` would then start an instance that asks for a
    token its own driver does not send."""
    if "ray._raylet" in sys.modules:
        from dataspace.runs.ray_start import reread_auth_settings

        reread_auth_settings()
    yield
    ray = sys.modules.get("ray")
    connected = ray is not None and ray.is_initialized()
    if "dataspace.runs.ray_start" in sys.modules:  # its local instance ends with the file
        from dataspace.runs.ray_start import stop_local_ray

        stop_local_ray()
    elif connected:
        ray.shutdown()
    if connected:
        pytest.fail(
            f"{request.node.nodeid} left Ray connected: use the ray_local fixture (or "
            "ray.shutdown() what the file started)",
            pytrace=False,
        )


@pytest.fixture(scope="module")
def ray_local():
    """Ray for the in-process runs of one test file: a local instance of 2 CPUs started the
    CLI's way, stopped at the end of the file (no connection lives for the whole session,
    and no later file finds Ray connected)."""
    import ray

    from dataspace.runs.ray_start import connect_ray, stop_local_ray

    stop_local_ray()  # an instance another file left running has other CPUs
    connect_ray(num_cpus=2)
    yield ray
    stop_local_ray()


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One item cache for every build of this session (and every worker of it): a build of
    items already built (same inputs, same code) copies them from here instead of building
    them again. Entries appear atomically, so concurrent builds share it safely."""
    cache = _session_root(tmp_path_factory) / "build-cache"
    cache.mkdir(exist_ok=True)
    return cache


@pytest.fixture(scope="session")
def demo_release(tmp_path_factory: pytest.TempPathFactory, build_cache: Path) -> Path:
    """The release ``dataspace demo`` builds (both bundled corpora, every stage), built
    once per session in this process (into :func:`build_cache`, so a later ``dataspace
    demo --build-cache`` reuses every item), readable by the sandbox's user.

    Workers of one session take turns (a lock file): the first builds, the others find
    every item in the cache."""
    import fcntl

    from dataspace.demo import build_demo_release

    release = tmp_path_factory.mktemp("demo-release") / "release"
    with open(_session_root(tmp_path_factory) / "demo-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        build_demo_release(release, workers=0, cache_dir=build_cache)
    for p in [release, *release.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return release


@pytest.fixture(scope="session")
def demo_tasks(demo_release: Path) -> tuple[str, ...]:
    """Three demo tasks that differ: one whose answer needs a video, one of the clinical
    corpus that needs a PDF (or any clinical one), one asked in Chinese."""
    meta = {
        p.stem: json.loads(p.read_text()) for p in (demo_release / "metadata").glob("task_*.json")
    }
    ids = sorted(meta, key=lambda t: int(t.split("_")[1]))
    chosen: list[str] = []

    def first(pred: object) -> None:
        for t in ids:
            if t not in chosen and pred(meta[t]):  # type: ignore[operator]
                chosen.append(t)
                return

    first(lambda m: "video" in m.get("modalities_required", []))
    first(lambda m: m.get("corpus") == "clinical" and "pdf" in m.get("modalities_required", []))
    if len(chosen) < 2:
        first(lambda m: m.get("corpus") == "clinical")
    first(lambda m: m.get("question_language") == "zh")
    assert len(chosen) == 3, f"the demo release has no three such tasks: {chosen}"
    return tuple(chosen)
