"""Slack: an incoming-webhook message (Block Kit plus a plain ``text`` fallback), posted with httpx.

The message is the receiver's ``slack_template`` (default ``templates/slack.json.j2``) rendered as
JSON (:mod:`.templating`); the template gets each entry as :class:`SlackEntry`, strings escaped here.

Every telemetry string goes through :func:`slack_escape` (``&`` ``<`` ``>`` as
entities, after control characters are removed), so no job id, signal, phase or
detail can open a link, a mention (``<!channel>``) or a user reference. Only our
own report URL becomes a link, and only for http(s). Slack's limits are kept:
50 blocks per message, 3,000 characters per section, 150 per header.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import jinja2
import orjson

from stormwatch.alerting.findings import IndicatorFact, JobFinding
from stormwatch.alerting.messages import Entry, EntryState, Message, day, headline, new_jobs, resolved_text, title
from stormwatch.alerting.plain_text import one_line
from stormwatch.outputs.media_types import MediaType
from stormwatch.severity import Severity
from stormwatch.tasks.notify.delivery import SendError
from stormwatch.tasks.notify.templating import DEFAULT_SLACK, load_template, render_template

MAX_JOB_SECTIONS = 45
MAX_SECTION_CHARS = 3000
MAX_TEXT_JOBS = 100
_PARTIAL_ENTITY = re.compile(r"&[a-z]{0,3}$")


def slack_escape(text: object, limit: int = 300) -> str:
    """``text`` as inert mrkdwn: one line, at most ``limit`` characters before escaping."""
    return one_line(text, limit).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_link(url: str | None) -> str | None:
    """``<url|open report>`` for an http(s) URL (its ``|``, ``<``, ``>``, spaces percent-encoded),
    the escaped text of any other URL, or None."""
    if not url:
        return None
    if not url.lower().startswith(("https://", "http://")):
        return slack_escape(url, 500)
    target = one_line(url, 2000).replace(" ", "%20").replace("|", "%7C").replace("<", "%3C").replace(">", "%3E")
    return f"<{target.replace('&', '&amp;')}|open report>"


def _indicator_line(item: IndicatorFact, *, with_details: bool) -> str:
    phase = f" · phase {slack_escape(item.phase_path, 150)}" if item.phase_path else ""
    line = (
        f"*{item.label}:* {item.where} · {slack_escape(item.signal, 100)} ({item.severity.value}){phase}"
        f" · {item.when}"
    )
    if with_details and item.details:
        line += f"\n> {slack_escape(item.details, 300)}"
    return line


def job_section_text(job: JobFinding, *, head: Sequence[str] = (), extra: Sequence[IndicatorFact] = (),
                     tail: Sequence[str] = ()) -> str:
    """The mrkdwn of one job: ``head`` lines (mrkdwn, escaped already), id and verdict, missing ranks,
    report link, its indicators and ``extra`` facts, then ``tail`` lines (escaped already)."""

    def build(with_details: bool) -> str:
        lines = [*head, f"*Job:* {slack_escape(job.job_id, 150)} · *verdict:* {slack_escape(job.verdict, 20)}"]
        if job.attempt is not None:
            lines.append(f"*From:* {slack_escape(job.attempt.description, 300)}")
        if job.missing_text:
            lines.append(f"*Missing ranks:* {job.missing_text} of {job.expected_ranks}")
        link = slack_link(job.report_url)
        if link:
            lines.append(f"*Report:* {link}")
        lines.extend(_indicator_line(item, with_details=with_details) for item in (*job.indicators, *extra))
        lines.extend(tail)
        return "\n".join(lines)

    text = build(with_details=True)
    if len(text) > MAX_SECTION_CHARS:
        text = build(with_details=False)
    if len(text) > MAX_SECTION_CHARS:
        text = _PARTIAL_ENTITY.sub("", text[: MAX_SECTION_CHARS - 1]) + "…"
    return text


def entry_section_text(entry: Entry) -> str:
    """The mrkdwn of one entry: a job's section (with its state and what it inhibits), or a resolution."""
    if entry.state is EntryState.RESOLVED:
        link = slack_link(entry.job.report_url)
        return f"*Resolved:* {resolved_text(entry, slack_escape)}" + (f"\n*Last report:* {link}" if link else "")
    head = [f"*Still firing* since {day(entry.since)}"] if entry.state is EntryState.STILL_FIRING else []
    tail = [f"*Inhibited:* {slack_escape(line, 300)}" for line in entry.inhibited[:20]]
    if len(entry.inhibited) > 20:
        tail.append(f"*Inhibited:* … and {len(entry.inhibited) - 20} more")
    return job_section_text(entry.job, head=head, extra=entry.extra, tail=tail)


