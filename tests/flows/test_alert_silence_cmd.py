"""``stormwatch silence``: add (refusals exit 2), list, expire, against a local storage; no Prefect import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from stormwatch.flows.cli import main


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "fleet"
    folder.mkdir()
    return folder


def add(root: Path, *matchers: str, until: str = "2099-01-01", reason: str = "known") -> int:
    flags = [item for matcher in matchers for item in ("--match", matcher)]
    return main(["silence", "add", "--storage", str(root), *flags, "--until", until, "--reason", reason])


@pytest.mark.parametrize(("matchers", "until", "message"), [
    (("job=llama-*",), "2020-01-01", "is not in the future"),
    (("job=llama-*",), "someday", "is not a date"),
    (("jobs=llama-*",), "2099-01-01", "unknown name 'jobs'"),
    (("kind=oops",), "2099-01-01", "kind is one of"),
    (("llama",), "2099-01-01", "is not name=value"),
])
def test_add_refuses_with_exit_2(root: Path, capsys: pytest.CaptureFixture[str], matchers: tuple[str, ...],
                                 until: str, message: str) -> None:
    assert add(root, *matchers, until=until) == 2
    assert message in capsys.readouterr().err
    assert not (root / "reports" / "silences.json").exists()


def test_add_list_expire(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert add(root, "job=llama-*", "kind=regression", reason="known   leak") == 0
    first = capsys.readouterr().out
    identifier = first.split()[1]
    assert first.startswith(f"added {identifier} until 2099-01-02T00:00:00+00:00: job=llama-* kind=regression")
    assert add(root, "kind=regression", "job=llama-*", reason="known leak") == 0  # the same silence
    assert capsys.readouterr().out.startswith(f"already there: {identifier}")
    assert add(root, "host=node-7", until="2099-06-01T12:00") == 0
    capsys.readouterr()
    stored = orjson.loads((root / "reports" / "silences.json").read_bytes())
    assert [item["reason"] for item in stored["silences"]] == ["known leak", "known"]

    assert main(["silence", "list", "--storage", str(root)]) == 0
    listed = capsys.readouterr().out
    assert identifier in listed and "host=node-7" in listed and "2 silence(s)" in listed

    assert main(["silence", "expire", identifier, "--storage", str(root)]) == 0
    assert main(["silence", "expire", "s-00000000", "--storage", str(root)]) == 2
    capsys.readouterr()
    assert main(["silence", "list", "--storage", str(root)]) == 0
    assert identifier not in capsys.readouterr().out
    assert main(["silence", "list", "--storage", str(root), "--all"]) == 0
    assert f"{identifier}  expired" in capsys.readouterr().out


def test_a_damaged_silences_file_is_reported_not_overwritten(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "reports").mkdir()
    (root / "reports" / "silences.json").write_text('{"version": 1, "silences": [\n{"id": 1}\n]}')
    assert add(root, "job=x") == 1
    assert "reports/silences.json line 2: silence 1:" in capsys.readouterr().err
    assert (root / "reports" / "silences.json").read_text().startswith('{"version": 1, "silences": [\n{"id": 1}')


def test_no_storage_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("STORMWATCH_STORAGE", raising=False)
    assert main(["silence", "list"]) == 2 and "no storage" in capsys.readouterr().err


def test_silence_commands_never_import_prefect(root: Path) -> None:
    code = ("import sys; from stormwatch.flows.cli import main; "
            f"main(['silence', 'list', '--storage', {str(root)!r}]); print('prefect' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False")
