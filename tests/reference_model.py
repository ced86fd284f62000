"""Differential adapter for the diagnostics model: the reference's and stormwatch's model
as one plain, JSON-like shape, and a field-by-field comparison.

Both :func:`reference_model` and :func:`our_model` return
``plain(dataclasses.asdict(model))``: a dict with exactly the keys of stormlog's
``DistributedDiagnosticsModel`` (``rows``, ``indicators``, ``expected_ranks``,
``present_ranks``, ``missing_ranks``, ``per_rank_timelines``, ``warnings``,
``markers_by_rank``), lists for sequences, ``str(rank)`` keys for the two rank-keyed
maps (as JSON has them), NA/NaN as None.

The reference is stormlog 0.3.5's ``load_distributed_artifacts`` +
``build_distributed_model`` (in process); for schema-v4 data stormlog 0.4.3's, run
in a subprocess with ``PYTHONPATH`` on a private 0.4.3 copy (:func:`ensure_stormlog43`).
The collective preset of the reference is the module global
``_COLLECTIVE_ATTRIBUTION_CONFIG`` (fixed to "medium"); other presets swap it for the run.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from stormlog.timeline_markers import TimelineMarker
from stormlog.tui import distributed_diagnostics as dd

from tests.reference import canonical, plain

MODEL_KEYS = tuple(f.name for f in dataclasses.fields(dd.DistributedDiagnosticsModel))
ROW_FIELDS = tuple(f.name for f in dataclasses.fields(dd.RankDiagnosticsRow))
INDICATOR_FIELDS = tuple(f.name for f in dataclasses.fields(dd.AnomalyIndicator))
MARKER_FIELDS = tuple(f.name for f in dataclasses.fields(TimelineMarker))
RANK_KEYED = ("per_rank_timelines", "markers_by_rank")
PRESETS = ("low", "medium", "high")
STORMLOG43_VERSION = "0.4.3"
STORMLOG43_DIR = Path(__file__).resolve().parents[1] / ".pytest_cache" / f"stormlog-{STORMLOG43_VERSION}"


def ensure_stormlog43(target: Path = STORMLOG43_DIR) -> Path:
    """A private stormlog 0.4.3 copy (``pip install --no-deps --target``), installed on
    first use; its dependencies are this environment's. Returns the folder for PYTHONPATH."""
    if not (target / "stormlog" / "tui" / "distributed_diagnostics.py").exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--target", str(target), f"stormlog=={STORMLOG43_VERSION}"], check=True)
    return target


@contextmanager
def _reference_preset(module: Any, preset: str) -> Any:
    """Swap the reference module's collective-attribution config for ``preset``."""
    from stormlog.collective_attribution import resolve_collective_attribution_config

    saved = module._COLLECTIVE_ATTRIBUTION_CONFIG
    module._COLLECTIVE_ATTRIBUTION_CONFIG = resolve_collective_attribution_config(preset)
    try:
        yield
    finally:
        module._COLLECTIVE_ATTRIBUTION_CONFIG = saved


_V43_SCRIPT = r"""
import dataclasses, json, sys
from pathlib import Path
from stormlog.collective_attribution import resolve_collective_attribution_config
from stormlog.tui import distributed_diagnostics as dd
args = json.load(sys.stdin)
dd._COLLECTIVE_ATTRIBUTION_CONFIG = resolve_collective_attribution_config(args["preset"])
loaded = dd.load_distributed_artifacts([Path(p) for p in args["paths"]])
selected = None if args["selected"] is None else set(args["selected"])
model = dd.build_distributed_model(loaded.events, selected)
json.dump(dataclasses.asdict(model), sys.stdout, allow_nan=False)
"""


def reference_model(paths: Iterable[str | Path], selected_ranks: set[int] | None = None, *,
                    preset: str = "medium", version: str = "0.3.5",
                    stormlog43: Path | None = None) -> dict[str, Any]:
    """The reference's model for ``paths`` (given one by one, in order).

    ``version="0.4.3"`` runs stormlog 0.4.3 in a subprocess (``stormlog43``: its folder,
    default :func:`ensure_stormlog43`); its rows carry ``device_used_delta_bytes`` too."""
    inputs = [Path(p) for p in paths]
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}")
    if version == "0.3.5":
        with _reference_preset(dd, preset):
            loaded = dd.load_distributed_artifacts(inputs)
            model = dd.build_distributed_model(loaded.events, selected_ranks)
        return _checked(plain(dataclasses.asdict(model)))
    if version != STORMLOG43_VERSION:
        raise ValueError(f"unsupported reference version {version!r}")
    folder = stormlog43 or ensure_stormlog43()
    args = {"paths": [str(p) for p in inputs], "preset": preset,
            "selected": None if selected_ranks is None else sorted(selected_ranks)}
    done = subprocess.run([sys.executable, "-c", _V43_SCRIPT], input=json.dumps(args), text=True,
                          capture_output=True, check=False, env={**_clean_env(), "PYTHONPATH": str(folder)})
    if done.returncode != 0:
        raise RuntimeError(f"stormlog {version} reference failed:\n{done.stderr}")
    return _checked(plain(json.loads(done.stdout)))


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def our_model(paths: Iterable[str | Path], selected_ranks: set[int] | None = None, *,
              preset: str = "medium", job_folder: bool = False) -> dict[str, Any]:
    """stormwatch's ``build_model(load_artifacts(...).events, ...)`` as a plain dict.

    ``job_folder``: ``paths`` is one folder, loaded as ``load_artifacts(folder)`` (every
    rank under it is one job); otherwise the path list, as the reference gets it."""
    from stormwatch import load_artifacts
    from stormwatch.analysis.model import build_model

    inputs = [Path(p) for p in paths]
    if job_folder and (len(inputs) != 1 or not inputs[0].is_dir()):
        raise ValueError(f"job_folder needs exactly one folder, got {inputs}")
    # One folder alone is a job folder for load_artifacts; several paths are a path list.
    loaded = load_artifacts(inputs)
    model = build_model(loaded.events, selected_ranks=selected_ranks, collective_preset=preset)
    return _checked(plain(dataclasses.asdict(model)))