@dataclass(frozen=True, kw_only=True)
class SlackEntry:
    """One entry as the Slack template sees it, every string inert mrkdwn already (one line, ``&<>``
    escaped, cut): ``state`` (an :class:`EntryState` value), ``headline``, ``section`` (the entry's facts,
    within Slack's 3,000 characters), ``job_id``, ``verdict``, ``report_link`` (``<url|open report>``)."""

    state: str
    headline: str
    section: str
    job_id: str
    verdict: str
    report_link: str | None

    @classmethod
    def of(cls, entry: Entry) -> SlackEntry:
        return cls(state=entry.state.value, headline=headline(entry, slack_escape), section=entry_section_text(entry),
                   job_id=slack_escape(entry.job.job_id, 150), verdict=slack_escape(entry.job.verdict, 20),
                   report_link=slack_link(entry.job.report_url))


@functools.cache
def _default_template() -> jinja2.Template:
    return load_template(DEFAULT_SLACK)


def message_payload(message: Message, template: jinja2.Template | None = None) -> dict[str, Any]:
    """The webhook JSON for one message (one entry, or a group of them): ``template`` (default
    ``templates/slack.json.j2``) rendered with ``title``, ``receiver``, ``entries`` (:class:`SlackEntry`),
    ``shown`` (the first :data:`MAX_JOB_SECTIONS` of them, one section each: Slack takes 50 blocks),
    ``hidden`` (how many more) and ``max_text_jobs``. ValueError, naming the template, when it fails
    or does not give a JSON object."""
    if not message.entries:
        raise ValueError("a Slack message needs at least one entry")
    used = template or _default_template()
    entries = [SlackEntry.of(entry) for entry in message.entries]
    text = render_template(used, title=title(message), receiver=message.receiver, entries=entries,
                           shown=entries[:MAX_JOB_SECTIONS], hidden=max(0, len(entries) - MAX_JOB_SECTIONS),
                           max_text_jobs=MAX_TEXT_JOBS)
    try:
        payload = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"template {used.name!r} did not give JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise ValueError(f"template {used.name!r} did not give a JSON object")
    return payload


def slack_payload(jobs: Sequence[JobFinding], *, notify_on: Severity) -> dict[str, Any]:
    """The webhook JSON announcing ``jobs`` as new findings: one job, or a digest of several."""
    if not jobs:
        raise ValueError("a Slack message needs at least one job")
    return message_payload(new_jobs(jobs, notify_on=notify_on))


def post_webhook(client: httpx.Client, url: str, payload: dict[str, Any]) -> None:
    """POST ``payload``; raises :class:`SendError` (retriable for 408/429/5xx and network errors).

    Error texts here may quote the URL (httpx does); the caller redacts them.
    """
    try:
        response = client.post(url, content=orjson.dumps(payload), headers={"Content-Type": MediaType.JSON})
    except httpx.TransportError as exc:
        raise SendError(f"{type(exc).__name__}: {exc}", retriable=True) from None
    if response.is_success:
        return
    status = response.status_code
    retry_after = _retry_after_s(response.headers.get("Retry-After"))
    body = one_line(response.text, 200)
    raise SendError(
        f"HTTP {status} {response.reason_phrase}: {body}",
        retriable=status in (408, 429) or status >= 500,
        retry_after_s=retry_after,
    )


def _retry_after_s(raw: str | None) -> float | None:
    try:
        return None if raw is None else max(0.0, float(raw))
    except ValueError:
        return None
