"""Silences: matchers, an expiry and a reason; a silenced alert is recorded, never sent.

A matcher is ``name=value`` or ``name!=value``; names: ``job`` (the run's job id), ``job_name``,
``signal`` and ``host`` (values are globs, ``*`` and ``?``), ``kind`` and ``severity`` (exact
values of :class:`~.kinds.AlertKind` / :class:`~stormwatch.severity.Severity`). A silence
holds when all its matchers do; it is active until ``until`` (UTC) or until expired by hand
(``expired_at``); an expired silence is kept for the record and ignored.

``reports/silences.json`` (written by ``stormwatch silence``, one silence per line)::

    {"version": 1, "silences": [
    {"id": "s-5f1c09a2", "matchers": ["job=llama-*", "kind=regression"], "until": "2026-12-09T00:00:00+00:00",
     "reason": "known leak, fix in 2.4", "created_at": "...", "created_by": "ana", "expired_at": null}
    ]}

A silence's id is ``s-`` and 8 hex digits of a digest of its matchers, expiry and reason: the
same ``add`` twice gives the same silence, not two. Reading raises
:class:`~.config_file.ConfigError` naming the line of the silence at fault.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any

from stormwatch.alerting.config_file import ConfigError
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.observations import Labels
from stormwatch.severity import Severity

_MATCHER = re.compile(r"^\s*([a-z_]+)\s*(!=|=)\s*(.*?)\s*$", re.DOTALL)
_ARRAY = re.compile(r'"silences"\s*:\s*\[')
MAX_REASON_CHARS = 500


class MatcherName(StrEnum):
    JOB = "job"
    JOB_NAME = "job_name"
    KIND = "kind"
    SEVERITY = "severity"
    SIGNAL = "signal"
    HOST = "host"


_EXACT = {MatcherName.KIND: [item.value for item in AlertKind], MatcherName.SEVERITY: [item.value for item in Severity]}


@dataclass(frozen=True, order=True)
class SilenceMatcher:
    name: MatcherName
    negate: bool
    value: str

    @classmethod
    def parse(cls, text: str) -> SilenceMatcher:
        """``job=llama-*``, ``kind!=regression``...; ValueError saying what is wrong."""
        found = _MATCHER.match(text)
        if not found:
            raise ValueError(f"matcher {text[:80]!r} is not name=value or name!=value")
        raw_name, operator, value = found.groups()
        try:
            name = MatcherName(raw_name)
        except ValueError:
            known = ", ".join(item.value for item in MatcherName)
            raise ValueError(f"matcher {text[:80]!r}: unknown name {raw_name!r} (known: {known})") from None
        if not value or any(ord(ch) < 32 for ch in value):
            raise ValueError(f"matcher {text[:80]!r}: the value is empty or holds control characters")
        if name in _EXACT:
            value = value.lower()
            if value not in _EXACT[name]:
                raise ValueError(f"matcher {text[:80]!r}: {name.value} is one of {', '.join(_EXACT[name])}")
        return cls(name, operator == "!=", value)

    @property
    def text(self) -> str:
        return f"{self.name.value}{'!=' if self.negate else '='}{self.value}"

    def matches(self, labels: Labels) -> bool:
        actual = {MatcherName.JOB: labels.job_id, MatcherName.JOB_NAME: labels.job_name,
                  MatcherName.KIND: labels.kind.value, MatcherName.SEVERITY: labels.severity.value,
                  MatcherName.SIGNAL: labels.signal, MatcherName.HOST: labels.host or ""}[self.name]
        equal = actual == self.value if self.name in _EXACT else fnmatchcase(actual, self.value)
        return equal != self.negate


@dataclass(frozen=True)
class Silence:
    """Times are aware UTC datetimes; ``expired_at`` set when expired by hand."""

    id: str
    matchers: tuple[SilenceMatcher, ...]
    until: datetime
    reason: str
    created_at: datetime
    created_by: str | None = None
    expired_at: datetime | None = None

    def active(self, now: datetime) -> bool:
        return self.expired_at is None and now < self.until

    def matches(self, labels: Labels) -> bool:
        return all(matcher.matches(labels) for matcher in self.matchers)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "matchers": [matcher.text for matcher in self.matchers],
                "until": self.until.isoformat(), "reason": self.reason, "created_at": self.created_at.isoformat(),
                "created_by": self.created_by,
                "expired_at": None if self.expired_at is None else self.expired_at.isoformat()}


def silence_id(matchers: tuple[SilenceMatcher, ...], until: datetime, reason: str) -> str:
    canonical = json.dumps([sorted(matcher.text for matcher in matchers), until.isoformat(), reason])
    return "s-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:8]


def parse_until(text: str) -> datetime:
    """``2026-12-08`` (the end of that day, UTC) or an ISO 8601 time (naive: UTC); ValueError otherwise."""
    raw = text.strip()
    try:
        day = date.fromisoformat(raw)
    except ValueError:
        pass
    else:
        return datetime.combine(day + timedelta(days=1), time(), tzinfo=UTC)
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(f"--until {raw[:40]!r} is not a date (2026-12-08) or an ISO 8601 time") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _utc(text: Any, what: str) -> datetime:
    moment = datetime.fromisoformat(str(text))
    if moment.tzinfo is None:
        raise ValueError(f"{what} has no time zone")
    return moment.astimezone(UTC)


def _silence(item: Any) -> Silence:
    if not isinstance(item, Mapping):
        raise ValueError("a silence must be an object")
    unknown = set(item) - {"id", "matchers", "until", "reason", "created_at", "created_by", "expired_at"}
    if unknown:
        raise ValueError(f"unknown member {sorted(unknown)[0][:40]!r}")
    raw = item.get("matchers")
    if not isinstance(raw, list) or not raw or not all(isinstance(text, str) for text in raw):
        raise ValueError("matchers must be a non-empty list of name=value strings")
    identifier = item.get("id")
    if not isinstance(identifier, str) or not re.fullmatch(r"s-[0-9a-f]{8}", identifier):
        raise ValueError("id must be s- and 8 hex digits")
    for name in ("until", "created_at"):
        if not isinstance(item.get(name), str):
            raise ValueError(f"{name} must be an ISO 8601 time")
    expired, by = item.get("expired_at"), item.get("created_by")
    return Silence(
        id=identifier, matchers=tuple(SilenceMatcher.parse(text) for text in raw),
        until=_utc(item["until"], "until"), reason=str(item.get("reason") or ""),
        created_at=_utc(item["created_at"], "created_at"), created_by=None if by is None else str(by),
        expired_at=None if expired is None else _utc(expired, "expired_at"))


def _element_lines(text: str) -> list[int]:
    """The line each element of the ``silences`` array starts on (best effort; [] when not found)."""
    found = _ARRAY.search(text)
    if not found:
        return []
    decoder, index, lines = json.JSONDecoder(), found.end(), []
    while index < len(text):
        while index < len(text) and text[index] in " \t\r\n,":
            index += 1
        if index >= len(text) or text[index] == "]":
            break
        lines.append(text.count("\n", 0, index) + 1)
        try:
            _, index = decoder.raw_decode(text, index)
        except ValueError:
            break
    return lines


@dataclass(frozen=True)
class SilenceBook:
    """Every silence, active or not, in the order they were added."""

    silences: tuple[Silence, ...] = ()

    def find(self, identifier: str) -> Silence | None:
        return next((item for item in self.silences if item.id == identifier), None)

    def silencing(self, labels: Labels, now: datetime) -> Silence | None:
        """The first active silence that matches ``labels``."""
        return next((item for item in self.silences if item.active(now) and item.matches(labels)), None)

    def add(self, silence: Silence) -> tuple[SilenceBook, bool]:
        """The book with ``silence`` (False: an active one with its id is there already)."""
        existing = self.find(silence.id)
        if existing is not None and existing.expired_at is None:
            return self, False
        kept = tuple(item for item in self.silences if item.id != silence.id)
        return SilenceBook((*kept, silence)), True

    def expire(self, identifier: str, now: datetime) -> SilenceBook:
        """The book with silence ``identifier`` expired now; KeyError when there is none."""
        if self.find(identifier) is None:
            raise KeyError(identifier)
        return SilenceBook(tuple(replace(item, expired_at=item.expired_at or now) if item.id == identifier else item
                                 for item in self.silences))

    def to_bytes(self) -> bytes:
        body = ",\n".join(json.dumps(item.to_json(), ensure_ascii=False) for item in self.silences)
        return (f'{{"version": 1, "silences": [\n{body}\n]}}\n' if body else '{"version": 1, "silences": []}\n'
                ).encode("utf-8")


def read_silences(data: bytes | None, *, file: str) -> SilenceBook:
    """The silences of a silences.json (None or empty: none); raises :class:`ConfigError`."""
    if not data or not data.strip():
        return SilenceBook()
    try:
        text = data.decode("utf-8")
        document = json.loads(text)
    except UnicodeDecodeError:
        raise ConfigError(file, None, "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(file, exc.lineno, f"not valid JSON: {exc.msg}") from None
    if not isinstance(document, dict) or not isinstance(document.get("silences"), list):
        raise ConfigError(file, 1, 'expected {"version": 1, "silences": [...]}')
    if document.get("version", 1) != 1:
        raise ConfigError(file, 1, f"unknown version {str(document.get('version'))[:20]!r} (this reads 1)")
    lines = _element_lines(text)
    silences = []
    for number, item in enumerate(document["silences"]):
        try:
            silences.append(_silence(item))
        except (ValueError, TypeError) as exc:
            line = lines[number] if number < len(lines) else None
            raise ConfigError(file, line, f"silence {number + 1}: {exc}") from None
    return SilenceBook(tuple(silences))
