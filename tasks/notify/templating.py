"""Message text from jinja2 templates: the defaults under ``templates/``, or a receiver's own files.

A receiver may name ``summary_template`` (one alert, one line) and ``text_template`` (one message)
for its integrations, ``slack_template`` (the Block Kit message) and ``email_text_template`` /
``email_html_template`` (the two parts of an email) in routes.toml: local paths, read when the
receiver's first message is sent. Templates run in jinja2's sandbox with undefined names an error; a
template whose name ends ``.html``/``.htm``/``.xml`` (or those plus ``.j2``) is autoescaped, and in
one whose name ends ``.json``/``.json.j2`` every ``{{ ... }}`` is written as a JSON value (a string
quoted and escaped), so no value can change the document's structure. A summary is made one line
and cut to 1,000 characters. A template that cannot be read or rendered makes the receiver's target
unusable for this audit (its messages are recorded failed, the error naming the template's path,
and retried by the next), never the audit fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import jinja2
import orjson
from jinja2.sandbox import SandboxedEnvironment
from markupsafe import Markup

from stormwatch.alerting.messages import Message, title
from stormwatch.alerting.notices import AlertNotice
from stormwatch.alerting.plain_text import one_line
from stormwatch.alerting.receivers import Integrations

DEFAULTS = Path(__file__).parent / "templates"
DEFAULT_SUMMARY = DEFAULTS / "summary.txt.j2"
DEFAULT_TEXT = DEFAULTS / "text.txt.j2"
DEFAULT_SLACK = DEFAULTS / "slack.json.j2"
DEFAULT_EMAIL_TEXT = DEFAULTS / "email.txt.j2"
DEFAULT_EMAIL_HTML = DEFAULTS / "email.html.j2"
MAX_SUMMARY_CHARS = 1000
MAX_TEXT_CHARS = 20_000
_ESCAPED = ("html", "htm", "xml", "html.j2", "htm.j2", "xml.j2")
_JSON = (".json", ".json.j2")


def _json_value(value: object) -> object:
    """What a ``{{ ... }}`` of a JSON template writes: ``value`` as JSON (``|tojson``'s output as it is)."""
    if isinstance(value, Markup):
        return value
    if isinstance(value, jinja2.Undefined):
        return str(value)  # StrictUndefined: raises UndefinedError naming what is undefined
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def load_template(path: str | Path) -> jinja2.Template:
    """The template at ``path`` (its file name chooses autoescaping); ValueError naming the path, never
    its content, when it cannot be read or compiled."""
    source = Path(path)
    environment = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(source.parent)),
        autoescape=jinja2.select_autoescape(enabled_extensions=_ESCAPED, default_for_string=False, default=False),
        undefined=jinja2.StrictUndefined,
        finalize=_json_value if source.name.endswith(_JSON) else None,
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
        return tuple(replace(notice, summary=one_line(render_template(self.summary, alert=notice), MAX_SUMMARY_CHARS)
                             or notice.summary) for notice in notices)

    def message_text(self, message: Message, notices: Sequence[AlertNotice]) -> str:
        """The message's text (``notices`` summarized already)."""
        text = render_template(self.text, title=title(message), receiver=message.receiver, alerts=list(notices))
        return text.strip()[:MAX_TEXT_CHARS]


def render_template(template: jinja2.Template, **context: object) -> str:
    """``template`` rendered; ValueError naming the template (its path's file name) when it fails."""
    try:
        return template.render(**context)
    except (jinja2.TemplateError, TypeError) as exc:  # TypeError: a value a JSON template cannot write
        raise ValueError(f"template {template.name!r} failed: {type(exc).__name__}: {str(exc)[:200]}") from None
