"""Email: a multipart/alternative message (text and HTML, the same facts) sent with smtplib.

Telemetry strings are made one-line (:func:`~stormwatch.tasks.notify.findings.one_line`) everywhere
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

from stormwatch.severity import Severity
from stormwatch.tasks.notify.delivery import SendError
from stormwatch.tasks.notify.findings import JobFinding, one_line
from stormwatch.tasks.notify.settings import SmtpTarget

MAX_SUBJECT_CHARS = 200


def email_subject(jobs: Sequence[JobFinding], *, notify_on: Severity) -> str:
    if len(jobs) == 1:
        job = jobs[0]
        worst = max(job.indicators, key=lambda item: item.severity.level, default=None)
        cause = "" if worst is None else f": {worst.signal} on {worst.where}"
        subject = f"[stormwatch] {job.verdict}: job {job.job_id}{cause}"
    else:
        subject = f"[stormwatch] {len(jobs)} jobs with {notify_on.value} GPU-memory findings"
    return one_line(subject, MAX_SUBJECT_CHARS)


def email_text(jobs: Sequence[JobFinding], *, notify_on: Severity) -> str:
    """The text/plain part: one block per job."""
    out = [f"Stormwatch found {notify_on.value} GPU-memory findings in {len(jobs)} job(s).", ""]
    for job in jobs:
        out.append(f"Job: {one_line(job.job_id, 200)}")
        out.append(f"Verdict: {one_line(job.verdict, 20)} - {one_line(job.summary, 300)}")
        if job.missing_text:
            out.append(f"Missing ranks: {job.missing_text} of {job.expected_ranks}")
        if job.report_url:
            out.append(f"Report: {one_line(job.report_url, 2000)}")
        for item in job.indicators:
            phase = f", phase {one_line(item.phase_path, 200)}" if item.phase_path else ""
            signal = one_line(item.signal, 120)
            out.append(f"{item.label}: {item.where}, {signal} ({item.severity.value}){phase}, {item.when}")
            if item.details:
                out.append(f"    {one_line(item.details, 500)}")
        out.append("")
    return "\n".join(out)


def _h(text: object, limit: int = 300) -> str:
    return escape(one_line(text, limit), quote=True)


def email_html(jobs: Sequence[JobFinding], *, notify_on: Severity) -> str:
    """The text/html part: the facts of :func:`email_text`, every telemetry string escaped."""
    parts = [
        '<!DOCTYPE html><html><body style="font-family: sans-serif">',
        f"<p>Stormwatch found {notify_on.value} GPU-memory findings in {len(jobs)} job(s).</p>",
    ]
    for job in jobs:
        rows = [("Verdict", f"{_h(job.verdict, 20)} &ndash; {_h(job.summary)}")]
        if job.missing_text:
            rows.append(("Missing ranks", f"{job.missing_text} of {job.expected_ranks}"))
        if job.report_url:
            url = _h(job.report_url, 2000)
            is_web = job.report_url.lower().startswith(("https://", "http://", "file://"))
            rows.append(("Report", f'<a href="{url}">open report</a>' if is_web else url))
        for item in job.indicators:
            phase = f", phase <code>{_h(item.phase_path, 200)}</code>" if item.phase_path else ""
            fact = f"{item.where}, <code>{_h(item.signal, 120)}</code> ({item.severity.value}){phase}, {item.when}"
            if item.details:
                fact += f"<br><small>{_h(item.details, 500)}</small>"
            rows.append((item.label, fact))
        cells = "".join(f'<tr><th align="left">{label}</th><td>{value}</td></tr>' for label, value in rows)
        parts.append(f"<h3>Job <code>{_h(job.job_id, 200)}</code></h3><table>{cells}</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def build_message(
    jobs: Sequence[JobFinding], *, notify_on: Severity, sender: str, recipients: Sequence[str], now: datetime
) -> EmailMessage:
    """The message for one job or a digest; raises ValueError if a header value is unsafe."""
    if not jobs:
        raise ValueError("an email needs at least one job")
    message = EmailMessage(policy=policy.SMTP)
    message["Subject"] = email_subject(jobs, notify_on=notify_on)
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    message["Date"] = format_datetime(now)
    message["Message-ID"] = make_msgid(domain="stormwatch.invalid")
    message["Auto-Submitted"] = "auto-generated"
    message.set_content(email_text(jobs, notify_on=notify_on))
    message.add_alternative(email_html(jobs, notify_on=notify_on), subtype="html")
    return message


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
