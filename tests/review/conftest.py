"""Fixtures for the review server: a small real release, both database engines, a server.

The release has three tasks whose workspaces hold every modality the console shows (CSV,
JSON, SQLite, Markdown, a real PDF and a real MP4). PostgreSQL runs as a real server that
the session starts on a loopback port with a private socket folder, as an unprivileged user
(initdb refuses root), and removes at the end.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import pwd
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))

from review_client import Client

SECRET_SQL = "SELECT city, population FROM cities WHERE population > 210000 /*SQL-SENTINEL*/"
PASSWORD = "correct horse battery"


# ---- the release -------------------------------------------------------------------------


def _csv(rows: list[list[object]]) -> bytes:
    import csv

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def _pdf(lines: list[str]) -> bytes:
    import pymupdf

    doc = pymupdf.open()
    for chunk in (lines[:3], lines[3:]):
        page = doc.new_page()
        page.insert_text((72, 72), "\n".join(chunk), fontsize=12)
    data = doc.tobytes()
    doc.close()
    return bytes(data)


def _mp4(path: Path, seconds: float = 2.0) -> None:
    import imageio_ffmpeg
    import numpy as np

    fps = 10
    writer = imageio_ffmpeg.write_frames(
        str(path),
        (64, 48),
        fps=fps,
        codec="libx264",
        pix_fmt_out="yuv420p",
        macro_block_size=16,
        ffmpeg_log_level="error",
    )
    writer.send(None)
    for i in range(int(seconds * fps)):
        frame = np.full((48, 64, 3), (i * 10) % 255, dtype=np.uint8)
        writer.send(frame.tobytes())
    writer.close()


def _sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE countries (code TEXT PRIMARY KEY, name TEXT)")
    conn.executemany(
        "INSERT INTO countries VALUES (?, ?)",
        [("FR", "France"), ("AT", "Austria"), ("PT", "Portugal"), ("FI", "Finland")],
    )
    conn.commit()
    conn.close()


CITIES = [
    ("Lyon", "FR", 522000),
    ("Graz", "AT", 291000),
    ("Porto", "PT", 232000),
    ("Turku", "FI", 195000),
]


def gold_rows(threshold: int) -> list[list[object]]:
    return [[c, p] for c, _, p in CITIES if p > threshold]


def build_release(dest: Path) -> Path:
    from dataspace.release import ReleaseWriter, TaskArtifacts

    scratch = Path(tempfile.mkdtemp(prefix="review-rel-"))
    try:
        video = scratch / "briefing.mp4"
        _mp4(video)
        db = scratch / "countries.sqlite"
        _sqlite(db)
        pdf = _pdf([f"{c}: population {p}" for c, _, p in CITIES])
        with ReleaseWriter(dest, manifest={"name": "review-fixture"}) as w:
            for k in (1, 2, 3):
                threshold = 200000 + 10000 * k
                gold = _csv([["city", "population"], *gold_rows(threshold)])
                cfg = {
                    "schema_version": "1.0",
                    "task_id": f"task_{k}",
                    "order_sensitive": False,
                    "columns": [
                        {"gold_index": 0, "gold_name": "city", "type": "text"},
                        {
                            "gold_index": 1,
                            "gold_name": "population",
                            "type": "number",
                            "comparison": {"mode": "integer"},
                        },
                    ],
                }
                w.add_task(
                    TaskArtifacts(
                        task_id=f"task_{k}",
                        question=f"Which cities have a population above {threshold}?",
                        context={
                            "cities.csv": _csv(
                                [["city", "country", "population"], *map(list, CITIES)]
                            ),
                            "notes/countries.json": json.dumps(
                                [{"code": "FR", "name": "France"}]
                            ).encode(),
                            "db/countries.sqlite": db,
                            "docs/readme.md": b"# Cities\n\nPopulation counts from the "
                            b"**2020 census**.\n\n<script>window.__md_pwned=1</script>\n",
                            "docs/census.pdf": pdf,
                            "media/briefing.mp4": video,
                        },
                        gold_csv=gold,
                        config=cfg,
                        metadata={
                            "domain": "geo",
                            "languages": {"question": "en", "workspace": "en"},
                            "modalities_present": [
                                "csv",
                                "json",
                                "sqlite",
                                "markdown",
                                "pdf",
                                "video",
                            ],
                            "modalities_required": ["csv"],
                            "answer_rows": len(gold_rows(threshold)),
                            "answer_columns": 2,
                            "order_sensitive": False,
                        },
                        ledger={
                            "source": {"corpus": "fixture", "id": f"c{k}"},
                            "sql": SECRET_SQL,
                            "languages": {"question": "en", "workspace": "en"},
                            "seed": k,
                            "gold_sha256": "x",
                        },
                    )
                )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    # An escape hatch a hostile or careless artifact could carry: a symlink to the gold.
    os.symlink(dest / "output" / "task_1" / "gold.csv", dest / "input/task_1/context/leak.csv")
    return dest


@pytest.fixture(scope="session")
def release_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_release(tmp_path_factory.mktemp("rel") / "release")


@pytest.fixture()
def release(release_template: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "release"
    shutil.copytree(release_template, dest, symlinks=True)
    link = dest / "input/task_1/context/leak.csv"
    link.unlink()
    os.symlink(dest / "output" / "task_1" / "gold.csv", link)
    return dest


# ---- PostgreSQL --------------------------------------------------------------------------


def _pg_bin() -> Path | None:
    for name in ("initdb",):
        found = shutil.which(name)
        if found:
            return Path(os.path.realpath(found)).parent
    hits = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(hits[-1]).parent if hits else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="review-pg-"))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.sock.mkdir()
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("nobody")
            os.chmod(self.root, 0o755)
            os.chown(self.sock, user.pw_uid, user.pw_gid)
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as = [
                "setpriv",
                f"--reuid={user.pw_uid}",
                f"--regid={user.pw_gid}",
                "--clear-groups",
                "--",
            ]

    def start(self) -> None:
        env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8", "HOME": str(self.root)}
        subprocess.run(
            [
                *self._as,
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "review",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            env=env,
            cwd=self.root,
        )
        self.proc = subprocess.Popen(
            [
                *self._as,
                str(self.bindir / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-k",
                str(self.sock),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=60",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            cwd=self.root,
        )
        import psycopg

        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    raise RuntimeError(f"postgres did not start: {err[-2000:]}") from None
                time.sleep(0.2)

    def url(self, db: str) -> str:
        return f"postgresql://review@127.0.0.1:{self.port}/{db}"

    def new_database(self) -> str:
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: smart shutdown of our own postmaster
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip(
            "PostgreSQL server binaries (initdb, postgres) are not installed; "
            "scripts/dev.sh installs the Debian package postgresql"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (pip install dataspace[postgres])")
    server = PostgresServer(bindir)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'review.db'}"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.new_database()


# ---- a loaded review with users and a running server ------------------------------------


class Review:
    def __init__(self, url: str, release: Path, cache: Path) -> None:
        from builder.review import Database, ReviewServer, ReviewService, load_release

        self.db_url = url
        self.release = release
        self.db = Database(url)
        load_release(self.db, release)
        self.svc = ReviewService(self.db, cache)
        for name, role in (
            ("ana", "reviewer"),
            ("ben", "reviewer"),
            ("cai", "reviewer"),
            ("rita", "repairer"),
            ("root", "admin"),
        ):
            self.svc.add_user(name, role, PASSWORD)
        self.server = ReviewServer(self.svc).start()
        self.url = self.server.url

    def client(self, name: str | None = None) -> Client:
        c = Client(self.url)
        if name:
            c.login(name, PASSWORD)
        return c

    def close(self) -> None:
        self.server.stop()
        self.db.close()


@pytest.fixture()
def review(db_url: str, release: Path, tmp_path: Path) -> Iterator[Review]:
    r = Review(db_url, release, tmp_path / "cache")
    try:
        yield r
    finally:
        with contextlib.suppress(Exception):
            r.close()
