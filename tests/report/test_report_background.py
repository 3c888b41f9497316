"""Figures drawn in a forked process: the same results as drawn here, failures surface."""

from __future__ import annotations

import os

import pytest

from dataspace.report.background import Background


def test_jobs_run_in_another_process_and_return_their_results():
    """Guards the forked worker: results come back by name, computed elsewhere."""
    here = os.getpid()
    got = Background({"pid": os.getpid, "text": lambda: "<svg/>" * 3}).results()
    assert got["text"] == "<svg/><svg/><svg/>"
    assert got["pid"] != here


def test_a_job_that_fails_in_the_worker_is_run_here_and_raises():
    """Guards the fallback: a failing job is never silently dropped."""

    def boom() -> str:
        raise ValueError("no figure")

    with pytest.raises(ValueError, match="no figure"):
        Background({"ok": lambda: 1, "bad": boom}).results()


def test_no_jobs_means_no_worker():
    """Guards the empty case: nothing to draw starts no process."""
    assert Background({}).results() == {}
