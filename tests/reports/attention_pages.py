"""Browser checks for issue 28's acceptance tests: a page opened at a given viewport, and checks that
each return the problems they find (an empty list when the page is right), so a test asserts
``== []`` and a failure names every offending element at once.

Selectors are the pages' contracts (issue 28):

- index: ``section#attention`` with ``li.attention[data-severity][data-job-id]`` lines, each with an
  ``a[href]``; ``p.attention-none`` when nothing needs attention; ``a.attention-more`` ending a capped
  list; signals as ``span.signal[title=MEANING]`` holding the title and ``<code>code</code>``; the job
  table ``table#jobs`` with ``tbody tr[data-job-id]`` rows;
- job page: ``svg.chart`` per rank with a ``.capacity`` line and a ``text.headroom``
  ("peak 77.4 of 80 GiB, 3 % free"; "CPU" on a CPU-only rank); ``section#load-warnings``; the heat
  strip (``svg.heat``) or ``p.heatstrip-skipped``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stormwatch.signals import SIGNALS, describe
from tests.reports.pages import LoadedPage, recorded


@dataclass(frozen=True)
class Viewport:
    name: str
    width: int
    height: int
    mobile: bool = False

    def context_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"viewport": {"width": self.width, "height": self.height}}
        if self.mobile:
            options.update(is_mobile=True, has_touch=True)  # 1x pixels: full-page shots of long pages stay quick
        return options


DESKTOP = Viewport("1440x900", 1440, 900)
PHONE = Viewport("390x844", 390, 844, mobile=True)
VIEWPORTS = (DESKTOP, PHONE)

#: Half a pixel of rounding either side before a box counts as outside.
TOLERANCE_PX = 0.5


@contextmanager
def open_at(browser: Any, path: Path, viewport: Viewport, *, screenshot: Path | None = None,
            first_screen: Path | None = None, javascript: bool = True) -> Iterator[LoadedPage]:
    """Like :func:`tests.reports.pages.open_page`, at ``viewport`` (a phone: mobile, touch), optionally
    without JavaScript; scrolled to the top. ``screenshot``: the full page; ``first_screen``: what a
    reader sees before scrolling."""
    context = browser.new_context(java_script_enabled=javascript, **viewport.context_options())
    loaded = recorded(context.new_page(), path)
    page = loaded.page
    try:
        page.goto(loaded.url, wait_until="load")
        page.wait_for_timeout(150)  # let anything deferred (favicon, late requests) surface
        if javascript:
            page.evaluate("() => window.scrollTo(0, 0)")
        if first_screen is not None:
            first_screen.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(first_screen), full_page=False)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        yield loaded
    finally:
        context.close()


def _box(item: dict[str, Any]) -> str:
    return f"[{item['left']:.0f},{item['top']:.0f} .. {item['right']:.0f},{item['bottom']:.0f}]"


def box_in_first_screen(box: dict[str, Any], viewport: Viewport) -> bool:
    """Whether a client rect (at scroll 0) lies wholly inside the viewport."""
    return bool(box["top"] >= -TOLERANCE_PX and box["left"] >= -TOLERANCE_PX and box["width"] > 0 and box["height"] > 0
            and box["bottom"] <= viewport.height + TOLERANCE_PX and box["right"] <= viewport.width + TOLERANCE_PX)


# --- the index ---------------------------------------------------------------------------------------

_RECT = "r => ({top: r.top, left: r.left, bottom: r.bottom, right: r.right, width: r.width, height: r.height})"

ATTENTION_JS = f"""() => {{
  const rect = {_RECT};
  const section = document.querySelector('section#attention');
  const lines = section ? Array.from(section.querySelectorAll('li.attention')) : [];
  const more = section ? Array.from(section.querySelectorAll('a.attention-more')) : [];
  const none = section ? Array.from(section.querySelectorAll('p.attention-none')) : [];
  return {{
    section: section !== null,
    sectionBox: section ? rect(section.getBoundingClientRect()) : null,
    none: none.map(p => ({{text: p.textContent.replace(/\\s+/g, ' ').trim(), box: rect(p.getBoundingClientRect())}})),
    moreCount: more.length,
    moreIsLast: more.length === 1 && more[0].closest('li.attention') === null && lines.every(
      li => (li.compareDocumentPosition(more[0]) & Node.DOCUMENT_POSITION_FOLLOWING) !== 0),
    lines: lines.map(li => {{
      const bare = li.cloneNode(true);
      bare.querySelectorAll('span.signal').forEach(span => span.remove());
      return {{
        jobId: li.dataset.jobId ?? null,
        severity: li.dataset.severity ?? null,
        box: rect(li.getBoundingClientRect()),
        hrefs: Array.from(li.querySelectorAll('a[href]')).map(a => a.getAttribute('href')),
        text: li.textContent.replace(/\\s+/g, ' ').trim(),
        bareText: bare.textContent.replace(/\\s+/g, ' ').trim(),
        loneCodes: Array.from(li.querySelectorAll('code')).filter(code => code.closest('span.signal') === null)
          .map(code => code.textContent.trim()),
        signals: Array.from(li.querySelectorAll('span.signal')).map(span => {{
          const words = span.cloneNode(true);
          words.querySelectorAll('code').forEach(code => code.remove());
          return {{
            meaning: span.getAttribute('title'),
            title: words.textContent.replace(/\\s+/g, ' ').trim(),
            codes: Array.from(span.querySelectorAll('code')).map(code => code.textContent.trim()),
          }};
        }}),
      }};
    }}),
  }};
}}"""

FIRST_ROW_JS = f"""() => {{
  const rect = {_RECT};
  const table = document.querySelector('table#jobs');
  if (table === null) {{ return null; }}
  const rows = Array.from(table.querySelectorAll('tbody tr'))
    .filter(row => !row.hidden && row.getBoundingClientRect().height > 0);
  return {{rows: rows.length, jobId: rows.length ? (rows[0].dataset.jobId ?? null) : null,
           text: rows.length ? rows[0].textContent.replace(/\\s+/g, ' ').trim().slice(0, 200) : null,
           box: rows.length ? rect(rows[0].getBoundingClientRect()) : null}};
}}"""


def attention(loaded: LoadedPage) -> dict[str, Any]:
    found: dict[str, Any] = loaded.page.evaluate(ATTENTION_JS)
    return found


def first_row(loaded: LoadedPage) -> dict[str, Any] | None:
    found: dict[str, Any] | None = loaded.page.evaluate(FIRST_ROW_JS)
    return found


#: Signal codes as model.json and fleet.json carry them: ``family:name``, or a snake_case code of the
#: signals table (other snake_case words, such as a phase named ``optimizer_step``, are not codes).
CODE_PATTERN = re.compile("|".join(
    [r"\b(?:alert|gap|collective|allocator|breach):[a-z][a-z0-9_]*\b"]
    + [rf"\b{re.escape(code)}\b" for code in sorted(SIGNALS) if "_" in code and ":" not in code]))


def _titles(code: str) -> set[tuple[str, str]]:
    return {(text.title, text.meaning) for text in (describe(code), describe(code, oom=True))}


def signal_problems(found: dict[str, Any], *, job_ids: set[str]) -> list[str]:
    """Attention lines that show a signal code without its title: a ``<code>`` outside ``span.signal``, a
    code-shaped word outside any signal, a signal without its title or meaning, or one whose title or
    meaning is not the signals table's for its code."""
    problems = []
    for line in found["lines"]:
        where = f"li.attention[data-job-id={line['jobId']!r}]"
        problems += [f"{where}: <code>{code}</code> outside span.signal" for code in line["loneCodes"]]
        bare = line["bareText"]
        for job_id in sorted(job_ids, key=len, reverse=True):  # job ids and hrefs may look like codes
            bare = bare.replace(job_id, " ")
        problems += [f"{where}: code {word!r} in the line's words, not in a span.signal"
                     for word in CODE_PATTERN.findall(bare)]
        for signal in line["signals"]:
            if len(signal["codes"]) != 1:
                problems.append(f"{where}: span.signal with {len(signal['codes'])} <code>s: {signal}")
                continue
            code = signal["codes"][0]
            if not signal["title"]:
                problems.append(f"{where}: signal {code!r} shown without its title")
            elif (signal["title"], signal["meaning"]) not in _titles(code):
                problems.append(f"{where}: signal {code!r} reads {signal['title']!r} / title={signal['meaning']!r}, "
                                f"not the signals table's {sorted(_titles(code))}")
    return problems


