"""Per-job caps on what the loader reads, so one huge or runaway job cannot take an audit down.

An artifact (a file, or one segment of a sink) larger than ``max_artifact_bytes``
is not read at all: its size comes from the tree's listing or ``stat`` before any
byte is read, and it is skipped with a warning. A job whose events add up to
more than ``max_events`` stops loading with :class:`JobLimitError`. JSON Lines
artifacts larger than ``chunk_bytes`` are parsed one newline-aligned chunk at a
time, so peak memory is about one chunk plus the parsed columns.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30
MIB = 1 << 20


class JobLimitError(ValueError):
    """A job holds more events than ``LoadLimits.max_events`` allows; the message names both counts."""


@dataclass(frozen=True)
class LoadLimits:
    """Caps for one job. ``max_artifact_bytes`` and ``chunk_bytes`` are bytes; ``max_events`` is events.

    Invariants (checked on construction): every field is a positive integer.
    """

    max_artifact_bytes: int = GIB
    max_events: int = 50_000_000
    chunk_bytes: int = 64 * MIB

    def __post_init__(self) -> None:
        for name in ("max_artifact_bytes", "max_events", "chunk_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")

    def oversized_warning(self, identity: str, size_bytes: int) -> str | None:
        """The warning for an artifact of ``size_bytes`` bytes over the cap, else ``None``."""
        if size_bytes <= self.max_artifact_bytes:
            return None
        return (
            f"Skipped artifact {identity}: {size_bytes} bytes exceeds max_artifact_bytes={self.max_artifact_bytes}"
        )

    def check_events(self, events: int, *, where: str) -> None:
        """Raise :class:`JobLimitError` when ``events`` exceeds ``max_events``."""
        if events > self.max_events:
            raise JobLimitError(f"{where} holds more than max_events={self.max_events} events ({events} so far)")


#: The defaults: 1 GiB per artifact, 50 million events per job, 64 MiB JSONL chunks.
DEFAULT_LIMITS = LoadLimits()
