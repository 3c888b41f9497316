"""Real components for tests and benchmarks: servers on loopback, honest fakes.

Nothing here is imported by the library itself; ``moto`` is needed only when
``moto_s3_server`` is entered.
"""

from dataspace.testing.s3server import (
    TEST_CREDENTIALS,
    create_bucket,
    moto_s3_server,
    s3_test_options,
)

__all__ = ["TEST_CREDENTIALS", "create_bucket", "moto_s3_server", "s3_test_options"]