def _checked(model: Mapping[str, Any]) -> dict[str, Any]:
    if tuple(model) != MODEL_KEYS:
        raise AssertionError(f"model keys {tuple(model)} != {MODEL_KEYS}")
    return dict(model)


def canonical_model(model: Mapping[str, Any]) -> dict[str, Any]:
    """Rename path-derived ``legacy-…`` session ids (markers, warnings) to ``legacy#N`` in
    order of first appearance, with :func:`tests.reference.canonical`'s renaming."""
    ranks = list(model["markers_by_rank"])
    flat = [marker for rank in ranks for marker in model["markers_by_rank"][rank]]
    renamed = canonical({"sessions": [], "selected_session_id": None, "events": [],
                         "markers": flat, "warnings": list(model["warnings"])})
    markers = iter(renamed["markers"])
    by_rank = {rank: [next(markers) for _ in model["markers_by_rank"][rank]] for rank in ranks}
    return {**model, "markers_by_rank": by_rank, "warnings": renamed["warnings"]}


# --- comparison ---------------------------------------------------------------------------

def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return type(value).__name__


def _walk(path: str, want: Any, got: Any, out: list[str], *, ordered_keys: bool = False,
          limit: int) -> None:
    """Append ``path: expected X, got Y`` lines; types are compared strictly (1 != 1.0,
    True != 1) so a model.json written from ours has the reference's JSON types."""
    if len(out) >= limit:
        return
    if _kind(want) != _kind(got):
        out.append(f"{path}: expected {_short(want)} ({_kind(want)}), got {_short(got)} ({_kind(got)})")
        return
    if isinstance(want, dict):
        if ordered_keys and list(want) != list(got):
            out.append(f"{path}: keys {list(want)} expected, got {list(got)}")
            return
        if set(want) != set(got):
            out.append(f"{path}: keys missing {sorted(set(want) - set(got))}, "
                       f"unexpected {sorted(set(got) - set(want))}")
        for key in want:
            if key in got:
                _walk(f"{path}.{key}", want[key], got[key], out, limit=limit)
        return
    if isinstance(want, list):
        if len(want) != len(got):
            out.append(f"{path}: {len(want)} items expected, got {len(got)}: {_short(got)}")
        for index, (a, b) in enumerate(zip(want, got, strict=False)):
            _walk(f"{path}[{index}]", a, b, out, limit=limit)
        return
    if want != got:
        out.append(f"{path}: expected {want!r}, got {got!r}")


def model_differences(expected: Mapping[str, Any], actual: Mapping[str, Any], *,
                      row_fields: Sequence[str] = ROW_FIELDS, compare_warnings: str = "count",
                      limit: int = 20) -> list[str]:
    """Field-by-field differences between two plain models (empty list: equal).

    Ignored, as DESIGN.md allows: indicators' free-text ``details``; warnings' wording
    (``compare_warnings``: "count" compares only how many, "exact" the texts too);
    ``legacy-…`` ids (compare :func:`canonical_model` outputs). Rows are compared on
    ``row_fields`` (0.3.5's field set; a 0.4.3 reference row has one more field) and
    ours must have exactly those fields. Rank-keyed maps must list ranks in the same
    order. Everything else, numbers and JSON types included, must be equal."""
    out: list[str] = []
    for key in MODEL_KEYS:
        want, got = expected[key], actual[key]
        if key == "rows":
            if len(want) != len(got):
                out.append(f"rows: {len(want)} expected, got {len(got)}: {_short(got)}")
            for index, (a, b) in enumerate(zip(want, got, strict=False)):
                if set(b) != set(row_fields):
                    out.append(f"rows[{index}]: fields {sorted(b)} != {sorted(row_fields)}")
                _walk(f"rows[{index}]", {f: a[f] for f in row_fields}, {f: b.get(f) for f in row_fields},
                      out, limit=limit)
        elif key == "indicators":
            _walk("indicators", [_without(i, "details") for i in want], [_without(i, "details") for i in got],
                  out, limit=limit)
        elif key == "warnings":
            if compare_warnings == "exact" and want != got:
                out.append(f"warnings: expected {want!r}, got {got!r}")
            elif len(want) != len(got):
                out.append(f"warnings: {len(want)} expected {want!r}, got {len(got)} {got!r}")
        else:
            _walk(key, want, got, out, ordered_keys=key in RANK_KEYED, limit=limit)
        if len(out) >= limit:
            out.append(f"... (stopped after {limit} differences)")
            break
    return out


def _without(item: Mapping[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != name}


def _short(value: Any, width: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width] + "…"


def indicator_summary(model: Mapping[str, Any]) -> dict[str, tuple[Any, ...]]:
    """``{kind: (signal, severity, rank, reason_codes)}`` of a plain model's indicators."""
    return {i["kind"]: (i["signal"], i["severity"], i["rank"], tuple(i["reason_codes"]))
            for i in model["indicators"]}
