"""Shared fixtures: real worker and server processes, a browser, demo users."""

import os
import time
from pathlib import Path

import pytest

# Kernels run in this process only on Triton's CPU interpreter (the runtime client's tests);
# Triton must see this before it is first imported, or its builtins are made for compiled
# kernels. Evaluation children set their own environment (cuda children drop it).
os.environ.setdefault("TRITON_INTERPRET", "1")

# Playwright's sync API runs an event loop in this thread; the ORM calls in tests are still
# synchronous and safe here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session", autouse=True)
def embedded_redis():
    """The session's broker and channel layer when REDIS_URL is unset: this data folder's
    embedded Redis, stopped at the end if this session started it (workers and servers the
    tests start get its URL and start none)."""
    if os.environ.get("REDIS_URL"):
        yield None
        return
    from django.conf import settings

    from kernelevolve_site.embedded_redis import ensure_embedded_redis, stop_embedded_redis

    started = ensure_embedded_redis(settings.DATA_DIR)
    yield settings.REDIS_URL
    if started:
        stop_embedded_redis(settings.DATA_DIR)


@pytest.fixture(scope="session", autouse=True)
def flush_outlasts_deadlocks():
    """The flush between transactional tests retries when PostgreSQL picks it as a deadlock's
    victim (the workers and server of the last test can still be writing)."""
    from tests.support.flush import retry_flush_on_deadlock

    retry_flush_on_deadlock()


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def demo_users(transactional_db):
    """The demo users, one per role (committed, so other processes see them)."""
    from apps.accounts.services import demo_users_seed

    return {username: password for username, password, _ in demo_users_seed()}


@pytest.fixture(scope="session")
def control_worker(django_db_setup, django_db_blocker, artifacts_dir):
    """A real Celery worker process consuming the control queue from the real broker."""
    from tests.support.processes import start_worker

    with django_db_blocker.unblock():
        worker = start_worker("control", "control", artifacts_dir / "logs")
    yield worker
    worker.stop()


@pytest.fixture(scope="module")
def eval_worker(django_db_setup, django_db_blocker, artifacts_dir):
    """A real evaluation worker on the interpreter queue (one per test module)."""
    from tests.support.processes import start_worker

    with django_db_blocker.unblock():
        worker = start_worker("eval", "eval.interpret", artifacts_dir / "logs")
    yield worker
    worker.stop()


@pytest.fixture(scope="session")
def asgi_server(django_db_setup, django_db_blocker, artifacts_dir):
    """The ASGI server (pages, API, websockets) in its own process on the test database."""
    from tests.support.processes import start_asgi_server

    with django_db_blocker.unblock():
        server, url = start_asgi_server(artifacts_dir / "logs")
    yield url
    server.stop()


@pytest.fixture(scope="module")
def browser():
    # Module scope: Playwright's sync API keeps an event loop running on this thread while it
    # is open, and code outside browser tests must not find one.
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"browser tests need {CHROMIUM}: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, artifacts_dir, request):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    yield page
    page.screenshot(path=str(artifacts_dir / f"{request.node.name}.png"), full_page=True)
    context.close()


def login(page, base_url: str, username: str, password: str) -> None:
    page.goto(base_url + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_selector("header.topbar")


def wait_for_js(page, expression: str, timeout: float = 30_000) -> None:
    """Wait until `expression` is truthy in the page. Playwright's wait_for_function polls with
    eval inside the page, which the site's Content-Security-Policy refuses; page.evaluate runs
    through the DevTools protocol, which the policy does not govern."""
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} ms waiting for: {expression}")
        page.wait_for_timeout(20)
