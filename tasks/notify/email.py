"""Email: a multipart/alternative message (text and HTML, the same facts) sent with smtplib.

The parts are the receiver's ``email_text_template`` and ``email_html_template`` (defaults
``templates/email.txt.j2`` and ``templates/email.html.j2``, :mod:`.templating`), given each entry as
:class:`EmailEntry`. Telemetry strings are made one-line
(:func:`~stormwatch.alerting.plain_text.one_line`) everywhere and HTML-escaped in the HTML part's
entries (an ``.html`` template is autoescaped too). Headers are built with ``email.policy.SMTP``,
which refuses CR/LF in a header value; subjects are one-line already, so a job id
cannot add a header. ``From`` is always set; the envelope recipients are exactly
the configured ``email_to``.
"""

from __future__ import annotations

import functools
import smtplib
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from html import escape

import jinja2
from markupsafe import Markup

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.messages import (
    Entry,
    EntryState,
    Escape,
    Message,
    day,
    headline,
    new_jobs,
    resolved_text,
    title,
)
from stormwatch.alerting.plain_text import one_line
from stormwatch.alerting.targets import SmtpTarget
from stormwatch.severity import Severity
from stormwatch.tasks.notify.delivery import SendError
from stormwatch.tasks.notify.templating import DEFAULT_EMAIL_HTML, DEFAULT_EMAIL_TEXT, load_template, render_template

MAX_SUBJECT_CHARS = 200


def _plain(text: object, limit: int = 300) -> str:
    return one_line(text, limit)


def _h(text: object, limit: int = 300) -> str:
    return Markup(escape(one_line(text, limit), quote=True))  # html.escape's entities, as before templates


def email_subject(message: Message) -> str:
    entries = message.entries
    if len(entries) == 1 and entries[0].state is not EntryState.RESOLVED:
        entry = entries[0]
        state = "still firing: " if entry.state is EntryState.STILL_FIRING else ""
        job = entry.job
        worst = max((*entry.extra, *job.indicators), key=lambda item: item.severity.level, default=None)
        cause = "" if worst is None else f": {worst.signal} on {worst.where}"
        attempt = "" if job.attempt is None else f" ({job.attempt.short})"
        subject = f"[stormwatch] {state}{job.verdict}: job {job.job_id}{cause}{attempt}"
    elif len(entries) == 1:
        subject = f"[stormwatch] {headline(entries[0], _plain)}"
    else:
        subject = "[stormwatch] " + title(message).removeprefix("Stormwatch: ")
    return one_line(subject, MAX_SUBJECT_CHARS)


@dataclass(frozen=True, kw_only=True)
class EmailFact:
    """One indicator or other fact of an entry: ``label`` (``Most severe``), ``where`` (``rank 3``),
    ``signal``, ``severity``, ``phase`` (None: none), ``when``, ``details`` (empty: none)."""

    label: str
    where: str
    signal: str
    severity: str
    phase: str | None
    when: str
    details: str


@dataclass(frozen=True, kw_only=True)
class EmailEntry:
    """One entry as an email template sees it, each telemetry string one line and cut (and, for the HTML
    part, HTML-escaped already, as markup): ``state`` (an :class:`EntryState` value: ``new``, ``still
    firing``, ``resolved``), ``since`` (its day), ``resolved`` (a resolution in words), ``job_id``,
    ``verdict``, ``summary``, ``attempt`` (which attempt, or None), ``missing_ranks`` (``2-3``, or
    empty) of ``expected_ranks``, ``report_url`` (or None; ``report_is_web``: an http(s)/file URL),
    ``facts`` (:class:`EmailFact`) and ``inhibited`` (the alerts folded into this one)."""

    state: str
    since: str
    resolved: str
    job_id: str
    verdict: str
    summary: str
    attempt: str | None
    missing_ranks: str
    expected_ranks: int | None
    report_url: str | None
    report_is_web: bool
    facts: tuple[EmailFact, ...]
    inhibited: tuple[str, ...]

    @classmethod
    def of(cls, entry: Entry, *, html: bool) -> EmailEntry:
        """``entry``'s view for the text part, or (``html``) for the HTML part: strings escaped, as markup."""
        esc: Escape = _h if html else _plain
        job = entry.job
        facts = tuple(EmailFact(label=esc(item.label, 100), where=esc(item.where, 100), signal=esc(item.signal, 120),
                                severity=item.severity.value,
                                phase=esc(item.phase_path, 200) if item.phase_path else None,
                                when=esc(item.when, 100), details=esc(item.details, 500) if item.details else "")
                      for item in (*job.indicators, *entry.extra))
        url = job.report_url
        return cls(state=entry.state.value, since=day(entry.since),
                   resolved=_resolved(entry, html=html),
                   job_id=esc(job.job_id, 200), verdict=esc(job.verdict, 20), summary=esc(job.summary, 300),
                   attempt=None if job.attempt is None else esc(job.attempt.description, 300),
                   missing_ranks=job.missing_text or "", expected_ranks=job.expected_ranks,
                   report_url=esc(url, 2000) if url else None,
                   report_is_web=url is not None and url.lower().startswith(("https://", "http://", "file://")),
                   facts=facts, inhibited=tuple(esc(line, 300) for line in entry.inhibited))


