"""Fuzz cases run in worker processes, so that a dead interpreter or a hang fails one case.

A C parser fed a deep enough document can overflow its stack and kill the process
(no Python exception to catch); a quadratic path can hang; a runaway allocation
meets the worker's memory cap. Each worker is a
``python -m tests.fuzz.pool`` process reading case ids on stdin and answering one
JSON line per case on stdout. When a worker dies or overruns ``timeout_s``, the
case it held fails (``fatal`` or ``timeout``, with the tail of its stderr, where
faulthandler wrote the stack) and a fresh worker takes over the rest.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import IO

from tests.fuzz.harness import Case, Failure, Outcome, plan

_REPO = Path(__file__).resolve().parents[2]
_STDERR_TAIL_CHARS = 4000
#: Address space of a worker. An idle one maps ~2 GB (Arrow, numpy, pandas); a case needs a few hundred MB.
WORKER_MEMORY_BYTES = 6 << 30


def _outcome_json(outcome: Outcome) -> str:
    return json.dumps({"case": asdict(outcome.case), "note": outcome.note, "seconds": outcome.seconds,
                       "skipped": outcome.skipped, "failures": [asdict(f) for f in outcome.failures]})


def _outcome_from(line: str) -> Outcome:
    raw = json.loads(line)
    return Outcome(Case(**raw["case"]), raw["note"], tuple(Failure(**f) for f in raw["failures"]), raw["seconds"],
                   raw["skipped"])


def limit_memory(limit_bytes: int = WORKER_MEMORY_BYTES) -> None:
    """Cap this process's address space, so that a runaway allocation fails here (MemoryError,
    or an abort in C++) instead of sending the machine, shared with others, out of memory."""
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))


def worker_main() -> None:
    """Answer ``run CASE SEED`` with an outcome line and ``reduce CASE SEED FOLDER`` with
    ``{"saved": bool}`` (the reduced job written under FOLDER); nothing else reaches stdout."""
    import faulthandler

    from tests.fuzz.harness import run_case
    from tests.fuzz.reduce import reduce, save

    faulthandler.enable()
    limit_memory()
    answer = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # a stray print must not corrupt the protocol
    for line in sys.stdin:
        op, case_id, seed, *rest = line.split(maxsplit=3)
        case = plan(int(case_id), seed=int(seed))
        print(f"--- case {case.case_id}", file=sys.stderr, flush=True)
        if op == "run":
            answer.write(_outcome_json(run_case(case)) + "\n")
        else:
            files = reduce(case)
            if files is not None:
                save(Path(rest[0].strip()), files, {"case": asdict(case), "reduced": True})
            answer.write(json.dumps({"saved": files is not None}) + "\n")
        answer.flush()


class _Worker:
    def __init__(self) -> None:
        self.log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker
        env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz.pool"], cwd=_REPO, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.case: Case | None = None
        self.started = 0.0

    def send(self, case: Case, op: str = "run", *args: str) -> None:
        self.case, self.started = case, time.perf_counter()
        assert self.proc.stdin is not None
        self.proc.stdin.write(" ".join([op, str(case.case_id), str(case.seed), *args]) + "\n")
        self.proc.stdin.flush()

    def stderr_tail(self) -> str:
        self.log.seek(0)
        text = self.log.read().decode("utf-8", errors="replace")
        mark = text.rfind(f"--- case {self.case.case_id}") if self.case else -1
        return text[max(mark, len(text) - _STDERR_TAIL_CHARS):]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.log.close()


def _lost(worker: _Worker, kind: str, detail: str) -> Outcome:
    assert worker.case is not None
    failure = Failure(kind, detail, "", worker.stderr_tail())
    return Outcome(worker.case, "worker lost", (failure,), time.perf_counter() - worker.started)


def run_cases(case_ids: Iterable[int], *, seed: int = 0, jobs: int = 2, timeout_s: float = 120.0,
              progress: Callable[[Outcome], None] | None = None) -> Iterator[Outcome]:
    """Outcomes of the cases (in completion order), run on ``jobs`` worker processes."""
    pending = [plan(case_id, seed=seed) for case_id in case_ids]
    pending.reverse()
    workers: list[_Worker] = []
    selector = selectors.DefaultSelector()

    def start() -> None:
        worker = _Worker()
        workers.append(worker)
        assert worker.proc.stdout is not None
        selector.register(worker.proc.stdout, selectors.EVENT_READ, worker)
        feed(worker)

    def feed(worker: _Worker) -> None:
        worker.case = None
        if pending:
            worker.send(pending.pop())

    def retire(worker: _Worker) -> None:
        assert worker.proc.stdout is not None
        selector.unregister(worker.proc.stdout)
        worker.close()
        workers.remove(worker)
        if pending:
            start()

    try:
        for _ in range(min(jobs, len(pending)) or 0):
            start()
        while any(w.case is not None for w in workers):
            for key, _ in selector.select(timeout=1.0):
                worker: _Worker = key.data
                line = worker.proc.stdout.readline() if worker.proc.stdout else ""
                if line:
                    outcome = _outcome_from(line)
                    feed(worker)
                else:
                    code = worker.proc.wait()
                    outcome = _lost(worker, "fatal", f"worker died (exit code {code})")
                    retire(worker)
                if progress:
                    progress(outcome)
                yield outcome
            for worker in [w for w in workers if w.case is not None]:
                if time.perf_counter() - worker.started > timeout_s:
                    outcome = _lost(worker, "timeout", f"no answer within {timeout_s:.0f} s")
                    retire(worker)
                    yield outcome
    finally:
        for worker in list(workers):
            worker.close()
        selector.close()


def reduce_case(case: Case, folder: Path, *, timeout_s: float = 300.0) -> bool:
    """Shrink a case that raised (see :mod:`tests.fuzz.reduce`) in a worker; True when the
    reduced job was saved under ``folder/job``."""
    worker = _Worker()
    try:
        worker.send(case, "reduce", str(folder))
        assert worker.proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(worker.proc.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout=timeout_s)
        selector.close()
        line = worker.proc.stdout.readline() if ready else ""
        return bool(line) and bool(json.loads(line)["saved"])
    finally:
        worker.close()


if __name__ == "__main__":
    worker_main()
