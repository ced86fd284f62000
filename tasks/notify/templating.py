"""Message text from jinja2 templates: the defaults under ``templates/``, or a receiver's own files.

A receiver may name ``summary_template`` (one alert, one line) and ``text_template`` (one message)
in routes.toml: local paths, read when the receiver's first message is sent. Templates run in
jinja2's sandbox with undefined names an error; a template whose name ends ``.html``/``.htm``/``.xml``
(or those plus ``.j2``) is autoescaped. A summary is made one line and cut to 1,000 characters.
A template that cannot be read or rendered makes the receiver's target unusable for this audit
(its messages are recorded failed and retried by the next), never the audit fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from stormwatch.alerting.messages import Message, title
from stormwatch.alerting.notices import AlertNotice
from stormwatch.alerting.plain_text import one_line
from stormwatch.alerting.receivers import Integrations

DEFAULTS = Path(__file__).parent / "templates"
DEFAULT_SUMMARY = DEFAULTS / "summary.txt.j2"
DEFAULT_TEXT = DEFAULTS / "text.txt.j2"
MAX_SUMMARY_CHARS = 1000
MAX_TEXT_CHARS = 20_000
_ESCAPED = ("html", "htm", "xml", "html.j2", "htm.j2", "xml.j2")


def load_template(path: str | Path) -> jinja2.Template:
    """The template at ``path`` (its file name chooses autoescaping); ValueError naming the path, never
    its content, when it cannot be read or compiled."""
    source = Path(path)
    environment = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(source.parent)),
        autoescape=jinja2.select_autoescape(enabled_extensions=_ESCAPED, default_for_string=False, default=False),
        undefined=jinja2.StrictUndefined,
    )
    try:
        return environment.get_template(source.name)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"template {str(path)[:200]!r} line {exc.lineno}: {exc.message}") from None
    except (OSError, UnicodeDecodeError, jinja2.TemplateError) as exc:
        raise ValueError(f"template {str(path)[:200]!r} cannot be read: {type(exc).__name__}") from None


@dataclass(frozen=True)
class MessageTexts:
    """A receiver's two templates, loaded."""

    summary: jinja2.Template
    text: jinja2.Template

    @classmethod
    def of(cls, integrations: Integrations) -> MessageTexts:
        return cls(summary=load_template(integrations.summary_template or DEFAULT_SUMMARY),
                   text=load_template(integrations.text_template or DEFAULT_TEXT))

    def summarized(self, notices: Sequence[AlertNotice]) -> tuple[AlertNotice, ...]:
        """``notices`` with their summaries rendered (raises ValueError when the template fails)."""
        return tuple(replace(notice, summary=one_line(_render(self.summary, alert=notice), MAX_SUMMARY_CHARS)
                             or notice.summary) for notice in notices)

    def message_text(self, message: Message, notices: Sequence[AlertNotice]) -> str:
        """The message's text (``notices`` summarized already)."""
        text = _render(self.text, title=title(message), receiver=message.receiver, alerts=list(notices))
        return text.strip()[:MAX_TEXT_CHARS]


def _render(template: jinja2.Template, **context: object) -> str:
    try:
        return template.render(**context)
    except jinja2.TemplateError as exc:
        raise ValueError(f"template {template.name!r} failed: {type(exc).__name__}: {str(exc)[:200]}") from None
