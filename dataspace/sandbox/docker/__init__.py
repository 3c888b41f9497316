"""The ``docker`` sandbox backend: one container per attempt with the official baseline's flags.

See ``backend.py`` for the design; the runtime image is built by ``scripts/dev.sh`` from
``images/Dockerfile.workbench`` on the Debian 12 root all backends share.
"""

from dataspace.sandbox.docker.backend import DEFAULT_IMAGE, DockerBackend
from dataspace.sandbox.docker.sandbox import DockerSandbox

__all__ = ["DEFAULT_IMAGE", "DockerBackend", "DockerSandbox"]
