"""DataSpace: build, run and score the DataSpace data-agent benchmark.

``import dataspace`` stays cheap: heavy backends (Ray, boto3, pymupdf, openai, kubernetes)
are imported only by the modules that need them.
"""

from dataspace.errors import DataSpaceError

__version__ = "0.1.0"

__all__ = ["DataSpaceError", "__version__"]
