"""Rendering of task workspaces: the renderers and the one router over them."""

from builder.render.base import (
    ReadBack,
    Rendered,
    Renderer,
    get_renderer,
    register_renderer,
    renderer_names,
)

__all__ = [
    "ReadBack",
    "Rendered",
    "Renderer",
    "get_renderer",
    "register_renderer",
    "renderer_names",
]
