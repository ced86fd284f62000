"""How alerts behave over time and where the routes come from: one frozen policy, part of the notify settings.

``repeat_interval``: a still-firing alert is sent again to a target only when at least this long
has passed since it was last sent there (default 7 days) and an audit observes it again.
``notify_resolved``: send a message when an alert resolves (a receiver's ``send_resolved`` wins).
``group_above``: a receiver with more due alerts than this in one audit gets one message listing
them all instead of one per job (default 3). ``routes_file``: a local TOML file (else
``reports/routes.toml`` in storage, when there). ``job_name_pattern``: as the audit's (job names
group runs into one alert). ``claim_timeout``: how long a send another audit claimed counts as in
flight before it is tried again (the audit lease's lifetime).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import ConfigDict, Field, TypeAdapter, field_validator
from pydantic.dataclasses import dataclass

from stormwatch.history.job_names import JobNamePattern

DEFAULT_REPEAT_INTERVAL = timedelta(days=7)
DEFAULT_GROUP_ABOVE = 3


@dataclass(frozen=True, config=ConfigDict(hide_input_in_errors=True))
class AlertPolicy:
    repeat_interval: timedelta = DEFAULT_REPEAT_INTERVAL
    notify_resolved: bool = False
    group_above: Annotated[int, Field(ge=0)] = DEFAULT_GROUP_ABOVE
    routes_file: str | None = None
    job_name_pattern: str | None = None
    claim_timeout: timedelta = timedelta(minutes=30)

    @field_validator("repeat_interval", "claim_timeout")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("repeat interval and claim timeout must be positive")
        return value

    @field_validator("job_name_pattern")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None:
            JobNamePattern(value)
        return value

    def job_names(self) -> JobNamePattern:
        return JobNamePattern(self.job_name_pattern) if self.job_name_pattern else JobNamePattern()


_DURATION_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
_ISO_DURATION = TypeAdapter(timedelta)


def parse_duration(raw: object) -> timedelta:
    """``7d``, ``36h``, ``90m``, ``3600s``, an ISO 8601 duration (``P7D``, how a deployment's JSON holds
    it), a timedelta or seconds as a number, as a positive timedelta; ValueError otherwise."""
    if isinstance(raw, timedelta):
        value = raw
    elif isinstance(raw, int | float) and not isinstance(raw, bool):
        value = timedelta(seconds=raw)
    else:
        text = str(raw).strip()
        unit = _DURATION_UNITS.get(text[-1:].lower()) if text[:-1].replace(".", "", 1).isdigit() else None
        number = text.replace(".", "", 1).isdigit()
        try:
            if unit or number:
                value = timedelta(**{unit: float(text[:-1])}) if unit else timedelta(seconds=float(text))
            else:
                value = _ISO_DURATION.validate_python(text)
        except (ValueError, OverflowError):
            raise ValueError(f"{text[:20]!r} is not a duration (7d, 36h, 90m, 3600s, P7D)") from None
    if value <= timedelta(0):
        raise ValueError(f"a duration must be positive, got {raw!s:.20}")
    return value