def _resolved(entry: Entry, *, html: bool) -> str:
    if entry.state is not EntryState.RESOLVED:
        return ""
    return Markup(resolved_text(entry, _h)) if html else resolved_text(entry, _plain)  # its parts escaped already


@dataclass(frozen=True)
class EmailTemplates:
    """A receiver's two email templates: the text/plain part and the text/html part (autoescaped)."""

    text: jinja2.Template
    html: jinja2.Template

    @classmethod
    def load(cls, *, text: str | None = None, html: str | None = None) -> EmailTemplates:
        """The templates at ``text`` and ``html`` (None: the default); ValueError naming a path that fails."""
        defaults = _defaults()
        return cls(text=defaults.text if text is None else load_template(text),
                   html=defaults.html if html is None else load_template(html))


@functools.cache
def _defaults() -> EmailTemplates:
    return EmailTemplates(text=load_template(DEFAULT_EMAIL_TEXT), html=load_template(DEFAULT_EMAIL_HTML))


def email_text(message: Message, templates: EmailTemplates | None = None) -> str:
    """The text/plain part: ``templates.text`` with ``title``, ``receiver``, ``entries`` (:class:`EmailEntry`)."""
    entries = [EmailEntry.of(entry, html=False) for entry in message.entries]
    return render_template((templates or _defaults()).text, title=title(message), receiver=message.receiver,
                           entries=entries)


def email_html(message: Message, templates: EmailTemplates | None = None) -> str:
    """The text/html part: the facts of :func:`email_text`, every telemetry string escaped (by
    :class:`EmailEntry`, and by autoescaping whatever else a template writes)."""
    entries = [EmailEntry.of(entry, html=True) for entry in message.entries]
    return render_template((templates or _defaults()).html, title=title(message), receiver=message.receiver,
                           entries=entries)


def build_alert_message(message: Message, *, sender: str, recipients: Sequence[str], now: datetime,
                        templates: EmailTemplates | None = None) -> EmailMessage:
    """The email of one message (``templates``: the receiver's, None: the defaults); raises ValueError if a
    header value is unsafe or a template fails (naming it)."""
    if not message.entries:
        raise ValueError("an email needs at least one entry")
    email = EmailMessage(policy=policy.SMTP)
    email["Subject"] = email_subject(message)
    email["From"] = sender
    email["To"] = ", ".join(recipients)
    email["Date"] = format_datetime(now)
    email["Message-ID"] = make_msgid(domain="stormwatch.invalid")
    email["Auto-Submitted"] = "auto-generated"
    email.set_content(email_text(message, templates))
    email.add_alternative(email_html(message, templates), subtype="html")
    return email


def build_message(
    jobs: Sequence[JobFinding], *, notify_on: Severity, sender: str, recipients: Sequence[str], now: datetime
) -> EmailMessage:
    """The email announcing ``jobs`` as new findings (one job or a digest)."""
    if not jobs:
        raise ValueError("an email needs at least one job")
    return build_alert_message(new_jobs(jobs, notify_on=notify_on), sender=sender, recipients=recipients, now=now)


def send_email(
    target: SmtpTarget, message: EmailMessage, *, sender: str, recipients: Sequence[str], timeout_s: float
) -> None:
    """Connect (smtps, or smtp with STARTTLS when asked), log in when a user is given, send.

    Raises :class:`SendError`: retriable for network failures and 4xx replies; not for
    refused credentials, recipients or certificates, nor 5xx replies. A login over plain
    ``smtp://`` without STARTTLS is allowed (a local relay) but sends the password in clear.
    """
    context = ssl.create_default_context()
    try:
        if target.implicit_tls:
            client: smtplib.SMTP = smtplib.SMTP_SSL(target.host, target.port, timeout=timeout_s, context=context)
        else:
            client = smtplib.SMTP(target.host, target.port, timeout=timeout_s)
        with client:
            if target.starttls:
                client.starttls(context=context)
            if target.username is not None:
                client.login(target.username, target.password or "")
            client.send_message(message, from_addr=sender, to_addrs=list(recipients))
    except (smtplib.SMTPAuthenticationError, smtplib.SMTPRecipientsRefused, smtplib.SMTPNotSupportedError) as exc:
        raise SendError(f"{type(exc).__name__}: {exc}", retriable=False) from None
    except smtplib.SMTPResponseException as exc:
        raise SendError(f"{type(exc).__name__}: {exc}", retriable=400 <= exc.smtp_code < 500) from None
    except ssl.SSLCertVerificationError as exc:
        raise SendError(f"{type(exc).__name__}: {exc}", retriable=False) from None
    except (OSError, smtplib.SMTPException) as exc:
        raise SendError(f"{type(exc).__name__}: {exc}", retriable=True) from None
