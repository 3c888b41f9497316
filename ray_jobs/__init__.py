"""Thin entrypoints that ``ray job submit`` runs on any Ray cluster (or locally).

Each one parses flags into a typed config, calls one library function and prints what
succeeded and what failed::

    python -m ray_jobs.build  --source bundled:finance --dest /data/releases/v1
    python -m ray_jobs.run    spec.yaml [--store s3://...] [--release s3://...]
    python -m ray_jobs.report s3://bucket/prefix/runs/<run_id>
    python -m ray_jobs.sweep  --run-id <run_id>      # delete a run's leftover sandbox pods

The same run spec works on one machine and on a cluster; only the Ray address, the store,
the release location and the sandbox backend change, and each can be given as a flag.
"""
