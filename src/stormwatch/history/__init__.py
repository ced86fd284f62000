"""Fleet history: one row per (audit, job, session, rank) kept across nights, and the analytics over it.

Pure engine code (pandas and pyarrow only; no storage, Prefect or network): :mod:`.schema` (the
Arrow schema and the Parquet file layout), :mod:`.job_names` (job id → job name),
:mod:`.rows` (job documents → history rows; not re-exported here: it reads
:mod:`stormwatch.outputs.document`, which reads this package's regressions), :mod:`.frame` (a history table as the
analytics' DataFrame, one run per job), :mod:`.regressions`, :mod:`.suspects`, :mod:`.trends`.
``stormwatch.tasks.history`` stores and reads the rows.
"""

from __future__ import annotations

from stormwatch.history.job_names import DEFAULT_JOB_NAME_REGEX, JobNamePattern, JobNamePatternError
from stormwatch.history.regressions import RegressionMetric, RegressionStatus, RegressionThresholds, find_regressions
from stormwatch.history.schema import HISTORY_SCHEMA, HISTORY_SCHEMA_VERSION
from stormwatch.history.suspects import SuspectThresholds, find_suspects, wilson_lower_bound
from stormwatch.history.trends import nightly_trends

__all__ = [
    "DEFAULT_JOB_NAME_REGEX",
    "HISTORY_SCHEMA",
    "HISTORY_SCHEMA_VERSION",
    "JobNamePattern",
    "JobNamePatternError",
    "RegressionMetric",
    "RegressionStatus",
    "RegressionThresholds",
    "SuspectThresholds",
    "find_regressions",
    "find_suspects",
    "nightly_trends",
    "wilson_lower_bound",
]