# --- job pages ------------------------------------------------------------------------------------------

CLIPPED_TEXT_JS = f"""(tolerance) => {{
  const rect = {_RECT};
  document.querySelectorAll('details').forEach(details => {{ details.open = true; }});
  const problems = [];
  let measured = 0;
  for (const text of document.querySelectorAll('svg text')) {{
    const box = text.getBoundingClientRect();
    if (box.width === 0 || box.height === 0 || !text.textContent.trim()) {{ continue; }}
    measured += 1;
    for (let svg = text.closest('svg'); svg !== null; svg = svg.parentElement && svg.parentElement.closest('svg')) {{
      const outer = svg.getBoundingClientRect();
      if (box.left < outer.left - tolerance || box.top < outer.top - tolerance ||
          box.right > outer.right + tolerance || box.bottom > outer.bottom + tolerance) {{
        const chart = svg.closest('figure, section');
        problems.push({{text: text.textContent.trim(), cls: text.getAttribute('class'),
                        svg: svg.getAttribute('class'), where: chart ? (chart.id || chart.className) : '',
                        textBox: rect(box), svgBox: rect(outer)}});
      }}
    }}
  }}
  return {{measured, problems}};
}}"""


def clipped_texts(loaded: LoadedPage) -> tuple[int, list[str]]:
    """How many SVG texts were measured (every ``<details>`` opened first), and one line per text whose
    box is not inside every SVG around it."""
    found = loaded.page.evaluate(CLIPPED_TEXT_JS, TOLERANCE_PX)
    return found["measured"], [
        f"svg.{item['svg']} in {item['where']!r}: text.{item['cls']} {item['text']!r} at {_box(item['textBox'])} "
        f"outside {_box(item['svgBox'])}" for item in found["problems"]]


