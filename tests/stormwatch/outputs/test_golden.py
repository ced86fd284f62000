"""model.json and report.html bytes for the fixture jobs of :mod:`.golden_jobs` (a one-session job, a
restarted one, one with a file cut mid-record, one with hostile telemetry, one the audit compared with
earlier runs) are those the code wrote before :class:`JobDocument`, ``generated_at`` pinned; and a
model.json read back writes and renders the same bytes again."""

from __future__ import annotations

from pathlib import Path

import pytest

from stormwatch.outputs.document import JobDocument
from stormwatch.reports.jobattempts import PageNav
from stormwatch.reports.jobdetail import detail_model_path
from stormwatch.reports.render import render_job
from tests.stormwatch.outputs.golden_jobs import FIXTURES, expected, golden_names, outputs

MODEL_JSONS = [name for name in golden_names() if name.endswith("model.json")]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for name in FIXTURES:
        files.update(outputs(name, tmp_path_factory.mktemp(name)))
    return files


def test_every_fixture_writes_the_golden_files(written: dict[str, bytes]) -> None:
    assert sorted(written) == golden_names()
    assert {name.split("/")[0] for name in MODEL_JSONS} == set(FIXTURES)


@pytest.mark.parametrize("name", golden_names())
def test_the_bytes_are_those_written_before(written: dict[str, bytes], name: str) -> None:
    assert written[name] == expected(name)


@pytest.mark.parametrize("name", MODEL_JSONS)
def test_a_golden_model_json_reads_back_and_writes_the_same_bytes(name: str) -> None:
    data = expected(name)
    document = JobDocument.from_json(data, name=name)
    assert document.to_json() == data
    assert JobDocument.from_json(document.to_json(), name=name).to_json() == data


def _nav(name: str) -> PageNav | None:
    """The page's place: a session's page names its attempt, as the job document describes it."""
    fixture, _, rest = name.partition("/")
    if not rest.startswith("sessions/"):
        return None
    job = JobDocument.from_json(expected(f"{fixture}/model.json"), name=fixture)
    folder = str(Path(rest).parent)
    attempt = next(entry.attempt for entry in job.attempts or () if entry.attempt.report == f"{folder}/report.html")
    return PageNav.for_session(depth=folder.count("/") + 1, attempt=attempt.describe())


def _detail(name: str, document: JobDocument) -> JobDocument | None:
    """The worst attempt's own document, which a job's page details when it is not the default session's."""
    path = detail_model_path(document)
    if path is None:
        return None
    key = f"{name.removesuffix('model.json')}{path}"
    return JobDocument.from_json(expected(key), name=key)


@pytest.mark.parametrize("name", MODEL_JSONS)
def test_a_model_json_read_back_renders_the_golden_report(name: str) -> None:
    document = JobDocument.from_json(expected(name), name=name)
    page = name.removesuffix("model.json") + "report.html"
    assert render_job(document, nav=_nav(name), detail=_detail(name, document)).encode("utf-8") == expected(page)
