"""The job document, model.json, as a typed and frozen :class:`JobDocument`.

One document is one session of a job (what ``--session ID`` diagnoses) or, with the job-level
members, the job diagnosed session by session (:mod:`stormwatch.outputs.job_document`). Members, in
the order model.json writes them:

- ``schema_version`` (:data:`MODEL_SCHEMA_VERSION`), ``job_id``, ``source`` (where the inputs were
  read), ``generated_at`` (when it was diagnosed), ``engine_version``, ``input_fingerprint``
  (:func:`~stormwatch.outputs.model_json.input_fingerprint`), ``options``
  (:class:`~stormwatch.outputs.recorded_options.RecordedOptions`);
- ``selected_session_id``, ``sessions`` (every session the loader found, with ``events`` for
  :attr:`~stormwatch.events.sessions.SessionSummary.event_count`), ``sources_loaded``, ``warnings``
  (the loader's, the cut-short sentences, the job's own), ``cut_short``
  (:mod:`stormwatch.outputs.cut_short`), ``oom_dumps`` (only when the job has OOM flight-recorder
  dumps: what each says, :class:`~stormwatch.formats.oom_dump.OomDump`), ``verdict``;
- ``model`` (the reference's diagnostics model, :mod:`stormwatch.outputs.document_model`) and
  ``fleet`` beside it (:mod:`stormwatch.outputs.document_fleet`);
- in a job document only: ``attempts`` (:mod:`stormwatch.outputs.document_attempts`), ``session_count``
  (session groups found), ``sessions_diagnosed`` and ``worst_session`` (the verdict's session).

A document holds exactly what its model.json holds: the engine's values are made JSON-safe
(:func:`~stormwatch.outputs.model_json.json_safe`) when the document is built, so
``JobDocument.from_json(doc.to_json(), name=...).to_json() == doc.to_json()``. Documents written
before a member existed read as the code reading them has always taken them: no ``options``
(None: compares unequal to any), ``selected_session_id`` (None), ``cut_short`` (none), ``fleet``
(None) or job-level members (a one-session document).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from stormwatch.analysis.model import DiagnosticsModel
from stormwatch.events.sessions import SessionStatus, SessionSummary
from stormwatch.formats.oom_dump import OomDump
from stormwatch.history.job_regression import RegressionSummary
from stormwatch.outputs.cut_short import CutShortEntry
from stormwatch.outputs.document_attempts import AttemptEntry
from stormwatch.outputs.document_fleet import FleetMember
from stormwatch.outputs.document_model import model_from_json
from stormwatch.outputs.json_members import MemberError, Members, shown
from stormwatch.outputs.model_json import json_safe
from stormwatch.outputs.recorded_options import OptionValue, RecordedOptions
from stormwatch.outputs.verdict import ExitCode, Verdict, VerdictStatus

MODEL_SCHEMA_VERSION = 1
_JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
_JOB_MEMBERS = ("attempts", "session_count", "sessions_diagnosed", "worst_session")


class DocumentError(ValueError):
    """A model.json that does not read: ``name`` is the file, ``member`` the path of the member at
    fault (None: the file as a whole: not JSON, not an object), ``problem`` what is wrong."""

    def __init__(self, name: str, member: str | None, problem: str) -> None:
        where = f'member "{member}": ' if member is not None else ""
        super().__init__(f"{name}: {where}{problem}")
        self.name = name
        self.member = member
        self.problem = problem


def _session_data(summary: SessionSummary) -> dict[str, Any]:
    data = {field.name: getattr(summary, field.name) for field in dataclasses.fields(summary)}
    data["status"] = str(summary.status)
    data["events"] = data.pop("event_count")
    return data


#: What a ``sessions`` entry written before a summary member existed means by its absence.
_SESSION_DEFAULTS: dict[str, Any] = {field.name: field.default for field in dataclasses.fields(SessionSummary)}


def _session(members: Members) -> SessionSummary:
    defaults = _SESSION_DEFAULTS  # keeps the members below on one line each
    return SessionSummary(
        session_id=members.text("session_id"),
        status=members.enum("status", SessionStatus, "a session status"),
        started_at_ns=members.integer("started_at_ns"),
        ended_at_ns=members.optional_integer("ended_at_ns"),
        host=members.text("host"),
        pid=members.integer("pid"),
        job_id=members.optional_text("job_id"),
        rank=members.integer("rank", defaults["rank"]),
        local_rank=members.integer("local_rank", defaults["local_rank"]),
        world_size=members.integer("world_size", defaults["world_size"]),
        source=members.text("source", defaults["source"]),
        event_count=members.integer("events", defaults["event_count"]),
    )


def _verdict_data(verdict: Verdict) -> dict[str, Any]:
    return {"status": verdict.status.value, "exit_code": int(verdict.exit_code), "summary": verdict.summary}


def _verdict(members: Members) -> Verdict:
    code = members.integer("exit_code")
    try:
        exit_code = ExitCode(code)
    except ValueError:
        raise members.error("exit_code", f"{code} is not an exit code") from None
    return Verdict(members.enum("status", VerdictStatus, "a verdict status"), exit_code, members.text("summary"))


def _generated_at(members: Members) -> datetime:
    text = members.text("generated_at")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise members.error("generated_at", f"{shown(text)} is not an ISO 8601 time") from None


def _job_members(members: Members) -> dict[str, Any]:
    """The job-level members (all four, or none in a one-session document) as keyword arguments."""
    present = [name for name in _JOB_MEMBERS if members.has(name)]
    if not present:
        return {}
    if len(present) < len(_JOB_MEMBERS):
        missing = next(name for name in _JOB_MEMBERS if name not in present)
        raise members.error(missing, f"missing (a job document has {', '.join(_JOB_MEMBERS)})")
    return {"attempts": members.each("attempts", AttemptEntry.from_json),
            "session_count": members.integer("session_count"),
            "sessions_diagnosed": members.integer("sessions_diagnosed"),
            "worst_session": members.optional_text("worst_session")}


def _default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # object arrays (v4 timelines holding None)
        return value.tolist()
    raise TypeError(f"cannot serialise {type(value).__name__}")


@dataclass(frozen=True, kw_only=True, slots=True)
class JobDocument:
    """A diagnosed session, or job (the job-level members set), as model.json holds it (members in
    the module docstring).

    Units: ``generated_at`` is when the document was made (the engine's and the audit's times are
    UTC); everything ``*_ns`` is ns since the epoch, ``*_s`` seconds, memory bytes. Invariants:
    ``schema_version`` is :data:`MODEL_SCHEMA_VERSION`; ``attempts``, ``session_count`` and
    ``sessions_diagnosed`` are all None (a one-session document) or all set; every string is valid
    UTF-8 and every integer fits int64 or uint64 (the engine's values were made JSON-safe). Compare
    documents by their :meth:`to_json` bytes: the model's numpy timelines do not compare as values.
    """

    schema_version: int = MODEL_SCHEMA_VERSION
    job_id: str
    source: str
    generated_at: datetime
    engine_version: str
    input_fingerprint: str
    options: RecordedOptions | None = None
    selected_session_id: str | None = None
    sessions: tuple[SessionSummary, ...]
    sources_loaded: tuple[str, ...]
    warnings: tuple[str, ...]
    cut_short: tuple[CutShortEntry, ...] = ()
    oom_dumps: tuple[OomDump, ...] = ()
    verdict: Verdict
    model: DiagnosticsModel
    fleet: FleetMember | None = None
    attempts: tuple[AttemptEntry, ...] | None = None
    session_count: int | None = None
    sessions_diagnosed: int | None = None
    worst_session: str | None = None

    def __post_init__(self) -> None:
        if self.schema_version != MODEL_SCHEMA_VERSION:
            raise ValueError(f"schema_version must be {MODEL_SCHEMA_VERSION}, got {self.schema_version}")
        job_level = (self.attempts is None, self.session_count is None, self.sessions_diagnosed is None)
        if len(set(job_level)) > 1:
            raise ValueError("attempts, session_count and sessions_diagnosed are set together (a job document)")

    def as_data(self) -> dict[str, Any]:
        """The document as the plain data :meth:`to_json` writes: dicts, lists and tuples, with the
        model as its dataclass (rank keys as ints) and timelines as numpy arrays."""
        data: dict[str, Any] = {
            "schema_version": self.schema_version, "job_id": self.job_id, "source": self.source,
            "generated_at": self.generated_at.isoformat(), "engine_version": self.engine_version,
            "input_fingerprint": self.input_fingerprint,
            "options": None if self.options is None else dict(self.options),
            "selected_session_id": self.selected_session_id,
            "sessions": [_session_data(summary) for summary in self.sessions],
            "sources_loaded": list(self.sources_loaded), "warnings": list(self.warnings),
            "cut_short": [entry.as_json() for entry in self.cut_short],
            **({"oom_dumps": [dump.as_json() for dump in self.oom_dumps]} if self.oom_dumps else {}),
            "verdict": _verdict_data(self.verdict), "model": self.model,
            "fleet": None if self.fleet is None else self.fleet.as_json(),
        }
        if self.attempts is not None:
            data.update(attempts=[entry.as_json() for entry in self.attempts], session_count=self.session_count,
                        sessions_diagnosed=self.sessions_diagnosed, worst_session=self.worst_session)
        return data

    def to_json(self) -> bytes:
        """model.json's bytes (UTF-8; rank keys as strings; numpy timelines written natively)."""
        return orjson.dumps(self.as_data(), option=_JSON_OPTIONS, default=_default)

    def parsed(self) -> dict[str, Any]:
        """What ``orjson.loads(self.to_json())`` gives, for readers that take model.json as parsed JSON
        (alerting's ``JobFinding``), except that the timelines stay numpy arrays: writing and parsing
        every sample again would cost more than the rest of the document together."""
        timelines = self.model.per_rank_timelines
        rest = dataclasses.replace(self, model=dataclasses.replace(self.model, per_rank_timelines={}))
        data: dict[str, Any] = orjson.loads(rest.to_json())
        data["model"]["per_rank_timelines"] = {str(rank): dict(series) for rank, series in timelines.items()}
        return data

    @classmethod
    def from_json(cls, data: bytes, *, name: str) -> JobDocument:
        """The document model.json's bytes ``data`` hold (``name``: the file, for errors); raises
        :class:`DocumentError` for bytes that are not JSON, JSON that is not an object, another
        schema version or a member that is missing or malformed."""
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise DocumentError(name, None, f"not JSON ({exc})") from None
        return cls.from_data(parsed, name=name)

    @classmethod
    def from_data(cls, data: Any, *, name: str) -> JobDocument:
        """:meth:`from_json` of parsed JSON, or of the engine's JSON-safe data (tuples, int rank keys,
        numpy timelines), which the document then holds without copying its arrays."""
        if not isinstance(data, Mapping):
            raise DocumentError(name, None, f"{shown(data)} is not a JSON object")
        members = Members(data)
        try:
            version = members.integer("schema_version")
            if version != MODEL_SCHEMA_VERSION:
                raise members.error("schema_version", f"{version} is not {MODEL_SCHEMA_VERSION} "
                                                      "(the schema version this stormwatch reads)")
            options = members.optional_member("options")
            fleet = members.optional_member("fleet")
            return cls(
                job_id=members.text("job_id"), source=members.text("source"),
                generated_at=_generated_at(members), engine_version=members.text("engine_version"),
                input_fingerprint=members.text("input_fingerprint"),
                options=None if options is None else RecordedOptions.from_json(options),
                selected_session_id=members.optional_text("selected_session_id"),
                sessions=members.each("sessions", _session), sources_loaded=members.texts("sources_loaded"),
                warnings=members.texts("warnings"), cut_short=members.each("cut_short", CutShortEntry.from_json, ()),
                oom_dumps=_oom_dumps(members),
                verdict=_verdict(members.member("verdict")), model=model_from_json(members.member("model")),
                fleet=None if fleet is None else FleetMember.from_json(fleet), **_job_members(members),
            )
        except MemberError as exc:
            raise DocumentError(name, exc.member, exc.problem) from None

    def with_generated_at(self, moment: datetime) -> JobDocument:
        return dataclasses.replace(self, generated_at=moment)

    def with_regression(self, regression: RegressionSummary | None) -> JobDocument:
        """This document with ``fleet.regression`` set; unchanged when it has no ``fleet`` member."""
        if self.fleet is None:
            return self
        return dataclasses.replace(self, fleet=dataclasses.replace(self.fleet, regression=regression))

    def for_job(self, *, options: Mapping[str, OptionValue], warnings: Sequence[str], verdict: Verdict,
                attempts: Sequence[AttemptEntry], session_count: int, worst_session: str | None) -> JobDocument:
        """This (the default session's) document as its job's: the job's ``options``, ``verdict`` and
        job-level members, ``warnings`` after its own. The new values are made JSON-safe, as the
        engine's always are."""
        safe = Members(json_safe({
            "options": dict(options), "warnings": list(warnings), "verdict": _verdict_data(verdict),
            "attempts": [entry.as_json() for entry in attempts], "session_count": session_count,
            "sessions_diagnosed": sum(entry.attempt.diagnosed for entry in attempts), "worst_session": worst_session,
        }))
        return dataclasses.replace(self, options=RecordedOptions.from_json(safe.member("options")),
                                   warnings=(*self.warnings, *safe.texts("warnings")),
                                   verdict=_verdict(safe.member("verdict")), **_job_members(safe))


def _oom_dumps(members: Members) -> tuple[OomDump, ...]:
    items = members.array("oom_dumps", ())
    if not all(isinstance(item, Mapping) and isinstance(item.get("folder"), str) for item in items):
        raise members.error("oom_dumps", "holds an entry that is not an object with a folder")
    return tuple(OomDump.from_json(dict(item)) for item in items)
