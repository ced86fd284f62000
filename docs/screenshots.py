"""Take the README's two screenshots: the demo fleet's index and a job page, in headless Chromium.

``python docs/screenshots.py [DIR]`` writes the demo fleet to DIR (default a temporary folder),
audits it with ``stormwatch demo``, and saves ``docs/images/index.png`` and
``docs/images/job.png`` (the ``restarted`` job: an earlier attempt's OOM). Needs Debian's
Chromium (``apt-get install chromium``) and playwright (the test extra).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

IMAGES = Path(__file__).resolve().parent / "images"
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1280, "height": 900}


def shoot(reports: Path) -> list[Path]:
    """The index and the ``restarted`` job page of ``reports``, as PNG files under :data:`IMAGES`."""
    IMAGES.mkdir(exist_ok=True)
    pages = {"index.png": reports / "index.html", "job.png": reports / "restarted" / "report.html"}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        page = browser.new_page(viewport=VIEWPORT)
        for name, source in pages.items():
            page.goto(source.as_uri())
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(IMAGES / name))
        browser.close()
    return [IMAGES / name for name in pages]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", default=None, help="where the demo fleet goes (default: a temporary folder)")
    args = parser.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="stormwatch-shots-")) / "fleet"
    subprocess.run([sys.executable, "-m", "stormwatch.flows.cli", "demo", str(root)], check=True)
    for path in shoot(root / "reports"):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
