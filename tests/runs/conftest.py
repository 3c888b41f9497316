import pytest


@pytest.fixture(scope="session")
def ray_local():
    """One in-process Ray instance for the controller tests of this session."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()
