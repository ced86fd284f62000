"""Render a job report and the fleet index as self-contained HTML strings.

jinja2 with autoescape on for every template; telemetry is never marked safe.
Only our own static CSS and script (files next to the templates) and the JSON
data block are inserted as markup: the CSS/script verbatim, the JSON with
``<``, ``>``, ``&``, U+2028 and U+2029 escaped so no string can end the block.
A Content-Security-Policy allows exactly that CSS and script (by hash), data:
images (the favicon) and nothing else: the page makes no request of any kind.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from functools import cache
from importlib.resources import files
from typing import Any

import orjson
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from stormwatch.outputs.document import JobDocument
from stormwatch.reports.fleetdata import fleet_data
from stormwatch.reports.fleetheadroom import fleet_headroom_view
from stormwatch.reports.fleetintel import fleet_intel
from stormwatch.reports.fleetview import PAGE_SIZE, fleet_view
from stormwatch.reports.jobattempts import PageNav, job_attempts
from stormwatch.reports.jobcuts import job_cuts
from stormwatch.reports.jobdetail import detailed
from stormwatch.reports.jobfleet import job_fleet
from stormwatch.reports.jobgrowth import job_growth
from stormwatch.reports.jobview import job_view

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


@cache
def environment() -> Environment:
    """The one jinja2 environment: templates from ``reports/templates``, autoescape on for all."""
    return Environment(
        loader=PackageLoader("stormwatch.reports", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@cache
def _asset(name: str) -> str:
    return files("stormwatch.reports").joinpath("templates", name).read_text(encoding="utf-8")


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy(*, style: str, script: str | None) -> str:
    """Nothing may load; only this exact inline style and script may apply/run."""
    script_source = _digest(script) if script is not None else "'none'"
    return (
        f"default-src 'none'; img-src data:; style-src {_digest(style)}; script-src {script_source}; "
        "base-uri 'none'; form-action 'none'"
    )


def script_json(value: Any) -> Markup:
    """``value`` as JSON safe inside ``<script type="application/json">``: no ``<``, ``>``,
    ``&`` or line separators left raw, so no string in it can close the element."""
    text = orjson.dumps(value, default=str).decode("utf-8")
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return Markup(text)  # escaped above; JSON block, never executed


def _page(template: str, *, script_name: str | None, **context: Any) -> str:
    style = _asset("report.css")
    script = _asset(script_name) if script_name else None
    return environment().get_template(template).render(
        css=Markup(style),  # our own static stylesheet
        script=Markup(script) if script is not None else None,  # our own static script
        csp=content_security_policy(style=style, script=script),
        **context,
    )


def render_job(document: JobDocument, *, nav: PageNav | None = None, detail: JobDocument | None = None) -> str:
    """The report page of one job, from its model.json's document (any verdict, ``empty`` included), with
    its place in the fleet (peer outliers, earlier runs) when the document has a ``fleet`` member,
    its attempts when it has ``attempts`` and, at the top, its load warnings and its files that end
    mid-record (``cut_short``); ``nav``: where the page sits (default: a job's own page;
    :meth:`PageNav.for_session` for a session's page). ``detail``: the worst attempt's own document
    (:func:`~stormwatch.reports.jobdetail.detail_document`), which the page then details, when the
    job's verdict comes from an attempt other than its default session; ignored otherwise."""
    shown = detailed(document, detail)
    extra = None if shown is document else shown
    session = None if extra is None else extra.selected_session_id
    return _page("job.html.j2", script_name=None, job=job_view(document, detail=extra),
                 fleet=job_fleet(document, detailed=extra), growth=job_growth(document, detailed=extra),
                 attempts=job_attempts(document, detailed=session),
                 cuts=job_cuts(document, detailed=session), nav=nav or PageNav())


def render_index(fleet: Mapping[str, Any], *, jobs: Sequence[Mapping[str, Any]] | None = None) -> str:
    """The fleet index page, from the parsed fleet.json: the first page of jobs as HTML, every
    job in the JSON data block that the page's script pages, sorts and filters; above them the fleet's
    GPU memory headroom, and below them its trends, regressions, suspect hosts and coverage, when
    fleet.json has them. ``jobs``: the window's
    runs (fleet.json rows: what fleet.json's ``jobs`` holds when None)."""
    view = fleet_view(fleet if jobs is None else {**fleet, "jobs": jobs})
    intel = fleet_intel(fleet, {row.job_id: row.report_href for row in view.rows})
    return _page("index.html.j2", script_name="index.js", fleet=view, intel=intel, page_size=PAGE_SIZE,
                 headroom=fleet_headroom_view(fleet),
                 data=script_json(fleet_data(view.rows)))
