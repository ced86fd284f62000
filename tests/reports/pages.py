"""Load a rendered page in the headless browser and record everything it does."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VIEWPORT = {"width": 1280, "height": 900}


@dataclass
class LoadedPage:
    page: Any  # playwright.sync_api.Page
    url: str
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def foreign_requests(self) -> list[str]:
        """Requests other than the page's own file:// URL and data: URLs."""
        return [url for url in self.requests if url != self.url and not url.startswith("data:")]

    def assert_quiet(self) -> None:
        """No console message, page error, dialog or request beyond the page itself."""
        assert self.console == []
        assert self.errors == []
        assert self.dialogs == []
        assert self.foreign_requests() == []

    def texts(self, selector: str) -> list[str]:
        return [" ".join(text.split()) for text in self.page.locator(selector).all_text_contents()]

    def visible_texts(self, selector: str) -> list[str]:
        return [" ".join(self.page.locator(selector).nth(i).inner_text().split())
                for i in range(self.page.locator(selector).count()) if self.page.locator(selector).nth(i).is_visible()]


def write_page(path: Path, html: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path


def recorded(page: Any, path: Path) -> LoadedPage:
    """``page`` (not yet navigated) as a :class:`LoadedPage` of ``path`` that records its console
    messages, errors, requests and dialogs (dismissed)."""
    loaded = LoadedPage(page, path.resolve().as_uri())
    page.on("console", lambda message: loaded.console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: loaded.errors.append(str(error)))
    page.on("request", lambda request: loaded.requests.append(request.url))

    def on_dialog(dialog: Any) -> None:
        loaded.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    return loaded


@contextmanager
def open_page(browser: Any, path: Path, *, screenshot: Path | None = None) -> Iterator[LoadedPage]:
    """Open ``path`` (file://) in a fresh context; a full-page screenshot is saved if asked."""
    context = browser.new_context(viewport=VIEWPORT)
    loaded = recorded(context.new_page(), path)
    page = loaded.page
    try:
        page.goto(loaded.url, wait_until="load")
        page.wait_for_timeout(150)  # let anything deferred (favicon, late requests) surface
        if screenshot is not None:
            page.screenshot(path=str(screenshot), full_page=True)
        yield loaded
    finally:
        context.close()


ELEMENTS_WITH_HANDLERS = """() => Array.from(document.querySelectorAll('*')).filter(
    element => Array.from(element.attributes).some(attribute => attribute.name.toLowerCase().startsWith('on'))
).length"""