CHARTS_JS = """() => Array.from(document.querySelectorAll('svg.chart')).map(svg => {
  const figure = svg.closest('figure') || svg.parentElement;
  return {
    rank: svg.dataset.rank ?? (figure && figure.dataset.rank) ?? null,
    capacity: svg.querySelectorAll('.capacity').length,
    headroom: Array.from(svg.querySelectorAll('text.headroom'))
      .map(text => text.textContent.replace(/\\s+/g, ' ').trim()),
    words: (figure || svg).textContent.replace(/\\s+/g, ' '),
  };
})"""

HEADROOM = re.compile(r"^peak [<≈]?\s?[\d.,]+(?: [KMGT]?i?B)? of [\d.,]+ [KMGT]?i?B, [<≈]?\s?[\d.,]+ % free$")
CPU = re.compile(r"\bCPU\b")
#: A load warning's file and line, as model.json's ``warnings`` give them (``path:line: message``).
FILE_LINE = re.compile(r"(\S+\.jsonl?):(\d+):")


def headroom_problems(loaded: LoadedPage) -> tuple[int, list[str]]:
    """How many ``svg.chart``s the page has, and one line per chart with no capacity line or no headroom
    label of the contract's form (a CPU-only rank's chart has no capacity line and says "CPU" instead,
    in its headroom label if it has one)."""
    charts = loaded.page.evaluate(CHARTS_JS)
    problems = []
    for chart in charts:
        where = f"svg.chart[data-rank={chart['rank']}]"
        if chart["capacity"] == 0 and CPU.search(chart["words"]):  # a CPU-only rank: no device, no capacity
            problems += [f"{where}: a CPU rank's text.headroom {text!r} does not say CPU"
                         for text in chart["headroom"] if not CPU.search(text)]
            continue
        if chart["capacity"] == 0:
            problems.append(f"{where}: no .capacity line (and no 'CPU')")
        if len(chart["headroom"]) != 1 or not HEADROOM.match(chart["headroom"][0]):
            problems.append(f"{where}: text.headroom {chart['headroom']!r} is not one 'peak X of Y GiB, Z % free'")
    return len(charts), problems


