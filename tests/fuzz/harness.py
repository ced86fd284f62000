"""One fuzz case: planned from its id, run through the engine, checked against the invariants.

A case id (with the run's seed) fixes everything: the mutation (round robin), the
seed shape (round robin among those the mutation applies to), the damaged file,
how the job is handed to the engine (``memory``: a :class:`~stormwatch.MemoryTree`;
``folder``: a temporary job folder; ``paths``: the artifacts' paths, listed) and
the mutation's bytes. Invariants checked per case:

* ``diagnose`` (load, rank filter, model, verdict, document; a random collective
  preset and rank filter) raises nothing; ``model_json()`` serialises, parses back,
  and ``render_job`` renders it and the in-memory document;
* records lost beyond what the damage removed outright are reported by a warning
  naming the damaged file (a torn last JSONL line, at most one record, is exempt);
* a file the mutation made bad is named in a warning; a harmless change loses nothing;
* an unknown ``session_id`` raises :class:`~stormwatch.SessionNotFoundError` and a
  known one selects its session (one case in five);
* temporary-folder cases: no input byte, file or mtime changes, and nothing
  outside the job's root (an escaping manifest entry's target) is loaded.
"""

from __future__ import annotations

import hashlib
import posixpath
import tempfile
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any

from stormwatch import LoadResult, MemoryTree, SessionNotFoundError, load_artifacts
from stormwatch.analysis.collective import CollectivePreset
from stormwatch.diagnose import DiagnoseOptions, NoRanksSelectedError, diagnose
from stormwatch.outputs.document import JobDocument
from stormwatch.reports.render import render_job
from tests.fuzz.corpus import Fmt, Shape, shape_named, shapes
from tests.fuzz.mutations import ESCAPED_SESSION_ID, MUTATIONS, Mutated, Target, record_count

MODES = ("memory", "folder", "paths")
_MODE_WEIGHTS = (6, 3, 2)
_ATTEMPTS = 8  # a mutation that finds nothing to edit is retried with fresh random numbers
_SYNTHETIC_SOURCE = "stormlog.diagnostics.distributed"  # rank-group sessions repeat other sessions' events
_REPO = Path(__file__).resolve().parents[2]
_ENGINE_DIRS = tuple(str(_REPO / name) for name in ("src/stormwatch", "reports"))


@dataclass(frozen=True)
class Case:
    case_id: int
    seed: int
    shape: str
    target: str
    mutation: str
    mode: str

    def __str__(self) -> str:
        return f"case {self.case_id} (seed {self.seed}): {self.mutation} on {self.shape}:{self.target} via {self.mode}"


@dataclass(frozen=True)
class Failure:
    #: crash | model_json | render | silent_loss | misattributed_loss | silent_bad_file | lossy | session
    #: | input_modified | escaped | fatal | timeout
    kind: str
    detail: str
    where: str = ""  # innermost engine frame of an exception
    trace: str = ""


@dataclass(frozen=True)
class Outcome:
    case: Case
    note: str
    failures: tuple[Failure, ...]
    seconds: float
    skipped: bool = False


def case_rng(case: Case | tuple[int, int], purpose: str) -> Random:
    seed, case_id = (case.seed, case.case_id) if isinstance(case, Case) else case
    return Random(f"{seed}:{case_id}:{purpose}")


