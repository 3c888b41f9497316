import pytest


@pytest.fixture(scope="session")
def ray_local():
    """One Ray instance for the controller tests of this session (started the CLI's way)."""
    import ray

    from dataspace.runs.ray_start import connect_ray

    connect_ray(num_cpus=2)
    yield ray
    ray.shutdown()
