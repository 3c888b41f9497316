"""Videos planned first: the driver encodes only the videos its release keeps.

Guards that planning every item's video before choosing the share changes no byte of a
release (each kept video, its ledger record and the workspace size are those of a direct
build of the task), that a video dropped to meet the share is never encoded, and that a
plan that cannot be used any more (here: its cache file unreadable) sends its item
through every stage again, with the release a fresh build gives.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from builder.cache import PENDING_VIDEO, ItemCache
from builder.driver import build_release, build_task
from dataspace.diff import diff_releases
from dataspace.release import Release
from tests.builder.conftest import plain_spec

VIDEO = {"scene_seconds": 0.5, "fps": 4, "narration": False, "target_seconds": 0.0}


def _items(bundled_items):
    finance = [i for i in bundled_items if i.corpus == "finance"][:6]
    clinical = [i for i in bundled_items if i.corpus == "clinical"][:8]
    return finance + clinical


def _pending(cache: Path) -> list[Path]:
    return sorted(cache.glob(f"items/*/*/{PENDING_VIDEO}"))


@pytest.fixture(scope="module")
def quarter_build(bundled_items, tmp_path_factory):
    """A release of :func:`_items` with a quarter of its tasks given a video, built into a
    cache of its own (the tests below only read it; one that changes the cache copies it)."""
    root = tmp_path_factory.mktemp("quarter")
    finished: list[dict] = []
    report = build_release(
        plain_spec(stage3={"video": VIDEO, "video_share": 0.25}),
        root / "a" / "release",
        items=_items(bundled_items),
        cache_dir=root / "c",
        progress=lambda _d, _t, res: finished.append(res) if res.get("finished_video") else None,
    )
    return {"root": root, "report": report, "finished": finished}


@pytest.mark.slow
def test_kept_videos_are_those_of_a_direct_build_and_dropped_ones_are_never_encoded(
    bundled_items, quarter_build
):
    items = _items(bundled_items)
    spec = plain_spec(stage3={"video": VIDEO, "video_share": 0.25})
    tmp_path = quarter_build["root"]
    report, finished = quarter_build["report"], quarter_build["finished"]
    video = report.video
    assert video is not None and video["dropped_to_meet_share"] >= 1
    # one encoding per kept video, none for the dropped ones: their plans stay unencoded
    assert len(finished) == video["tasks_with_video"]
    left = _pending(tmp_path / "c")
    assert len(left) == video["dropped_to_meet_share"]
    for plan in left:
        assert (plan.parent / "context" / "briefing.mp4").read_bytes() == b""
        assert "video_pending" in json.loads((plan.parent / "result.json").read_text())

    release = Release(tmp_path / "a" / "release")
    by_id = {(i.corpus, i.id): i for i in items}
    kept = [a for a in report.accepted if release.metadata(a.task_id).get("video")]
    assert len(kept) == video["tasks_with_video"]
    for acc in kept:
        direct = build_task(by_id[(acc.corpus, acc.id)], spec, task_id=acc.task_id)
        ws = Path(release.workspace(acc.task_id))
        assert (ws / "briefing.mp4").read_bytes() == direct.context["briefing.mp4"]
        assert release.metadata(acc.task_id) == json.loads(json.dumps(direct.metadata))
        ledger = json.loads(
            (tmp_path / "a" / "release" / "ledger" / acc.task_id / "ledger.json").read_text()
        )
        assert ledger["stage3"]["video"] == json.loads(json.dumps(direct.ledger["stage3"]["video"]))
        assert ledger["stage3"]["video"]["check"]["ok"] is True


@pytest.mark.slow
def test_an_unusable_plan_rebuilds_its_item_as_a_fresh_build_does(
    bundled_items, quarter_build, tmp_path
):
    items = _items(bundled_items)
    cache = tmp_path / "c"
    shutil.copytree(quarter_build["root"] / "c", cache)  # this test spoils its plans
    plans = _pending(cache)
    assert plans
    for plan in plans:  # the dropped videos' plans, unreadable
        plan.write_bytes(b"not a plan")
    more = plain_spec(stage3={"video": VIDEO, "video_share": 0.4})
    again = build_release(more, tmp_path / "b" / "release", items=items, cache_dir=cache)
    fresh = build_release(
        more, tmp_path / "f" / "release", items=items, cache_dir=tmp_path / "fresh-cache"
    )
    assert again.video["tasks_with_video"] == fresh.video["tasks_with_video"]
    assert again.video["tasks_with_video"] > round(0.25 * again.video["tasks"])
    assert diff_releases(tmp_path / "b" / "release", tmp_path / "f" / "release").identical
    # the entries the second build kept are complete; the rest still wait on their plans
    for entry in ItemCache(cache).root.glob("items/*/*"):
        result = json.loads((entry / "result.json").read_text())
        assert ("video_pending" in result) == (entry / PENDING_VIDEO).is_file()
