"""Minimal reproducers of what the mutation fuzzer (tests/fuzz, bench/fuzz.py) found.

Each starts from records written by stormlog's own code (tests/builders.py) and
applies the one damage the fuzzer found. The invariants are the fuzzer's: loading
never raises (nor kills the process), every record that does not load is reported
by a warning naming its file, and whatever loads serialises and renders.

Every finding so far is fixed: each test reproduces what was found (docstring:
what it was) and passes. A new finding whose fix cannot land at once is added
marked ``xfail(strict=True)``, with its entry in tests/fuzz/known.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import orjson
import pytest

from stormwatch import LoadResult, MemoryTree, load_artifacts
from stormwatch.analysis.model import MAX_WORLD_SIZE
from stormwatch.diagnose import diagnose
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.model_json import TOO_DEEP, json_safe
from stormwatch.reports.render import render_job
from tests import builders as b
from tests.fuzz.pool import WORKER_MEMORY_BYTES, limit_memory

REPO = Path(__file__).resolve().parents[2]
ROOT = "/fuzz/job"
BOM = b"\xef\xbb\xbf"


def _records(samples: int = 4) -> list[dict]:
    """start, ``samples`` samples, a warning alert (metadata ``{"step": 3}``), stop."""
    return b.timeline_records(samples=samples, alerts=[b.Alert(0.75, "warning", "hot", {"step": 3})], session_id="s-1")


def _lines(records: list[dict]) -> list[str]:
    return [json.dumps(record, sort_keys=True) for record in records]


def _jsonl(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def _alert_index(records: list[dict]) -> int:
    return next(i for i, record in enumerate(records) if record["event_type"] == "warning")


def _load(files: Mapping[str, bytes]) -> LoadResult:
    return load_artifacts(MemoryTree(dict(files), name=ROOT))


def _assert_reported(loaded: LoadResult, key: str, *, total: int) -> None:
    """Every record of ``key`` loaded, or a warning names the file."""
    events = sum(s.event_count for s in loaded.sessions)
    assert events == total or any(f"{ROOT}/{key}" in w for w in loaded.warnings), (events, loaded.warnings)


def _bundle(tmp_path: Path) -> dict[str, bytes]:
    folder = b.write_diagnose_bundle(tmp_path / "bundle", timestamps_s=[1.0, 2.0, 3.0], allocated=[1, 2, 3],
                                     reserved=[4, 5, 6], session_id="bundle-s")
    return {f"bundle/{path.name}": path.read_bytes() for path in sorted(folder.iterdir())}


def _edit_json(files: dict[str, bytes], key: str, edit: object) -> dict[str, bytes]:
    doc = json.loads(files[key])
    edit(doc)  # type: ignore[operator]
    return {**files, key: json.dumps(doc).encode()}


def _assert_reported_in_subprocess(tmp_path: Path, name: str, data: bytes, *, total: int) -> None:
    """:func:`_assert_reported` for one file loaded in a fresh interpreter, for damage that
    kills the process (a C parser's stack overflow) or pytest itself (formatting the
    traceback of a RecursionError from deep Arrow types)."""
    path = tmp_path / name
    path.write_bytes(data)
    code = ("import sys; from stormwatch import load_artifacts; r = load_artifacts([sys.argv[1]]); "
            "print(sum(s.event_count for s in r.sessions)); print(*r.warnings, sep='\\n')")
    done = _run_capped(code, str(path))
    events, *warnings = done.stdout.splitlines()
    assert int(events) == total or any(str(path) in w for w in warnings), done.stdout


def _run_capped(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -c code args`` with its address space capped, so that a regression that
    allocates without bound fails here instead of taking the machine's memory."""
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, preexec_fn=lambda: limit_memory(WORKER_MEMORY_BYTES))
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _innermost(value: object) -> tuple[int, object]:
    """(levels of single-item lists, what they hold)."""
    levels = 0
    while isinstance(value, list | tuple) and len(value) == 1:
        value, levels = value[0], levels + 1
    return levels, value


DEEP = 10_000
LOADER = "the fix belongs to the loader (files the fuzzing suite does not own)"


# --- loader crashes -------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["events.json", "run_events.json"])
def test_json_file_with_metadata_nested_10000_deep(key: str) -> None:
    """Was: RecursionError from json.loads, the stdlib fallback after orjson's depth limit."""
    records = _records()
    text = json.dumps(records if key == "events.json" else {"events": records})
    text = text.replace('{"step": 3}', '{"step": ' + "[" * DEEP + "]" * DEEP + "}", 1)
    _assert_reported(_load({key: text.encode()}), key, total=len(records))


