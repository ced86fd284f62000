"""``--leak-min`` (issue 30): ``stormwatch diagnose`` judges leaks against it and records it in model.json
only when not the default; a bad value is one line and exit 2 before anything loads or Prefect is
imported; an audit run with another leak-min than the job's document re-diagnoses the job."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.cli import main
from stormwatch.flows.parameters import AuditParameters
from stormwatch.growth.leak_min import DEFAULT_LEAK_MIN, parse_leak_min
from tests import builders as b

LEAKING_RANK = 1
DEVICE_BYTES = 80 * b.GIB  # builders.training's device
FIRST_NIGHT = datetime(2026, 10, 1, 2, 0, tzinfo=UTC)


def write_leaky(root: Path) -> None:
    """4 ranks, two hours each; rank 1 leaks 4 GiB/h."""
    b.write_multi_rank_job(root, world_size=4, job_id="leaky", samples=lambda rank: b.training(
        rank, leak_bytes_per_hour=4 * b.GIB if rank == LEAKING_RANK else 0.0))


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("leak-min") / "leaky"
    write_leaky(root)
    return root


@pytest.mark.parametrize(("flags", "leaks", "threshold", "recorded"), [
    ([], [LEAKING_RANK], 0.005 * DEVICE_BYTES, None),
    (["--leak-min", "default"], [LEAKING_RANK], 0.005 * DEVICE_BYTES, None),
    (["--leak-min", "8GiB/h"], [], 8 * b.GIB, "8GiB/h"),
    (["--leak-min", "1%/h"], [LEAKING_RANK], 0.01 * DEVICE_BYTES, "1%/h"),
    (["--leak-min", "8192 mib/h"], [], 8 * b.GIB, "8GiB/h"),  # recorded in its canonical text
    (["--leak-min", "1GiB/h,6%/h"], [], 0.06 * DEVICE_BYTES, "1GiB/h,6%/h"),  # 4.8 GiB/h: the share wins
])
def test_diagnose_judges_leaks_against_the_leak_min_and_records_it_only_when_given(
    leaky: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], leaks: list[int],
    threshold: float, recorded: str | None
) -> None:
    assert main(["diagnose", str(leaky), "--out", str(tmp_path), *flags]) == 0
    printed = capsys.readouterr().out.splitlines()  # the verdict is stormlog's; a leak is said beside it
    assert printed[0] == "leaky: CLEAN: no anomaly" + ("; rank 1 leaks" if leaks else "") + " (exit 0)"
    told = [line for line in printed if line.startswith("  leak ")]
    assert len(told) == len(leaks) and all("rank 1 on node-0 GPU 1 grows" in line for line in told)
    job = orjson.loads((tmp_path / "model.json").read_bytes())
    sessions = sorted(tmp_path.glob("sessions/*/model.json"))
    assert sessions  # every session's document, and the job's, carry the options and the leaks
    for document in [job, *(orjson.loads(path.read_bytes()) for path in sessions)]:
        growth = document["fleet"]["growth"]
        assert [figure["rank"] for figure in growth if figure["leak"]] == leaks
        assert [figure["leak_min_bytes_per_hour"] for figure in growth] == pytest.approx([threshold] * 4)
        assert document["options"].get("leak_min") == recorded
        assert ("leak_min" in document["options"]) is (recorded is not None)


@pytest.mark.parametrize(("value", "problem"), [
    ("8GB/h", "has unknown unit 'GB'"),
    ("512MiB", "is not a number with a unit per hour"),
    ("0%/h", "is a share outside (0, 100] %"),
])
def test_a_bad_leak_min_is_one_line_and_exit_2(leaky: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               value: str, problem: str) -> None:
    assert main(["diagnose", str(leaky), "--out", str(tmp_path), "--leak-min", value]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [captured.err.rstrip("\n")]
    assert captured.err.startswith(f"error: --leak-min {value!r} {problem}")
    assert "use 512MiB/h, 1.5GiB/h, 268435456/h (bytes), 0.8%/h (of the rank's device)" in captured.err
    assert not (tmp_path / "model.json").exists()


_REFUSE = """
import sys, time
started = time.perf_counter()
from stormwatch.flows.cli import main
code = main(sys.argv[1:])
print(code, "prefect" in sys.modules, time.perf_counter() - started)
"""


@pytest.mark.parametrize("command", [["diagnose", "{job}"], ["audit", "--storage", "{root}"],
                                     ["post-job", "leaky", "--storage", "{root}"],
                                     ["serve", "--storage", "{root}", "--temporary-server"]])
def test_a_bad_leak_min_is_refused_fast_without_prefect(leaky: Path, command: list[str]) -> None:
    argv = [part.format(job=leaky, root=leaky.parent) for part in command] + ["--leak-min", "fast"]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_REFUSE), *argv], capture_output=True, text=True,
                          timeout=60, check=True)
    code, prefect, _ = done.stdout.split()
    assert (int(code), prefect) == (2, "False")
    assert done.stderr.startswith("error: --leak-min 'fast' is not a number with a unit per hour")
    assert len(done.stderr.splitlines()) == 1
    assert time.perf_counter() - started < 20  # an import and a refusal: no server, no load


@pytest.mark.parametrize(("given", "stored", "recorded"), [
    (None, None, None), ("default", "default", None), (" 8 GiB/h ", "8GiB/h", "8GiB/h"), ("0.8%/h", "0.8%/h", "0.8%/h"),
])
def test_the_parameter_is_canonical_and_reaches_the_diagnose_options(given: str | None, stored: str | None,
                                                                     recorded: str | None) -> None:
    from stormwatch.flows.audit import audit_options

    params = AuditParameters.parse({"storage": "x", "leak_min": given})
    assert params.leak_min == stored
    assert params.as_deployment()["leak_min"] == stored
    options = audit_options(params).diagnose
    assert options.leak_min == (DEFAULT_LEAK_MIN if given is None else parse_leak_min(given))
    assert options.recorded().get("leak_min") == recorded
    assert options.growth_settings().leak_min == options.leak_min
    assert DiagnoseOptions.parse(leak_min=given).recorded().get("leak_min") == recorded
    assert options.for_session("s").leak_min == options.leak_min  # each session is judged the same way


def test_a_bad_parameter_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"^--leak-min '1 GiB' is not a number with a unit per hour: use ") as caught:
        AuditParameters.parse({"storage": "x", "leak_min": "1 GiB"})
    assert "\n" not in str(caught.value)
    assert AuditParameters.parse({"storage": "x", "leak_min": "  "}).leak_min is None  # blank: the default


def fleet_leaks(root: Path) -> int:
    rows = {row["job_id"]: row for row in orjson.loads((root / "reports" / "fleet.json").read_bytes())["jobs"]}
    return int(rows["leaky"]["leaks"])


@pytest.mark.usefixtures("prefect_api")
def test_an_audit_with_another_leak_min_rediagnoses_the_job(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    write_leaky(root / "jobs" / "leaky")
    nights = iter(FIRST_NIGHT + timedelta(days=day) for day in range(10))

    def audit(leak_min: str | None) -> dict[str, int]:
        result: Any = nightly_audit(AuditParameters(storage=str(root), as_of=next(nights), workers=1,
                                                    leak_min=leak_min))
        return {name: result["summary"][name] for name in ("diagnosed", "skipped")}

    def recorded() -> object:
        return json.loads((root / "reports" / "leaky" / "model.json").read_bytes())["options"].get("leak_min")

    assert audit(None) == {"diagnosed": 1, "skipped": 0}
    assert fleet_leaks(root) == 1 and recorded() is None
    assert audit("default") == {"diagnosed": 0, "skipped": 1}  # the default, said: the document is unchanged
    assert audit("8GiB/h") == {"diagnosed": 1, "skipped": 0}  # another leak-min: diagnosed again
    assert fleet_leaks(root) == 0 and recorded() == "8GiB/h"
    assert audit("8192MiB/h") == {"diagnosed": 0, "skipped": 1}  # the same leak-min, written otherwise
    assert audit(None) == {"diagnosed": 1, "skipped": 0}  # back to the default: the leak is back
    assert fleet_leaks(root) == 1 and recorded() is None
