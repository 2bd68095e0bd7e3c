"""Benchmarks that print numbers for docs/benchmarks.md; not tests (nothing here asserts a
time), so `make test` (testpaths = tests) never collects them. They run on the test suite's
real fixtures (database, ASGI server, browser):

    KERNELEVOLVE_DATA_DIR=/tmp/ke-portal .venv/bin/python -m pytest benchmarks/bench_portal.py -q -s
"""

from tests.conftest import (  # noqa: F401 - fixtures, registered by being imported here
    artifacts_dir,
    asgi_server,
    browser,
    demo_users,
    page,
)
