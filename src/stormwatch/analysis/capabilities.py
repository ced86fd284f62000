"""Schema-v4 collector capabilities: what a sample's counters can be trusted for.

stormlog 0.4.x records carry ``metadata.memory_capabilities``; a flag set to
``False`` switches a feature off, anything else (absent, ``True``) leaves it on.
Before v4 there are no flags, so everything is on; and fragmentation is read
the 0.3.5 way, ``(reserved - allocated) / reserved``. From v4 it is 0.4.3's:
``inactive / reserved``, which needs the inactive-split counter.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from stormwatch.analysis.columns import JobColumns


class Feature(StrEnum):
    ALLOCATOR_INACTIVE = "supports_allocator_inactive"
    FRAGMENTATION = "supports_fragmentation_analysis"


def feature_enabled(metadata: Any, feature: Feature) -> bool:
    if not isinstance(metadata, Mapping):
        return True
    capabilities = metadata.get("memory_capabilities", {})
    return not (isinstance(capabilities, Mapping) and capabilities.get(feature.value) is False)


# v4 samples share few metadata dicts: asked once per dict, not per row (see bench/README.md, shapes_bench.py).
def _enabled(columns: JobColumns, positions: np.ndarray, feature: Feature) -> np.ndarray:
    """:func:`feature_enabled` at ``positions``, asked once per distinct metadata object
    (v4 samples with the same metadata share one ``dict``, see the JSONL reader)."""
    metadata = columns.metadata[positions]
    objects, distinct = pd.factorize(np.fromiter(map(id, metadata), dtype=np.int64, count=len(metadata)))
    if len(distinct) == len(metadata):
        return np.fromiter((feature_enabled(meta, feature) for meta in metadata), dtype=bool, count=len(metadata))
    _, first = np.unique(objects, return_index=True)
    answers = np.fromiter((feature_enabled(metadata[i], feature) for i in first.tolist()), dtype=bool, count=len(first))
    return answers[objects]


def fragmentation_ratios(columns: JobColumns, positions: np.ndarray) -> np.ndarray:
    """Fragmentation ratio of each event at ``positions``; NaN where undefined or switched off."""
    reserved = columns.reserved_bytes[positions]
    out = np.full(len(positions), np.nan)
    v4 = columns.is_v4[positions]
    legacy = ~v4 & (reserved != 0)
    allocated = columns.allocated_bytes[positions]
    np.divide(np.maximum(0, reserved - allocated), reserved, out=out, where=legacy)
    if v4.any():
        where = positions[v4]
        ok = (
            columns.has_inactive[where]
            & columns.has_reserved[where]
            & (columns.reserved_bytes[where] != 0)
            & _enabled(columns, where, Feature.ALLOCATOR_INACTIVE)
            & _enabled(columns, where, Feature.FRAGMENTATION)
        )
        ratios = np.full(len(where), np.nan)
        ratios[ok] = columns.inactive_bytes[where][ok] / columns.reserved_bytes[where][ok]
        out[v4] = ratios
    return out


def capability_warnings(columns: JobColumns) -> list[str]:
    """stormlog 0.4.3's warnings when v4 samples lack allocator counters or forbid fragmentation analysis."""
    if not columns.nullable_counters:
        return []
    samples = np.flatnonzero(columns.is_sample)
    allocator = samples[columns.has_allocated[samples] & columns.has_reserved[samples]]
    warnings = []
    if len(samples) and not len(allocator):
        if columns.has_allocated[samples].any():
            warnings.append("Allocator-native diagnostics are unavailable; showing the allocator counters present.")
        else:
            warnings.append("Allocator-native diagnostics are unavailable; showing device memory usage only.")
    if len(allocator) and not _enabled(columns, allocator, Feature.FRAGMENTATION).any():
        warnings.append("Collector capabilities disable fragmentation analysis.")
    return warnings
