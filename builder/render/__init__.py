"""Stage 3: modality routing and rendering of task workspaces."""

from builder.render.base import (
    ReadBack,
    Rendered,
    Renderer,
    get_renderer,
    register_renderer,
    renderer_names,
)
from builder.render.routing import (
    RenderFailure,
    TableRoute,
    Workspace,
    assign_renderers,
    render_workspace,
)

__all__ = [
    "ReadBack",
    "RenderFailure",
    "Rendered",
    "Renderer",
    "TableRoute",
    "Workspace",
    "assign_renderers",
    "get_renderer",
    "register_renderer",
    "render_workspace",
    "renderer_names",
]
