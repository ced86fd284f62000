"""Timeouts of the flows and tasks, in seconds: nothing the pipeline runs may wait forever.

Prefect enforces ``timeout_seconds`` by ending the run Failed ("TimedOut"); it cannot interrupt a
thread blocked in a system call, so work that can block there (a job's reads) runs in a worker
process the engine pool kills at the job timeout (:data:`~stormwatch.tasks.engine_pool.DEFAULT_JOB_TIMEOUT_S`,
``--job-timeout``), and HTTP and SMTP calls carry their own timeouts (:mod:`stormwatch.tasks.notify`).
The values below bound each step generously: they catch a hang, never a slow but moving audit.
"""

from __future__ import annotations

#: The nightly-audit flow: the whole audit of a fleet (six hours).
AUDIT_FLOW_TIMEOUT_S = 6 * 3600.0
#: The post-job flow: one job, its lease wait, its commit and notifications (one hour).
POST_JOB_FLOW_TIMEOUT_S = 3600.0
#: A task reading or writing fleet-wide state (inventory, previous fleet, history, publish, commits,
#: retention, sweep): one hour.
FLEET_IO_TASK_TIMEOUT_S = 3600.0
#: One diagnose-batch task: its jobs each end by the job timeout, but wait for engine slots shared
#: with the other batches (four hours).
BATCH_TASK_TIMEOUT_S = 4 * 3600.0
#: One diagnose-job task (post-job), its retries included (one hour).
JOB_TASK_TIMEOUT_S = 3600.0
#: The notify step: every receiver, each call bounded by its own HTTP/SMTP timeout (30 minutes).
NOTIFY_TASK_TIMEOUT_S = 1800.0
