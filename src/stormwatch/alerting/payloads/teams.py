"""Microsoft Teams through a Workflows webhook: a message whose one attachment is an Adaptive Card 1.4.

The card holds the message's title, the rendered text template, one fact per alert (at most
:data:`MAX_FACTS`) and a button opening the first alert's report. Telemetry strings were made one
line by the notices and the text template; Teams renders a subset of Markdown in TextBlocks and
facts, so every character that subset gives a meaning is escaped (:func:`plain`): a job named
``**x**`` or ``[x](http://...)`` shows as written, never as bold text or a link.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stormwatch.alerting.messages import Message, title
from stormwatch.alerting.notices import AlertNotice, NoticeState

CARD_CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
MAX_FACTS = 20
#: The characters Teams' Markdown subset gives a meaning anywhere in a line (emphasis, links, code).
_MARKDOWN = frozenset("\\*_[]()~`")
#: What starts a list or a heading when it leads a line.
_LEADING = ("-", "+", "#", ">")


def plain(text: str) -> str:
    """``text`` with each Markdown character backslash-escaped (CommonMark's escapes, which Teams
    honours), and a leading list or heading marker too, so Teams shows it as written."""
    escaped = "".join(f"\\{char}" if char in _MARKDOWN else char for char in text)
    stripped = escaped.lstrip()
    indent = escaped[: len(escaped) - len(stripped)]
    if stripped.startswith(_LEADING):
        return f"{indent}\\{stripped}"
    digits = len(stripped) - len(stripped.lstrip("0123456789"))
    if digits and stripped[digits : digits + 1] in (".", ")"):  # "1. x" would start a numbered list
        return f"{indent}{stripped[:digits]}\\{stripped[digits:]}"
    return escaped


def teams_payload(message: Message, notices: Sequence[AlertNotice], *, text: str) -> dict[str, Any]:
    """The Workflows webhook body for one message; ``text``: the rendered text template."""
    if not notices:
        raise ValueError("a Teams message needs at least one alert")
    facts = [{"title": f"{notice.state.value} ({notice.severity.value})" if notice.state is NoticeState.FIRING
              else "resolved", "value": plain(notice.summary)} for notice in notices[:MAX_FACTS]]
    if len(notices) > MAX_FACTS:
        facts.append({"title": "more", "value": f"{len(notices) - MAX_FACTS} more alert(s)"})
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": plain(title(message)), "weight": "Bolder", "size": "Medium", "wrap": True},
        {"type": "TextBlock", "text": plain(text), "wrap": True},
        {"type": "FactSet", "facts": facts},
    ]
    card: dict[str, Any] = {"$schema": CARD_SCHEMA, "type": "AdaptiveCard", "version": "1.4", "body": body}
    link = next((notice.http_report_url for notice in notices if notice.http_report_url), None)
    if link:
        card["actions"] = [{"type": "Action.OpenUrl", "title": "Open report", "url": link}]
    return {"type": "message", "attachments": [{"contentType": CARD_CONTENT_TYPE, "contentUrl": None,
                                                 "content": card}]}
