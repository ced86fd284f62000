"""Deterministic session ids, identical to stormlog's ``stable_legacy_session_id``."""

from __future__ import annotations

from uuid import NAMESPACE_URL, uuid5


def stable_legacy_session_id(*parts: object) -> str:
    """``legacy-<uuid5>`` of the non-None parts joined by ``::`` (stormlog's scheme)."""
    payload = "::".join(str(part) for part in parts if part is not None)
    return f"legacy-{uuid5(NAMESPACE_URL, payload)}"
