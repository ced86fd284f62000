"""Bad input drops only itself, with a warning naming the file and line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from stormwatch import load_artifacts
from tests import builders as b
from tests.reference import canonical, load_ours, ours, reference


def _records(n: int = 8, **kwargs: object) -> list[dict]:
    return b.timeline_records(samples=n, session_id="s-1", **kwargs)


def _jsonl_lines(records: list[dict]) -> list[bytes]:
    return [json.dumps(r).encode() for r in records]


def test_malformed_jsonl_line_drops_only_itself(tmp_path: Path) -> None:
    lines = _jsonl_lines(_records())
    lines.insert(3, b'{"schema_version": 3, "timestamp_ns": ')
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    loaded = load_artifacts([path])
    assert len(loaded.events) == len(lines) - 1
    assert any(f"{path}:4:" in w for w in loaded.warnings)
    assert reference([path])["events"] == []  # the reference drops the whole file


def test_record_breaking_a_rule_drops_only_itself_in_columnar_path(tmp_path: Path) -> None:
    records = _records()
    records[2]["device_used_bytes"] = records[2]["device_total_bytes"] + 1
    records[4]["rank"] = None
    records[5]["surprise"] = 1
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(_jsonl_lines(records)) + b"\n")
    loaded = load_artifacts([path])
    assert len(loaded.events) == len(records) - 3
    text = "\n".join(loaded.warnings)
    for line, reason in ((3, "cannot exceed"), (5, "rank must be an integer"), (6, "unknown telemetry field")):
        assert f"{path}:{line}: " in text and reason in text


def test_columnar_and_line_by_line_paths_agree(tmp_path: Path) -> None:
    """A file Arrow rejects (one bad line) is read line by line: same events otherwise."""
    lines = _jsonl_lines(_records(20, phases=b.DEFAULT_PHASES, alerts=b.DEFAULT_ALERTS))
    clean, dirty = tmp_path / "clean" / "events.jsonl", tmp_path / "dirty" / "events.jsonl"
    clean.parent.mkdir()
    dirty.parent.mkdir()
    clean.write_bytes(b"\n".join(lines) + b"\n")
    dirty.write_bytes(b"\n".join([*lines[:5], b"not json", *lines[5:]]) + b"\n")
    a, c = canonical(load_ours([clean])), canonical(load_ours([dirty]))
    assert a["events"] == c["events"] and a["markers"] == c["markers"]
    assert len(c["warnings"]) == 1 and "dirty/events.jsonl:6:" in c["warnings"][0]


def _edited(edit: Callable[[list[dict]], None]) -> Callable[[list[dict]], list[bytes]]:
    def lines(records: list[dict]) -> list[bytes]:
        edit(records)
        return _jsonl_lines(records)

    return lines


def _set(index: int, **fields: object) -> Callable[[list[dict]], None]:
    return lambda records: records[index].update(fields)


def _set_metadata(index: int, **fields: object) -> Callable[[list[dict]], None]:
    return lambda records: records[index]["metadata"].update(fields)


def _blank_lines(records: list[dict]) -> list[bytes]:
    lines = _jsonl_lines(records)
    return [*lines[:2], b"", b"   ", *lines[2:5], b"\t\r", *lines[5:]]


def _writer_key_order(records: list[dict]) -> list[bytes]:
    return [json.dumps(r, sort_keys=False).encode() for r in records]


# Each case turns clean records into JSONL lines that the columnar path must read
# exactly as the line-by-line path does.
COLUMNAR_CASES: dict[str, Callable[[list[dict]], list[bytes]]] = {
    "blank-and-whitespace-lines": _blank_lines,
    "keys-in-writer-order": _writer_key_order,
    "session-id-from-metadata": _edited(
        lambda r: (_set(3, session_id=None)(r), _set_metadata(3, session_id="from-metadata")(r))
    ),
    "null-session-id-without-fallback": _edited(_set(3, session_id=None)),
    "blank-session-id": _edited(_set(2, session_id="  ")),
    "null-metadata": _edited(_set(4, metadata=None)),
    "unknown-field-holding-null": _edited(_set(5, surprise=None)),
    "absent-nullable-field": _edited(lambda r: r[6].pop("context")),
    "null-rank-is-stated": _edited(_set(6, rank=None)),
    "absent-world-size-defaults": _edited(lambda r: r[3].pop("world_size")),
    "absent-local-rank-defaults": _edited(lambda r: r[3].pop("local_rank")),
    "collective-token-in-sample-metadata": _edited(_set_metadata(7, op="All-Reduce")),
    "blank-host": _edited(_set(7, host="\u2003")),
}


@pytest.mark.parametrize("name", sorted(COLUMNAR_CASES))
def test_columnar_path_equals_line_by_line_path(name: str, tmp_path: Path) -> None:
    """A trailing malformed line makes Arrow refuse the file, so it is read line by line."""
    lines = COLUMNAR_CASES[name](_records(10, phases=b.DEFAULT_PHASES[:2]))
    fast_path, slow_path = tmp_path / "fast" / "events.jsonl", tmp_path / "slow" / "events.jsonl"
    for path, extra in ((fast_path, []), (slow_path, [b"not json"])):
        path.parent.mkdir()
        path.write_bytes(b"\n".join([*lines, *extra]) + b"\n")
    fast, slow = load_artifacts([fast_path]), load_artifacts([slow_path])
    fast_events, slow_events = (canonical(ours(r, include_metadata=True))["events"] for r in (fast, slow))
    assert fast_events == slow_events
    assert fast.events["metadata_collective"].tolist() == slow.events["metadata_collective"].tolist()
    assert fast.markers == slow.markers
    # Same lines named (the first broken rule may be worded differently).
    fast_lines = [w.replace(str(fast_path), "F").split(" ")[0] for w in fast.warnings]
    slow_lines = [w.replace(str(slow_path), "F").split(" ")[0] for w in slow.warnings]
    assert fast_lines == slow_lines[:-1] and slow_lines[-1] == f"F:{len(lines) + 1}:"


def _first_metadata(value: object, *, raw: bytes | None = None) -> Callable[[list[dict]], list[bytes]]:
    """Lines whose first record's metadata holds ``value`` (or the raw JSON text ``raw``)."""

    def lines(records: list[dict]) -> list[bytes]:
        records[0]["metadata"]["x"] = "RAW" if raw is not None else value
        out = _jsonl_lines(records)
        return [out[0].replace(b'"RAW"', raw), *out[1:]] if raw is not None else out

    return lines


