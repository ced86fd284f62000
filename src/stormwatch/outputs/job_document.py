"""A job diagnosed session by session as one model.json: the job document.

It is the default session's document (``model``, ``sessions``, ``fleet``... exactly as a
one-session diagnosis writes them, so tools reading model.json see what they always saw) with:

- ``verdict``: the job's, the worst verdict of its sessions (:func:`job_verdict`); its summary
  names the attempt it comes from when the job has more than one;
- ``attempts``: one :meth:`~stormwatch.outputs.attempts.Attempt.as_json` per session, in time order,
  each with ``ranks``: its rank rows and facts (what fleet.parquet holds of it);
- ``session_count`` (every session group, diagnosed or not), ``sessions_diagnosed``,
  ``worst_session`` (the session id the verdict comes from);
- ``options``: the job's (``all_sessions``, ``max_sessions``), and the job's ``warnings`` (sessions
  over the cap, sessions that could not be diagnosed or written) after the loader's and after the
  sentences naming files that end mid-record; those files' ``cut_short`` member is the default
  session's unchanged: it lists every session's (:mod:`stormwatch.outputs.cut_short`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stormwatch.outputs.attempts import Attempt, worst_attempt
from stormwatch.outputs.model_json import json_safe
from stormwatch.outputs.verdict import Verdict, exit_code_for
from stormwatch.severity import FailOn


def job_verdict(attempts: Sequence[Attempt], verdicts: Mapping[str, Verdict], *, fail_on: FailOn) -> Verdict | None:
    """The job's verdict: that of its worst attempt (``verdicts``: by session id), exit code under
    ``fail_on``. One diagnosed attempt gives its verdict unchanged; with several the summary says
    which attempt it is (``critical: from attempt 1 of 2, interrupted, OOM on rank 3 (session s-1);
    4/4 ranks present; ...``). None when no attempt was diagnosed."""
    worst = worst_attempt(attempts)
    if worst is None or worst.verdict is None:
        return None
    own = verdicts[worst.session_id]
    if sum(attempt.diagnosed for attempt in attempts) == 1:
        return own
    _, _, rest = own.summary.partition(": ")
    summary = f"{worst.verdict.value}: from {worst.describe()} (session {worst.session_id}); {rest or own.summary}"
    return Verdict(worst.verdict, exit_code_for(worst.verdict, fail_on), summary)


def job_document(
    base: Mapping[str, Any],
    *,
    attempts: Sequence[Attempt],
    ranks: Mapping[str, Sequence[Mapping[str, Any]]],
    verdict: Verdict,
    options: Mapping[str, Any],
    warnings: Sequence[str],
    session_count: int,
) -> dict[str, Any]:
    """The job document from ``base`` (the default session's document, left unchanged: its ``fleet``
    member is copied, so the caller may fill the job's ``fleet.regression``); ``ranks``: each
    diagnosed attempt's rank rows by session id (:func:`stormwatch.outputs.fleet.session_rank_rows`)."""
    worst = worst_attempt(attempts)
    document = dict(base)
    if isinstance(base.get("fleet"), Mapping):
        document["fleet"] = dict(base["fleet"])
    document["options"] = dict(options)
    document["warnings"] = [*base.get("warnings", ()), *warnings]
    document["verdict"] = {"status": verdict.status.value, "exit_code": int(verdict.exit_code),
                           "summary": verdict.summary}
    document["attempts"] = json_safe([
        {**attempt.as_json(), "ranks": list(ranks.get(attempt.session_id, ()))} for attempt in attempts
    ])
    document["session_count"] = session_count
    document["sessions_diagnosed"] = sum(attempt.diagnosed for attempt in attempts)
    document["worst_session"] = None if worst is None else worst.session_id
    return document
