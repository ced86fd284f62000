"""One JSON text to a Python value, as every format reads it.

orjson parses first; the standard library takes what orjson refuses (``NaN``,
integers beyond 64 bits, nesting deeper than orjson's limit). Anything neither
can read raises :class:`ValueError` (or :class:`UnicodeDecodeError`), never
:class:`RecursionError`, so that a hostile file becomes a warning, not a crash.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson


class TooDeepError(ValueError):
    """JSON nested deeper than the parsers can follow."""


def parse_json_value(raw: bytes) -> Any:
    """The value of ``raw`` (UTF-8 JSON); raises ValueError when it is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            return json.loads(raw.decode("utf-8"))
        except RecursionError as exc:
            raise TooDeepError("nested too deeply") from exc


def parse_json_object(raw: bytes) -> Mapping[str, Any] | None:
    """The JSON object in ``raw``, or None when it is no JSON, or JSON that is not an object
    (how manifests are read: a bad one is ignored, never an error)."""
    try:
        value = parse_json_value(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, Mapping) else None
