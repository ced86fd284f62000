"""Where a receiver's secret lives, named, never held: an environment variable or a Prefect Secret block.

A routes file names a receiver's Slack webhook and SMTP URL as :class:`SecretName` (it never holds a
secret itself). Alerting only asks whether a channel has a secret; resolving one (reading the
environment, loading the block) is IO and happens when sending, in ``stormwatch.tasks.notify.secrets``,
whose ``SecretRef`` may also hold a value given on the command line. Both are a :class:`SecretSource`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class SecretSource(Protocol):
    """Anything naming where a secret is read from when sending (``env``, ``block``: None when not there)."""

    @property
    def env(self) -> str | None: ...

    @property
    def block(self) -> str | None: ...


@dataclass(frozen=True)
class SecretName:
    """``env``: an environment variable's name; ``block``: a Prefect Secret block's name (tried after ``env``)."""

    env: str | None = None
    block: str | None = None
