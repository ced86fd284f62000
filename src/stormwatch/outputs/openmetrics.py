"""The OpenMetrics text format (1.0.0), as far as stormwatch writes it: gauge families, rendered.

A :class:`Family` is one metric family: a name, a help text, a unit, and its samples (label
values and a number). :func:`render` writes families as OpenMetrics text: per family
``# TYPE``, ``# UNIT`` (when it has one) and ``# HELP``, then its samples, then ``# EOF``.
Pure: no IO, no clock. Its media type: ``MediaType.OPENMETRICS``
(:mod:`stormwatch.outputs.media_types`).

Only gauges are written, on purpose: every value is a state as of the audit (a count of jobs, a
peak in bytes), not a running total, and a gauge is read the same way by an OpenMetrics parser,
by Prometheus's classic text parser and by the Pushgateway (which knows no ``# UNIT`` or
``# EOF``, and skips them as comments). Sample timestamps are never written: the scraper stamps
the samples, and ``stormwatch_audit_timestamp_seconds`` says when the audit ran.

Invariants, checked when a family is built: names match ``[a-zA-Z_:][a-zA-Z0-9_:]*`` (label names
``[a-zA-Z_][a-zA-Z0-9_]*``, none starting with ``__``); a family with a unit has a name ending in
``_<unit>``; every sample of a family has the family's label names, and no two the same values;
values are finite. Label values may hold any text: they are escaped (``\\``, ``"``, newline).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
#: Suffixes OpenMetrics keeps for the samples of counters, histograms and summaries: no gauge ends so.
_RESERVED_SUFFIXES = ("_total", "_created", "_bucket", "_count", "_sum", "_gcount", "_gsum", "_info")


class Unit(StrEnum):
    """The base units stormwatch's metrics are in (OpenMetrics: the name ends with ``_<unit>``)."""

    BYTES = "bytes"
    BYTE_SECONDS = "byte_seconds"  # memory held over time (bytes × seconds): promtool's base units for GiB·hours
    RATIO = "ratio"
    SECONDS = "seconds"


class MetricsFormatError(ValueError):
    """A family that the format cannot hold: a bad name, a label set that does not fit, a value not finite."""


def escape_label_value(value: str) -> str:
    """``value`` as it goes between the quotes of a label: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """``text`` as it goes after ``# HELP name``: backslash, double quote and newline escaped."""
    return escape_label_value(text)


def format_value(value: float) -> str:
    """A sample value: an integer without a fraction (``3``, ``85899345920``), else Python's shortest repr."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


@dataclass(frozen=True)
class Sample:
    """One value of a family; ``labels``: (name, value) pairs in the family's label order."""

    labels: tuple[tuple[str, str], ...]
    value: float


@dataclass(frozen=True)
class Family:
    """A gauge family: ``name`` (ending in ``_<unit>`` when ``unit`` is set), ``help`` (one line, what it
    means and in which unit), ``label_names`` every sample carries in that order, and ``samples``."""

    name: str
    help: str
    label_names: tuple[str, ...] = ()
    unit: Unit | None = None
    samples: tuple[Sample, ...] = ()

    def __post_init__(self) -> None:
        if not _METRIC_NAME.fullmatch(self.name):
            raise MetricsFormatError(f"metric name {self.name!r} does not match [a-zA-Z_:][a-zA-Z0-9_:]*")
        if self.name.endswith(_RESERVED_SUFFIXES):
            raise MetricsFormatError(f"gauge {self.name!r} ends with a suffix OpenMetrics keeps for other types")
        if self.unit is not None and not self.name.endswith(f"_{self.unit.value}"):
            raise MetricsFormatError(f"metric {self.name!r} has unit {self.unit.value} but does not end with it")
        for label in self.label_names:
            if not _LABEL_NAME.fullmatch(label) or label.startswith("__"):
                raise MetricsFormatError(f"label name {label!r} of {self.name} is not allowed")
        if len(set(self.label_names)) != len(self.label_names):
            raise MetricsFormatError(f"{self.name} repeats a label name: {self.label_names}")
        seen: set[tuple[tuple[str, str], ...]] = set()
        for sample in self.samples:
            if tuple(name for name, _ in sample.labels) != self.label_names:
                raise MetricsFormatError(f"a sample of {self.name} has labels {sample.labels}, "
                                         f"not {self.label_names}")
            if not math.isfinite(sample.value):
                raise MetricsFormatError(f"a sample of {self.name} is not finite: {sample.value}")
            if sample.labels in seen:
                raise MetricsFormatError(f"{self.name} has two samples labelled {sample.labels}")
            seen.add(sample.labels)


def gauge(name: str, help: str, values: Iterable[tuple[Sequence[str], float]], *,
          label_names: Sequence[str] = (), unit: Unit | None = None) -> Family:
    """A gauge family from (label values in ``label_names`` order, value) pairs."""
    names = tuple(label_names)
    samples = tuple(Sample(labels=tuple(zip(names, (str(item) for item in labels), strict=True)), value=value)
                    for labels, value in values)
    return Family(name=name, help=help, label_names=names, unit=unit, samples=samples)


def _sample_line(name: str, sample: Sample) -> str:
    if not sample.labels:
        return f"{name} {format_value(sample.value)}"
    labels = ",".join(f'{label}="{escape_label_value(value)}"' for label, value in sample.labels)
    return f"{name}{{{labels}}} {format_value(sample.value)}"


def render(families: Sequence[Family]) -> str:
    """The OpenMetrics text of ``families`` (in this order), ending with ``# EOF`` and a newline.
    Raises :class:`MetricsFormatError` when two families share a name."""
    names = [family.name for family in families]
    if len(set(names)) != len(names):
        raise MetricsFormatError(f"metric families share a name: {sorted(names)}")
    lines: list[str] = []
    for family in families:
        lines.append(f"# TYPE {family.name} gauge")
        if family.unit is not None:
            lines.append(f"# UNIT {family.name} {family.unit.value}")
        lines.append(f"# HELP {family.name} {escape_help(family.help)}")
        lines.extend(_sample_line(family.name, sample) for sample in family.samples)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