@pytest.mark.parametrize(
    ("damage", "bad_line"),
    [
        (lambda records: [b"null", *_jsonl_lines(records)], 1),
        (_first_metadata(None, raw=b"[" * 30_000 + b"]" * 30_000), 1),
        (_first_metadata(float("nan")), None),
    ],
    ids=["null-first-line", "metadata-nested-30000-deep", "nan-in-metadata"],
)
def test_lines_arrow_cannot_take_never_crash_the_load(damage, bad_line: int | None, tmp_path: Path) -> None:
    """Lines that would crash Arrow's parser, or that only the standard library reads."""
    lines = damage(_records(4))
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    loaded = load_artifacts([path])
    named = [w for w in loaded.warnings if str(path) in w]
    if bad_line is None:
        assert len(loaded.events) == len(lines) and not named
    else:
        assert len(loaded.events) == len(lines) - 1 and len(named) == 1 and f"{path}:{bad_line}:" in named[0]


def test_two_records_on_one_line_drop_that_line(tmp_path: Path) -> None:
    lines = _jsonl_lines(_records())
    lines[3:5] = [lines[3] + b" " + lines[4]]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    loaded = load_artifacts([path])
    assert len(loaded.events) == len(lines) - 1
    assert [w for w in loaded.warnings if f"{path}:4: malformed JSON" in w]


def test_explicit_files_keep_the_order_of_their_warnings(tmp_path: Path) -> None:
    """Files given one by one are parsed together, but report in the order given."""
    paths = []
    for name in ("a", "b"):
        lines = _jsonl_lines(_records(4))
        lines.insert(1, b"{")
        paths.append(tmp_path / f"{name}.jsonl")
        paths[-1].write_bytes(b"\n".join(lines) + b"\n")
    loaded = load_artifacts([paths[0], tmp_path / "nowhere", paths[1]])
    assert [w.split(":")[0] for w in loaded.warnings] == [str(paths[0]), "Path does not exist", str(paths[1])]


def test_torn_last_line_is_ignored_silently(tmp_path: Path) -> None:
    lines = _jsonl_lines(_records())
    path = tmp_path / "seg.jsonl"
    path.write_bytes(b"\n".join(lines) + b'\n{"schema_version": 3, "sess')
    loaded = load_artifacts([path])
    assert len(loaded.events) == len(lines) and loaded.warnings == ()


def test_truncated_json_array_keeps_complete_records(tmp_path: Path) -> None:
    path = b.write_json(tmp_path / "events.json", _records())
    text = path.read_text()
    path.write_text(text[: int(len(text) * 0.6)])
    loaded = load_artifacts([path])
    assert 0 < len(loaded.events) < len(_records())
    assert any(str(path) in w and "line" in w for w in loaded.warnings)