def test_jsonl_line_with_metadata_nested_10000_deep(tmp_path: Path) -> None:
    """Was: RecursionError in formats/columns.py collective_mask (and pytest died formatting it)."""
    records = _records()
    lines = _lines(records)
    at = _alert_index(records)
    lines[at] = lines[at].replace('{"step": 3}', '{"step": ' + "[" * DEEP + "]" * DEEP + "}")
    _assert_reported_in_subprocess(tmp_path, "events.jsonl", _jsonl(lines), total=len(records))


def test_timeline_with_metadata_nested_10000_deep(tmp_path: Path) -> None:
    """Was: RecursionError from json.loads in formats/timeline.py read_timeline."""
    files = _bundle(tmp_path)
    key = "bundle/telemetry_timeline.json"
    text = files[key].decode().replace('"timestamps"', '"metadata": ' + "[" * DEEP + "]" * DEEP + ', "timestamps"', 1)
    _assert_reported(_load({**files, key: text.encode()}), key, total=3)


def test_jsonl_line_nested_100000_deep_does_not_kill_the_process(tmp_path: Path) -> None:
    """Was: SIGSEGV in pyarrow.json.read_json (26.0.1) beyond ~20,000 levels."""
    records = _records()
    lines = _lines(records)
    at = _alert_index(records)
    lines[at] = lines[at].replace('{"step": 3}', '{"step": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _assert_reported_in_subprocess(tmp_path, "events.jsonl", _jsonl(lines), total=len(records))


def test_jsonl_whose_first_line_is_null_does_not_kill_the_process(tmp_path: Path) -> None:
    """Was: SIGSEGV in pyarrow.json.read_json (26.0.1) when the first line is ``null``."""
    records = _records()
    _assert_reported_in_subprocess(tmp_path, "events.jsonl", b"null\n" + _jsonl(_lines(records)), total=len(records))


@pytest.mark.parametrize("field", ["world_size", "local_rank"])
def test_jsonl_line_without_an_optional_identity_field(field: str) -> None:
    """Was: 'assignment destination is read-only' (defaults written into Arrow's zero-copy array)."""
    records = _records()
    del records[2][field]
    loaded = _load({"events.jsonl": _jsonl(_lines(records))})
    assert len(loaded.events) == len(records)  # optional in stormlog's schema: defaults apply


def test_nan_in_the_metadata_of_an_alert() -> None:
    """Was: orjson re-parsing an alert's line that Arrow had accepted (NaN) raised."""
    records = _records()
    lines = _lines(records)
    at = _alert_index(records)
    lines[at] = lines[at].replace('{"step": 3}', '{"step": NaN}')
    _assert_reported(_load({"events.jsonl": _jsonl(lines)}), "events.jsonl", total=len(records))


def test_jsonl_starting_with_two_byte_order_marks() -> None:
    """Was: Arrow skipped the second BOM, orjson re-parsing the line raised."""
    records = _records()
    loaded = _load({"events.jsonl": BOM + BOM + _jsonl(_lines(records))})
    _assert_reported(loaded, "events.jsonl", total=len(records))


@pytest.mark.parametrize("key", ["events.jsonl", "events.json"])
def test_lone_surrogate_escape_in_a_string(key: str) -> None:
    records = [b.make_v4_record(timestamp_ns=b.START_NS + i, capabilities=b.CPU_CAPABILITIES) for i in range(3)]
    text = _jsonl(_lines(records)).decode() if key.endswith("l") else json.dumps(records)
    text = text.replace('"host": "node-0"', '"host": "node-\\udfff"', 1)
    _assert_reported(_load({key: text.encode()}), key, total=len(records))


@pytest.mark.parametrize(("key", "path", "value"), [("bundle/manifest.json", ("session", "pid"), 2**64),
                                                    ("bundle/telemetry_timeline.json", ("rank",), 2**63)])
def test_bundle_integers_beyond_64_bits(tmp_path: Path, key: str, path: tuple[str, ...], value: int) -> None:
    def edit(doc: dict) -> None:
        for name in path[:-1]:
            doc = doc[name]
        doc[path[-1]] = value
    _assert_reported(_load(_edit_json(_bundle(tmp_path), key, edit)), key, total=3)


@pytest.mark.parametrize("job_id", [{"a": 1}, ["a"]])
def test_bundle_manifest_job_id_that_is_not_a_string(tmp_path: Path, job_id: object) -> None:
    """Found as ``session.job_id`` nested 300 deep (fuzz case 593, seed 0): any object or array does it."""
    folder = b.write_diagnose_bundle(tmp_path / "bundle", timestamps_s=[1.0, 2.0, 3.0], allocated=[1, 2, 3],
                                     reserved=[4, 5, 6], session_id="bundle-s", rank=1, world_size=2)
    files = {f"bundle/{path.name}": path.read_bytes() for path in sorted(folder.iterdir())}
    files = _edit_json(files, "bundle/manifest.json", lambda doc: doc["session"].update(job_id=job_id))
    _assert_reported(_load(files), "bundle/manifest.json", total=3)


def test_unknown_null_field_rejects_only_its_own_line() -> None:
    """Found by test_fuzz.py::test_jsonl_records_of_any_values (``{"action": null}`` after a phase record)."""
    records = b.timeline_records(samples=2, phases=b.DEFAULT_PHASES[:1], session_id="s-1")
    extra = {**records[1], "timestamp_ns": records[1]["timestamp_ns"] + 7, "action": None}
    loaded = _load({"events.jsonl": _jsonl(_lines([*records, extra]))})
    assert len(loaded.events) == len(records)
    assert [w.split(": ")[0] for w in loaded.warnings] == [f"{ROOT}/events.jsonl:{len(records) + 1}"]


# --- silent losses and misattributed warnings (now reported by the loader) ------------------

def test_jsonl_with_cr_only_line_endings_is_reported() -> None:
    records = _records()
    _assert_reported(_load({"events.jsonl": _jsonl(_lines(records)).replace(b"\n", b"\r")}), "events.jsonl",
                     total=len(records))


def test_timeline_lists_of_unequal_length_are_reported(tmp_path: Path) -> None:
    key = "bundle/telemetry_timeline.json"
    files = _edit_json(_bundle(tmp_path), key, lambda doc: doc["reserved"].pop())
    _assert_reported(_load(files), key, total=3)


def test_timeline_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    files = _bundle(tmp_path)
    key = "bundle/telemetry_timeline.json"
    assert len(_load({**files, key: BOM + files[key]}).events) == 3


def test_bad_bundle_manifest_is_named(tmp_path: Path) -> None:
    files = _edit_json(_bundle(tmp_path), "bundle/manifest.json", lambda doc: doc["session"].update(pid=-(2**63) - 1))
    _assert_reported(_load(files), "bundle/manifest.json", total=3)


# --- fixed in src/stormwatch/modeljson.py -------------------------------------------------------

def _rendered(files: Mapping[str, bytes]) -> dict:
    diagnosis = diagnose(MemoryTree(dict(files), name=ROOT), job_id="fuzz", source_name="fuzz")
    read = JobDocument.from_json(diagnosis.model_json(), name="fuzz/model.json")
    assert read.to_json() == diagnosis.model_json() and render_job(read) == render_job(diagnosis.document)
    document: dict = orjson.loads(diagnosis.model_json())
    return document


def test_manifest_integers_beyond_64_bits_serialise(tmp_path: Path) -> None:
    """Was: orjson 'Integer exceeds 64-bit range' in model_json() (fixed in modeljson.py)."""
    files = _edit_json(_bundle(tmp_path), "bundle/manifest.json", lambda doc: doc["session"].update(ended_at_ns=2**64))
    (session,) = _rendered(files)["sessions"]  # the manifest is refused (out of range); the timeline still loads
    assert isinstance(session["ended_at_ns"], int) and session["events"] == 3


@pytest.mark.parametrize("depth", [300, 900])
def test_deeply_nested_alert_metadata_serialises(depth: int) -> None:
    """Was: orjson 'Recursion limit reached' (depth > 255) or RecursionError in dataclasses.asdict."""
    records = _records()
    lines = _lines(records)
    at = _alert_index(records)
    lines[at] = lines[at].replace('{"step": 3}', '{"step": 3, "deep": ' + "[" * depth + "]" * depth + "}")
    document = _rendered({"events.jsonl": _jsonl(lines)})
    (alert,) = [m for m in document["model"]["markers_by_rank"]["0"] if m["event_type"] == "warning"]
    levels, innermost = _innermost(alert["metadata"]["deep"])
    assert innermost == TOO_DEEP and levels < 64 and alert["metadata"]["step"] == 3


@pytest.mark.parametrize("world_size", [2**63 - 1, MAX_WORLD_SIZE + 1])
def test_implausible_world_size_does_not_exhaust_memory(tmp_path: Path, world_size: int) -> None:
    """Was (fixed in model.py): a record claiming ``world_size`` 2**63 - 1 made build_model list every
    rank below it; the fuzz worker grew to 24 GB and the kernel killed it (fuzz case 1656, seed 0)."""
    records = _records()
    records[2]["world_size"] = world_size
    path = b.write_jsonl(tmp_path / "events.jsonl", records)
    code = ("import sys, orjson; from stormwatch.diagnose import diagnose; "
            "d = diagnose([sys.argv[1]], job_id='j', source_name='s'); m = orjson.loads(d.model_json())['model']; "
            "print(m['expected_ranks']); print(*m['warnings'], sep='\\n')")
    expected, *warnings = _run_capped(code, str(path)).stdout.splitlines()
    assert expected == "[0]"
    assert any(f"world_size {world_size} is implausible" in w for w in warnings)


def test_json_safe_keeps_shape_and_fixes_only_what_orjson_refuses() -> None:
    value = {"t": (1, [2, (3,)]), 0: "rank key", "big": 2**64, "small": -(2**63) - 1, "ok": 2**64 - 1,
             "s": "a\udfffb", "\ud800": 1.5, "deep": json.loads("[" * 80 + "]" * 80)}
    safe = json_safe(value, max_nesting=10)
    assert safe["t"] == (1, [2, (3,)]) and isinstance(safe["t"][1][1], tuple) and safe[0] == "rank key"
    assert (safe["big"], safe["small"], safe["ok"]) == (str(2**64), str(-(2**63) - 1), 2**64 - 1)
    assert safe["s"] == "a?b" and safe["?"] == 1.5
    assert _innermost(orjson.loads(orjson.dumps(safe, option=orjson.OPT_NON_STR_KEYS))["deep"]) == (9, TOO_DEEP)
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    assert _innermost(json_safe(nested)) == (64, TOO_DEEP)  # any depth, without recursion


def test_bundle_manifest_session_id_with_a_lone_surrogate_keeps_the_samples(tmp_path: Path) -> None:
    """Fuzz case 2248 (seed 0): a manifest session id ``x\\udfff`` refused all 3 samples."""
    def edit(doc: dict) -> None:
        doc["session"]["session_id"] = "x\udfff"
        doc["session_id"] = "x\udfff"
    files = _edit_json(_bundle(tmp_path), "bundle/manifest.json", edit)
    _assert_reported(_load(files), "bundle/manifest.json", total=3)
    assert sum(s.event_count for s in _load(files).sessions) == 3


def test_v4_metadata_key_that_is_not_utf8_is_reported() -> None:
    """Fuzz case 1302 (seed 0): bytes ``c0 af`` inside a v4 line's metadata key name crashed the
    columnar capability checks (Arrow lets such key names through its validation)."""
    lines = [json.dumps(b.make_v4_record(timestamp_ns=b.START_NS + i, allocated=b.GIB + i)) for i in range(6)]
    damaged = lines[3].replace('"metadata": {', '"metadata": {"KEY": 1, ', 1)
    data = _jsonl([*lines[:3], damaged, *lines[4:]]).replace(b"KEY", b"\xc0\xaf", 1)
    loaded = _load({"v4.jsonl": data})
    _assert_reported(loaded, "v4.jsonl", total=6)
    assert len(loaded.events) == 5 and any(f"{ROOT}/v4.jsonl:4" in w for w in loaded.warnings), loaded.warnings


def test_bundle_sample_list_holding_a_list_is_reported(tmp_path: Path) -> None:
    """Fuzz case 2471 (seed 0): ``reserved`` holding ``[1142947840]`` among numbers crashed the
    numpy reading of the sample lists; that sample alone is dropped, with its number."""
    key = "bundle/telemetry_timeline.json"
    files = _edit_json(_bundle(tmp_path), key, lambda doc: doc["reserved"].__setitem__(1, [5]))
    loaded = _load(files)
    assert len(loaded.events) == 2
    assert any(f"{ROOT}/{key}:2" in w for w in loaded.warnings), loaded.warnings


def test_csv_header_name_that_is_not_utf8_is_reported(tmp_path: Path) -> None:
    """Fuzz case 541 (seed 1): a byte ``f5`` in a CSV header name crashed the columnar read of
    the header (Arrow keeps the bytes; decoding the name raised); the file is read row by row."""
    path = b.write_cpu_tracker_export(tmp_path / "cpu_events.csv", fmt="csv", samples=4)
    data = path.read_bytes().replace(b"collector", b"coll\xf5ctor", 1)
    loaded = _load({"cpu_events.csv": data})
    _assert_reported(loaded, "cpu_events.csv", total=len(data.splitlines()) - 1)