FIRST_SCREEN_JS = f"""(selector) => {{
  const element = document.querySelector(selector);
  return element === null ? null : {{box: ({_RECT})(element.getBoundingClientRect()),
                                     text: element.textContent.replace(/\\s+/g, ' ').trim()}};
}}"""


def element(loaded: LoadedPage, selector: str) -> dict[str, Any] | None:
    """The first ``selector``'s client rect (at the current scroll) and words; None when absent."""
    found: dict[str, Any] | None = loaded.page.evaluate(FIRST_SCREEN_JS, selector)
    return found


def count(loaded: LoadedPage, selector: str) -> int:
    total: int = loaded.page.locator(selector).count()
    return total


# --- axe-core -------------------------------------------------------------------------------------------

BLOCKING_IMPACTS = ("serious", "critical")


def axe_problems(loaded: LoadedPage) -> list[str]:
    """axe-core's serious and critical violations, one line per rule with its first few targets."""
    from axe_playwright_python.sync_playwright import Axe  # a test dependency: missing it is an error

    results = Axe().run(loaded.page)
    problems = []
    for violation in results.response["violations"]:
        if violation["impact"] not in BLOCKING_IMPACTS:
            continue
        nodes = violation["nodes"]
        targets = "; ".join(" ".join(node["target"]) for node in nodes[:4])
        checks = [*nodes[0]["any"], *nodes[0]["all"], *nodes[0]["none"]] if nodes else []
        detail = " / ".join(item["message"] for item in checks)[:300]
        problems.append(f"{violation['id']} ({violation['impact']}) x{len(nodes)}: {targets}"
                        f"{' ...' if len(nodes) > 4 else ''} | {detail}")
    return problems


# --- one load, every check --------------------------------------------------------------------------------


@dataclass
class PageFacts:
    """What one load of a page showed, measured in an order that keeps each check honest: requests and
    messages as loaded; the first screen at scroll 0 with every ``<details>`` as the page leaves it;
    then SVG texts and axe-core with every ``<details>`` opened (so folded charts are checked too)."""

    console: list[str]
    errors: list[str]
    dialogs: list[str]
    foreign_requests: list[str]
    attention: dict[str, Any] | None = None
    first_row: dict[str, Any] | None = None
    load_warnings: dict[str, Any] | None = None
    heat: tuple[int, int] = (0, 0)  # svg.heat, p.heatstrip-skipped
    charts: int = 0
    headroom: list[str] = field(default_factory=list)
    measured_texts: int = 0
    clipped: list[str] = field(default_factory=list)
    axe: list[str] = field(default_factory=list)


def inspect_page(browser: Any, path: Path, viewport: Viewport, *, index: bool, javascript: bool = True,
                 screenshot: Path | None = None, first_screen: Path | None = None) -> PageFacts:
    """Open ``path`` once and run every check on it (only the first-screen ones without JavaScript)."""
    with open_at(browser, path, viewport, screenshot=screenshot, first_screen=first_screen,
                 javascript=javascript) as loaded:
        facts = PageFacts(console=list(loaded.console), errors=list(loaded.errors), dialogs=list(loaded.dialogs),
                          foreign_requests=loaded.foreign_requests())
        if index:
            facts.attention, facts.first_row = attention(loaded), first_row(loaded)
        else:
            facts.load_warnings = element(loaded, "section#load-warnings")
            facts.heat = (count(loaded, "svg.heat"), count(loaded, "p.heatstrip-skipped"))
            facts.charts, facts.headroom = headroom_problems(loaded)
        if javascript:
            facts.measured_texts, facts.clipped = clipped_texts(loaded)
            facts.axe = axe_problems(loaded)
    return facts