def test_garbage_csv_cell_and_short_row(tmp_path: Path) -> None:
    path = tmp_path / "cpu.csv"
    b.write_cpu_tracker_export(path, fmt="csv", samples=6)
    rows = path.read_text().splitlines()
    header = rows[0].split(",")
    cells = rows[2].split(",")
    cells[header.index("timestamp_ns")] = "soon"
    rows[2] = ",".join(cells)
    rows[4] = ",".join(rows[4].split(",")[:5])
    path.write_text("\n".join(rows) + "\n")
    loaded = load_artifacts([path])
    assert len(loaded.events) == len(rows) - 3
    text = "\n".join(loaded.warnings)
    assert f"{path}:3:" in text and "not a number" in text
    assert f"{path}:5:" in text


def test_csv_integers_are_exact(tmp_path: Path) -> None:
    records = _records(3)
    for i, record in enumerate(records):
        record["timestamp_ns"] = 1_700_000_000_123_456_789 + i
    path = tmp_path / "x_events.csv"
    header = list(records[0])
    lines = [",".join(header)] + [
        ",".join("" if r[k] is None else json.dumps(r[k]).strip('"') if k != "metadata" else '"{}"' for k in header)
        for r in records
    ]
    path.write_text("\n".join(lines) + "\n")
    ours = load_artifacts([path]).events["timestamp_ns"].tolist()
    assert ours == [r["timestamp_ns"] for r in records]
    theirs = [e[1] for e in reference([path])["events"]]
    assert theirs != ours  # the reference rounds through float


def test_non_utf8_bytes_drop_their_line(tmp_path: Path) -> None:
    lines = _jsonl_lines(_records())
    lines[2] = lines[2].replace(b'"s-1"', b'"s-\xff\xfe"')
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    loaded = load_artifacts([path])
    assert len(loaded.events) == len(lines) - 1
    assert any(f"{path}:3: not valid UTF-8" in w for w in loaded.warnings)
    csv_path = tmp_path / "bad_events.csv"
    csv_path.write_bytes(b"schema_version,host\n3,h\xff\n")
    assert any(str(csv_path) in w for w in load_artifacts([csv_path]).warnings)


def test_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    records = _records()
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(_jsonl_lines(records)) + b"\r\n")
    as_json = tmp_path / "b_events.json"
    as_json.write_bytes(b"\xef\xbb\xbf" + json.dumps(records, indent=1).replace("\n", "\r\n").encode())
    for path in (jsonl, as_json):
        loaded = load_artifacts([path])
        assert len(loaded.events) == len(records) and loaded.warnings == ()


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: p / "nowhere", "Path does not exist"),
        (lambda p: (p / "notes.txt").write_text("hi") and p / "notes.txt", "Unsupported artifact file type"),
    ],
)
def test_missing_path_and_unsupported_type(tmp_path: Path, make, expected: str) -> None:
    good = b.write_json(tmp_path / "good.json", _records())
    loaded = load_artifacts([make(tmp_path), good])
    assert any(expected in w for w in loaded.warnings)
    assert len(loaded.events) == len(_records())


def test_empty_folder(tmp_path: Path) -> None:
    loaded = load_artifacts([tmp_path])
    assert loaded.events.empty and loaded.selected_session_id is None
    assert any("No telemetry artifacts" in w for w in loaded.warnings)


def test_nested_sinks_and_any_jsonl_are_found(tmp_path: Path) -> None:
    b.write_sink(tmp_path / "job" / "rank_0" / "telemetry", records=_records(6, rank=0, world_size=2, job_id="j"))
    records = b.timeline_records(samples=6, session_id="r1", rank=1, world_size=2, job_id="j")
    b.write_jsonl(tmp_path / "job" / "rank_1" / "dump.jsonl", records)
    loaded = load_artifacts([tmp_path / "job"])
    assert sorted(set(loaded.events["rank"])) == [0, 1]
    assert reference([tmp_path / "job"])["events"] == []  # the reference finds neither


def test_schema_v4_records_load(tmp_path: Path) -> None:
    records = [
        b.make_v4_record(timestamp_ns=b.START_NS + i * 10**9, capabilities=b.CPU_CAPABILITIES)
        for i in range(4)
    ]
    path = b.write_jsonl(tmp_path / "v4.jsonl", records)
    loaded = load_artifacts([path])
    assert len(loaded.events) == 4 and loaded.warnings == ()
    assert set(loaded.events["schema_version"]) == {4}
    assert "memory_capabilities" in loaded.events["metadata"].iloc[0]


def test_rank_from_path_never_looks_above_the_input_root(tmp_path: Path) -> None:
    outer = tmp_path / "rank_7_experiments" / "job"
    b.write_diagnose_bundle(outer / "bundle", timestamps_s=[1.0, 2.0], allocated=[1, 2], manifest=None)
    ours = load_artifacts([outer])
    assert set(ours.events["rank"]) == {0}
    theirs = reference([outer / "bundle"])
    assert {e[18] for e in theirs["events"]} == {7}