def plan(case_id: int, *, seed: int = 0) -> Case:
    names = list(MUTATIONS)
    name = names[case_id % len(names)]
    fmts = MUTATIONS[name][1]
    eligible = [s for s in shapes() if any(fmt in fmts for fmt in s.targets.values())]
    shape = eligible[(case_id // len(names)) % len(eligible)]
    rng = case_rng((seed, case_id), "plan")
    target = rng.choice(sorted(key for key, fmt in shape.targets.items() if fmt in fmts))
    mode = rng.choices(MODES, weights=_MODE_WEIGHTS)[0]
    return Case(case_id, seed, shape.name, target, name, mode)


def damage(case: Case) -> tuple[Shape, Mutated | None]:
    shape = shape_named(case.shape)
    fn = MUTATIONS[case.mutation][0]
    target = Target(case.target, shape.targets[case.target], shape.files[case.target])
    rng = case_rng(case, "mutate")
    for _ in range(_ATTEMPTS):
        mutated = fn(target, rng)
        if mutated is not None:
            return shape, mutated
    return shape, None


def damaged_files(shape: Shape, case: Case, mutated: Mutated) -> dict[str, bytes]:
    files = {**shape.files, case.target: mutated.data, **mutated.extra}
    for key in mutated.removed:
        files.pop(key, None)
    return files


def _artifact_paths(root: Path, files: Mapping[str, bytes]) -> list[Path]:
    """What a user would list: sink and bundle folders (those with a manifest), else files."""
    with_manifest = {posixpath.dirname(key) for key in files if posixpath.basename(key) == "manifest.json"}
    out: dict[Path, None] = {}
    for key in sorted(files):
        folder = posixpath.dirname(key)
        out[root / folder if folder in with_manifest else root / key] = None
    return list(out)


def _fingerprint(folder: Path) -> dict[str, tuple[str, int]]:
    return {p.relative_to(folder).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@contextmanager
def materialised(name: str, files: Mapping[str, bytes], mode: str, outside: Mapping[str, bytes] | None = None,
                 ) -> Iterator[tuple[Any, dict[str, str], Path | None]]:
    """(source for the engine, key -> identity in warnings, temp folder or None)."""
    if mode == "memory":
        tree = MemoryTree(dict(files), name=f"/fuzz/{name}")
        yield tree, {key: tree.identity(key) for key in files}, None
        return
    with tempfile.TemporaryDirectory(prefix="stormwatch-fuzz-") as tmp:
        base = Path(tmp).resolve()
        root = base / name
        for key, data in {**files, **{f"../{k}": v for k, v in (outside or {}).items()}}.items():
            path = (root / key).resolve()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        source = [root] if mode == "folder" else _artifact_paths(root, files)
        yield source, {key: str(root / key) for key in files}, base


def total_events(loaded: LoadResult) -> int:
    """Events of every session (rank-group sessions, which repeat others, left out)."""
    return sum(s.event_count for s in loaded.sessions if s.source != _SYNTHETIC_SOURCE)


_BASELINES: dict[tuple[str, str], int] = {}


def baseline(shape: Shape, mode: str) -> int:
    key = (shape.name, mode)
    if key not in _BASELINES:
        with materialised(shape.name, shape.files, mode) as (source, _, _):
            _BASELINES[key] = total_events(load_artifacts(source))
    return _BASELINES[key]


def _where(exc: BaseException) -> str:
    # resolved: a strict editable install runs the repo's files through links under build/
    frames = [(f, Path(f.filename).resolve()) for f in traceback.extract_tb(exc.__traceback__)]
    frames = [(f, path) for f, path in frames if str(path).startswith(_ENGINE_DIRS)]
    if not frames:
        return ""
    frame, path = frames[-1]
    return f"{path.relative_to(_REPO)}:{frame.name}:{frame.lineno}"


def failure_of(kind: str, exc: BaseException) -> Failure:
    text = f"{type(exc).__name__}: {str(exc)[:300]}"
    return Failure(kind, text, _where(exc), "".join(traceback.format_exception(exc, limit=-12)))


def _check_sessions(source: Any, loaded: LoadResult) -> list[Failure]:
    out = []
    try:
        load_artifacts(source, session_id="fuzz-no-such-session")
        out.append(Failure("session", "an unknown session_id did not raise SessionNotFoundError"))
    except SessionNotFoundError:
        pass
    except Exception as exc:
        out.append(failure_of("session", exc))
    if loaded.sessions:
        wanted = loaded.sessions[-1].session_id
        try:
            again = load_artifacts(source, session_id=wanted)
            if again.selected_session_id != wanted:
                out.append(Failure("session", f"session_id={wanted!r} selected {again.selected_session_id!r}"))
        except Exception as exc:
            out.append(failure_of("session", exc))
    return out


def _check_loss(case: Case, shape: Shape, mutated: Mutated, loaded: LoadResult, names: Mapping[str, str],
                mode: str) -> list[Failure]:
    out = []
    named = {key: any(identity in w for w in loaded.warnings) for key, identity in names.items()}
    lost = baseline(shape, mode) - total_events(loaded)
    fmt = shape.targets[case.target]
    torn = fmt is Fmt.JSONL and bool(mutated.data) and not mutated.data.endswith(b"\n")
    removed = sum(record_count(shape.targets.get(key, Fmt.JSON), shape.files[key]) for key in mutated.removed)
    gone = mutated.destroyed + removed
    if lost > gone + int(torn) and not named[case.target]:
        folder = case.target.rsplit("/", 1)[0] + "/" if "/" in case.target else ""
        blamed = sorted(k for k, hit in named.items() if hit and k.startswith(folder) and "/" not in k[len(folder):])
        kind = "misattributed_loss" if blamed else "silent_loss"
        out.append(Failure(kind, f"{lost} events lost ({gone} destroyed), no warning names {case.target}"
                                 + (f" (warnings name {', '.join(blamed)})" if blamed else "")))
    if mutated.lossless and lost > 0:
        out.append(Failure("lossy", f"{lost} events lost to a harmless change"))
    if mutated.must_warn and not named[case.target]:
        out.append(Failure("silent_bad_file", f"no warning names the damaged {case.target}"))
    out.extend(Failure("silent_bad_file", f"no warning names the added {key}")
               for key, blob in mutated.extra.items()
               if not named.get(key, True) and any(line.strip() for line in blob.split(b"\n")[:-1]))
    return out


def run_case(case: Case) -> Outcome:
    """Run one case; every broken invariant is a :class:`Failure` (nothing is raised)."""
    started = time.perf_counter()
    shape, mutated = damage(case)
    if mutated is None:
        return Outcome(case, "not applicable", (), time.perf_counter() - started, skipped=True)
    files = damaged_files(shape, case, mutated)
    failures: list[Failure] = []
    with materialised(shape.name, files, case.mode, mutated.outside) as (source, names, temp):
        before = _fingerprint(temp) if temp is not None else None
        options = case_rng(case, "options")
        preset, ranks = options.choice(list(CollectivePreset)), options.choice([None, None, None, "0", "1", "0-1,5"])
        try:
            diagnosis = diagnose(source, job_id="fuzz", source_name=shape.name,
                                 options=DiagnoseOptions(ranks=ranks, preset=preset))
        except NoRanksSelectedError:  # a usage error by design: the filter selects none of the job's ranks
            pass
        except Exception as exc:
            failures.append(failure_of("crash", exc))
        else:
            loaded = diagnosis.loaded
            failures.extend(_check_loss(case, shape, mutated, loaded, names, case.mode))
            if any(s.session_id == ESCAPED_SESSION_ID for s in loaded.sessions) or (
                    temp is not None and any(not s.startswith(str(temp / shape.name)) for s in loaded.sources_loaded)):
                failures.append(Failure("escaped", f"loaded from outside the root: {loaded.sources_loaded}"))
            if case.case_id % 5 == 0:
                failures.extend(_check_sessions(source, loaded))
            try:
                document = JobDocument.from_json(diagnosis.model_json(), name="fuzz/model.json")
            except Exception as exc:
                failures.append(failure_of("model_json", exc))
            else:
                for shown in (document, diagnosis.document):  # as read back, and as the pipeline hands it over
                    try:
                        render_job(shown)
                    except Exception as exc:
                        failures.append(failure_of("render", exc))
        if temp is not None and _fingerprint(temp) != before:
            failures.append(Failure("input_modified", "input files changed while loading"))
    return Outcome(case, mutated.note, tuple(failures), time.perf_counter() - started)
