"""Email: a multipart/alternative message (text and HTML, the same facts) sent with smtplib.

Telemetry strings are made one-line (:func:`~stormwatch.alerting.plain_text.one_line`) everywhere
and HTML-escaped in the HTML part. Headers are built with ``email.policy.SMTP``,
which refuses CR/LF in a header value; subjects are one-line already, so a job id
cannot add a header. ``From`` is always set; the envelope recipients are exactly
the configured ``email_to``.
"""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Sequence
from datetime import datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from html import escape

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.messages import Entry, EntryState, Message, day, headline, new_jobs, resolved_text, title
from stormwatch.alerting.plain_text import one_line
from stormwatch.alerting.targets import SmtpTarget
from stormwatch.severity import Severity
from stormwatch.tasks.notify.delivery import SendError

MAX_SUBJECT_CHARS = 200


def _plain(text: object, limit: int = 300) -> str:
    return one_line(text, limit)


def _h(text: object, limit: int = 300) -> str:
    return escape(one_line(text, limit), quote=True)


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


def _facts_text(entry: Entry) -> list[str]:
    job = entry.job
    if entry.state is EntryState.RESOLVED:
        out = [f"Resolved: {resolved_text(entry, _plain)}"]
        return out + ([f"Last report: {one_line(job.report_url, 2000)}"] if job.report_url else [])
    out = [f"Still firing since {day(entry.since)}"] if entry.state is EntryState.STILL_FIRING else []
    out.append(f"Job: {one_line(job.job_id, 200)}")
    out.append(f"Verdict: {one_line(job.verdict, 20)} - {one_line(job.summary, 300)}")
    if job.attempt is not None:
        out.append(f"From: {one_line(job.attempt.description, 300)}")
    if job.missing_text:
        out.append(f"Missing ranks: {job.missing_text} of {job.expected_ranks}")
    if job.report_url:
        out.append(f"Report: {one_line(job.report_url, 2000)}")
    for item in (*job.indicators, *entry.extra):
        phase = f", phase {one_line(item.phase_path, 200)}" if item.phase_path else ""
        signal = one_line(item.signal, 120)
        out.append(f"{item.label}: {item.where}, {signal} ({item.severity.value}){phase}, {item.when}")
        if item.details:
            out.append(f"    {one_line(item.details, 500)}")
    out.extend(f"Inhibited: {one_line(line, 300)}" for line in entry.inhibited)
    return out


def email_text(message: Message) -> str:
    """The text/plain part: one block per entry."""
    out = [f"{title(message)}.", ""]
    for entry in message.entries:
        out += [*_facts_text(entry), ""]
    return "\n".join(out)


def _facts_html(entry: Entry) -> str:
    job = entry.job
    rows: list[tuple[str, str]] = []
    if entry.state is EntryState.RESOLVED:
        rows.append(("Resolved", resolved_text(entry, _h)))
    else:
        if entry.state is EntryState.STILL_FIRING:
            rows.append(("Still firing", f"since {day(entry.since)}"))
        rows.append(("Verdict", f"{_h(job.verdict, 20)} &ndash; {_h(job.summary)}"))
        if job.attempt is not None:
            rows.append(("From", _h(job.attempt.description)))
        if job.missing_text:
            rows.append(("Missing ranks", f"{job.missing_text} of {job.expected_ranks}"))
    if job.report_url:
        url = _h(job.report_url, 2000)
        is_web = job.report_url.lower().startswith(("https://", "http://", "file://"))
        rows.append(("Report", f'<a href="{url}">open report</a>' if is_web else url))
    if entry.state is not EntryState.RESOLVED:
        for item in (*job.indicators, *entry.extra):
            phase = f", phase <code>{_h(item.phase_path, 200)}</code>" if item.phase_path else ""
            fact = f"{item.where}, <code>{_h(item.signal, 120)}</code> ({item.severity.value}){phase}, {item.when}"
            if item.details:
                fact += f"<br><small>{_h(item.details, 500)}</small>"
            rows.append((item.label, fact))
        rows.extend(("Inhibited", _h(line)) for line in entry.inhibited)
    cells = "".join(f'<tr><th align="left">{label}</th><td>{value}</td></tr>' for label, value in rows)
    return f"<h3>Job <code>{_h(job.job_id, 200)}</code></h3><table>{cells}</table>"


def email_html(message: Message) -> str:
    """The text/html part: the facts of :func:`email_text`, every telemetry string escaped."""
    parts = ['<!DOCTYPE html><html><body style="font-family: sans-serif">', f"<p>{escape(title(message))}.</p>"]
    parts += [_facts_html(entry) for entry in message.entries]
    parts.append("</body></html>")
    return "\n".join(parts)


def build_alert_message(message: Message, *, sender: str, recipients: Sequence[str], now: datetime) -> EmailMessage:
    """The email of one message; raises ValueError if a header value is unsafe."""
    if not message.entries:
        raise ValueError("an email needs at least one entry")
    email = EmailMessage(policy=policy.SMTP)
    email["Subject"] = email_subject(message)
    email["From"] = sender
    email["To"] = ", ".join(recipients)
    email["Date"] = format_datetime(now)
    email["Message-ID"] = make_msgid(domain="stormwatch.invalid")
    email["Auto-Submitted"] = "auto-generated"
    email.set_content(email_text(message))
    email.add_alternative(email_html(message), subtype="html")
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
