"""Browser tests: Playwright driving Debian's Chromium against Django's live server.

Never `playwright install`: the browser is /usr/bin/chromium (`apt-get install -y chromium`).
Mark tests `@pytest.mark.browser` and `django_db(transaction=True)` (the live server reads
from another thread); use `live_server`, `login(...)` and `screenshot(...)`. Screenshots go to
`test-artifacts/` (gitignored). Static files (CSS, htmx) are served under `live_server` by
WhiteNoise's finders (`WHITENOISE_USE_FINDERS = True` in the settings); `assets_loaded(page)`
checks that a page really got them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import PASSWORD

# Playwright's sync API runs an event loop in the test thread; Django refuses ORM calls from
# a thread with a running loop unless told this is fine (the live server runs elsewhere).
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(autouse=True)
def patient_expectations() -> Iterator[None]:
    """A check waits up to 20 s (Playwright's default is 5 s): a live answer is debounced and
    then judged by the engine, which takes seconds on a loaded shared machine."""
    expect.set_options(timeout=20_000)
    yield
    expect.set_options(timeout=5_000)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


def login(page: Page, live_server: Any, user: Any, password: str = PASSWORD) -> None:
    """Log in through the login form (`user`: a user or a username) and wait for the answer."""
    username = user if isinstance(user, str) else user.get_username()
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.click("main button[type=submit]")


def open_account_menu(page: Page) -> None:
    """Open the header's account menu (team, API tokens, notifications, language, log out);
    below 720 px the Menu button first shows the bar."""
    if page.locator("#nav-menu-button").is_visible():
        if page.get_attribute("#nav-menu-button", "aria-expanded") != "true":
            page.click("#nav-menu-button")
    if page.locator("#nav-account").get_attribute("open") is None:
        page.click("#nav-account-button")


def logout(page: Page) -> None:
    """Log out with the account menu's button (a POST form)."""
    open_account_menu(page)
    with page.expect_navigation():
        page.click("header.top form[action$='/logout/'] button")


def choose_language(page: Page, language: str) -> None:
    """Switch the interface language with the account menu's (or, signed out, the header's)
    language buttons, and wait for the page it comes back to."""
    if page.locator("#nav-account").count():
        open_account_menu(page)
    with page.expect_navigation():
        page.click(f"header.top form.language button[value='{language}']")


def screenshot(page: Page, name: str) -> Path:
    """Save a full-page screenshot as `test-artifacts/<name>.png` and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def assets_loaded(page: Page) -> bool:
    """Whether the page got the portal's stylesheet and htmx (static files are served)."""
    return bool(page.evaluate(
        "() => typeof window.htmx !== 'undefined' && [...document.styleSheets].some("
        "s => (s.href || '').endsWith('/rlark.css') && s.cssRules.length > 0)"
    ))
