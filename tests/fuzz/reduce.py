"""Shrinking a crashing case to a minimal reproduction: fewer files, then fewer lines.

Only exceptions are shrunk (a dead worker or a hang cannot be re-checked in
process): the damaged job is loaded from memory, files it does not need are
dropped, then lines of the damaged file (a CSV keeps its header), as long as the
same exception is raised from the same place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

from stormwatch import MemoryTree
from stormwatch.diagnose import diagnose
from stormwatch.outputs.document import JobDocument
from stormwatch.reports.render import render_job
from tests.fuzz.corpus import Fmt
from tests.fuzz.harness import Case, damage, damaged_files, failure_of

_BUDGET = 300  # engine runs per reduction


def signature(name: str, files: Mapping[str, bytes]) -> tuple[str, str] | None:
    """(exception type, innermost engine frame) of what loading, serialising and rendering raise."""
    try:
        diagnosis = diagnose(MemoryTree(dict(files), name=f"/fuzz/{name}"), job_id="fuzz", source_name=name)
        render_job(JobDocument.from_json(diagnosis.model_json(), name=f"{name}/model.json"))
        render_job(diagnosis.document)
    except Exception as exc:
        failure = failure_of("crash", exc)
        return failure.detail.split(":", 1)[0], failure.where.rsplit(":", 1)[0]
    return None


class _Reducer:
    def __init__(self, name: str, wanted: tuple[str, str]) -> None:
        self.name, self.wanted, self.runs = name, wanted, 0

    def fails(self, files: Mapping[str, bytes]) -> bool:
        self.runs += 1
        return self.runs <= _BUDGET and signature(self.name, files) == self.wanted

    def shrink(self, files: dict[str, bytes], key: str, parts: list[bytes], join: Callable[[list[bytes]], bytes],
               *, keep_first: bool = False) -> dict[str, bytes]:
        """ddmin over ``parts`` of ``files[key]`` (lines, or a JSON array's elements)."""
        head, body = (parts[:1], parts[1:]) if keep_first else ([], parts)
        chunks = 2
        while len(body) >= 2 and self.runs < _BUDGET:
            size = -(-len(body) // chunks)
            for start in range(0, len(body), size):
                trial = body[:start] + body[start + size:]
                if self.fails({**files, key: join(head + trial)}):
                    body, chunks = trial, max(chunks - 1, 2)
                    break
            else:
                if chunks >= len(body):
                    break
                chunks = min(2 * chunks, len(body))
        return {**files, key: join(head + body)}


def _array_elements(data: bytes) -> list[bytes] | None:
    """A JSON array's elements as JSON texts (NaN and big integers survive; duplicate keys do not)."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return [json.dumps(item).encode() for item in value] if isinstance(value, list) else None


def _join_array(items: list[bytes]) -> bytes:
    return b"[\n" + b",\n".join(items) + b"\n]"


def reduce(case: Case) -> dict[str, bytes] | None:
    """The smallest job found that still raises as ``case`` does, or None (nothing raised in memory)."""
    shape, mutated = damage(case)
    if mutated is None:
        return None
    files = damaged_files(shape, case, mutated)
    wanted = signature(shape.name, files)
    if wanted is None:
        return None
    reducer = _Reducer(shape.name, wanted)
    for key in sorted(files, key=lambda k: k == case.target):
        if key in files and len(files) > 1 and reducer.fails({k: v for k, v in files.items() if k != key}):
            files = {k: v for k, v in files.items() if k != key}
    fmt = shape.targets.get(case.target)
    if case.target not in files:
        return files
    if fmt in (Fmt.JSONL, Fmt.CSV):
        return reducer.shrink(files, case.target, files[case.target].split(b"\n"), b"\n".join,
                              keep_first=fmt is Fmt.CSV)
    elements = _array_elements(files[case.target]) if fmt is Fmt.JSON else None
    if elements is not None and reducer.fails({**files, case.target: _join_array(elements)}):
        return reducer.shrink(files, case.target, elements, _join_array)
    return files


def save(folder: Path, files: Mapping[str, bytes], about: Mapping[str, object]) -> Path:
    """The job's files under ``folder/job`` and ``about`` as ``folder/case.json``."""
    for key, data in files.items():
        path = folder / "job" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (folder / "case.json").write_text(json.dumps(about, indent=2, default=str) + "\n")
    return folder
