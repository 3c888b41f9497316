"""Runs: specs, attempts, the Ray controller and the results table."""

from dataspace.runs.layout import RunLayout
from dataspace.runs.spec import RunSpec, load_spec, parse_spec

__all__ = ["RunLayout", "RunSpec", "load_spec", "parse_spec"]
