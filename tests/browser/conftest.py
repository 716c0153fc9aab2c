"""Browser tests: Playwright driving Debian's Chromium against Django's live server.

Never `playwright install`: the browser is /usr/bin/chromium (`apt-get install -y chromium`).
Mark tests `@pytest.mark.browser` and `django_db(transaction=True)` (the live server reads
from another thread); use `live_server`, `login(...)` and `screenshot(...)`. Screenshots go to
`test-artifacts/` (gitignored). Static files (CSS, htmx) are served under `live_server` by
WhiteNoise's finders (`WHITENOISE_USE_FINDERS = True` in the settings); `assets_loaded(page)`
checks that a page really got them. `assert_accessible(page)` runs axe-core (the copy shipped
in the `axe-playwright-python` package, injected by Playwright: no page fetches it) and fails on
any violation of impact serious or critical.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
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


@pytest.fixture(autouse=True)
def quick_live_answers(settings: Any) -> None:
    """Live form answers (wizard findings and counts, log search) are asked for 50 ms after
    typing pauses instead of 400 ms (`RLARK_LIVE_DEBOUNCE_MS`): the journeys type like a
    program, and every check of a live answer otherwise waits out the debounce."""
    settings.RLARK_LIVE_DEBOUNCE_MS = 50


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


AXE = Axe()  # axe-core's axe.min.js as the package ships it, read once
BLOCKING = ("serious", "critical")


def axe_violations(page: Page, impacts: tuple[str, ...] = BLOCKING) -> list[dict[str, Any]]:
    """axe-core's violations on the page as it is now (its rules for WCAG 2.x A and AA and the
    best practices), those of the given impacts only."""
    # axe-core is injected once per document (a second check of the same page, after a menu
    # opened or a live answer came, reuses it): Axe.run would evaluate its 500 kB each time.
    if not page.evaluate("() => typeof window.axe === 'object' && !!window.axe.run"):
        page.evaluate(AXE.axe_script)
    response = page.evaluate("axe.run({resultTypes: ['violations']})")
    return [v for v in response["violations"] if v.get("impact") in impacts]


def axe_report(violations: list[dict[str, Any]]) -> str:
    """One block per violated rule: rule id, impact, the help URL, then each element's target."""
    lines = []
    for v in violations:
        lines.append(f"{v['id']} ({v['impact']}): {v['help']} - {v['helpUrl']}")
        for node in v["nodes"]:
            target = " ".join(str(t) for t in node["target"])
            summary = (node.get("failureSummary") or "").replace("\n", " ")
            lines.append(f"    {target}: {summary[:300]}")
    return "\n".join(lines)


def assert_accessible(page: Page, name: str = "") -> None:
    """No axe-core violation of impact serious or critical on the page as it is shown now.
    With a `name`, every violation found (minor and moderate too) is written to
    `test-artifacts/axe-<name>.txt` for a person to read."""
    found = axe_violations(page, ("minor", "moderate", "serious", "critical"))
    if name:
        ARTIFACTS.mkdir(exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)
        (ARTIFACTS / f"axe-{safe}.txt").write_text(f"{page.url}\n{axe_report(found)}\n")
    violations = [v for v in found if v.get("impact") in BLOCKING]
    assert not violations, (
        f"axe-core: {len(violations)} serious/critical rule(s) violated on "
        f"{name or page.url} ({page.url}):\n{axe_report(violations)}")
