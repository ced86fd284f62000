"""Every signal stormwatch reports, in plain words: one table, shown on both pages and in docs/signals.md.

A signal is the code a finding carries (``alert:error``, ``gap:persistent_drift``,
``gap_ratio_breach``, ``collective:collective_confident``) or the name of a job- or fleet-level
finding (an OOM, missing ranks, a memory leak, a regression, a peer outlier, a suspect device, a
job name nearing its device's capacity). Pages lead with
the :attr:`SignalText.title` and show the code beside it; the :attr:`SignalText.meaning` (one
sentence) goes on hover and in the docs. A code this table does not know (a newer engine's, or
telemetry's own alert type) still gets a title made from it, never an empty one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class SignalFamily(StrEnum):
    """Where a signal comes from."""

    ALERT = "alert"  # an alert event the tracker recorded (its event type after the colon)
    GAP = "gap"  # the hidden gap's shape over a rank's run (its class after the colon)
    BREACH = "breach"  # the hidden gap crossed a share of the device
    COLLECTIVE = "collective"  # memory moved on several ranks at once, as a collective does
    JOB = "job"  # a finding about the job as a whole
    FLEET = "fleet"  # a finding across jobs or runs


@dataclass(frozen=True)
class SignalText:
    """A signal's ``code`` as reports and model.json carry it, its short ``title`` (a few words,
    sentence case) and its ``meaning`` (one sentence, ending with a full stop)."""

    code: str
    family: SignalFamily
    title: str
    meaning: str

    def __post_init__(self) -> None:
        if not self.title or not self.meaning.endswith("."):
            raise ValueError(f"signal {self.code!r}: a title and a one-sentence meaning are required")


#: What "hidden gap" means, said once wherever a page first uses the words.
HIDDEN_GAP_MEANING = (
    "The hidden gap is device memory in use that the framework's allocator did not reserve "
    "(device used minus allocator reserved): memory held by the CUDA context, NCCL, other "
    "libraries or other processes."
)

_TABLE: tuple[SignalText, ...] = (
    SignalText("oom", SignalFamily.JOB, "Out of memory",
               "The job's process failed to allocate device memory and raised an out-of-memory error."),
    SignalText("alert:error", SignalFamily.ALERT, "Error event",
               "The memory tracker recorded an error event on this rank (an out-of-memory error is one)."),
    SignalText("alert:critical", SignalFamily.ALERT, "Critical event",
               "The memory tracker recorded a critical alert on this rank, such as memory near the device limit."),
    SignalText("alert:warning", SignalFamily.ALERT, "Warning event",
               "The memory tracker recorded a warning on this rank, such as memory above its warning threshold."),
    SignalText("gap:transient_spike", SignalFamily.GAP, "Hidden-memory spike",
               "Memory outside the allocator jumped far above its usual level on this rank for a short time."),
    SignalText("gap:persistent_drift", SignalFamily.GAP, "Hidden memory growing",
               "Memory outside the allocator grew steadily over this rank's run, as a leak outside the "
               "framework would."),
    SignalText("gap:fragmentation_like", SignalFamily.GAP, "Fragmentation-like gap",
               "A large share of this rank's reserved memory was not allocated, as allocator fragmentation "
               "leaves it."),
    SignalText("gap_ratio_breach", SignalFamily.BREACH, "Hidden gap over its limit",
               "Memory outside the allocator reached its limit on this rank: 5 % of the device's memory "
               "unless configured otherwise."),
    SignalText("collective:collective_confident", SignalFamily.COLLECTIVE, "Collective memory surge",
               "Hidden memory rose on most ranks at the same moment, as a collective operation (NCCL) "
               "allocating buffers does; confidently attributed."),
    SignalText("collective:collective_likely", SignalFamily.COLLECTIVE, "Likely collective surge",
               "Hidden memory rose on many ranks at about the same moment, probably a collective operation."),
    SignalText("collective:collective_suspect", SignalFamily.COLLECTIVE, "Possible collective surge",
               "Hidden memory rose on some ranks close together in time, which a collective operation may explain."),
    SignalText("missing_ranks", SignalFamily.JOB, "Missing ranks",
               "Some ranks the job expected wrote no telemetry, so nothing is known about them."),
    SignalText("regression", SignalFamily.FLEET, "Regression",
               "This run used clearly more memory than the earlier runs of the same job name."),
    SignalText("outlier", SignalFamily.FLEET, "Peer outlier",
               "This rank's memory differs widely from the job's other ranks, above or below them (a robust "
               "z-score over its peers, checked when the job has 4 or more ranks)."),
    SignalText("suspect_device", SignalFamily.FLEET, "Suspect device",
               "Jobs placed on this host's device show more hidden memory than the same jobs elsewhere."),
    SignalText("suspect_host", SignalFamily.FLEET, "Suspect host",
               "Jobs placed on this host show more hidden memory than the same jobs elsewhere."),
    SignalText("leak", SignalFamily.JOB, "Memory leak",
               "This rank's memory kept growing after warm-up, significantly and faster than the leak "
               "threshold, so at that rate it would run out of device memory."),
    SignalText("capacity", SignalFamily.FLEET, "Nearing capacity",
               "This job name's peak memory rose run after run toward its device's capacity; at that trend "
               "a coming run needs more than the device holds."),
)

SIGNALS: dict[str, SignalText] = {item.code: item for item in _TABLE}

_PREFIXES = {"alert": SignalFamily.ALERT, "gap": SignalFamily.GAP, "collective": SignalFamily.COLLECTIVE}


def describe(code: str, *, oom: bool = False) -> SignalText:
    """The plain words of ``code``; ``oom``: the finding is an out-of-memory error (an OOM is an
    ``alert:error`` event whose marker says so), which reads as "Out of memory"."""
    if oom:
        return SignalText(code=code, family=SignalFamily.JOB, title=SIGNALS["oom"].title,
                          meaning=SIGNALS["oom"].meaning)
    known = SIGNALS.get(code)
    if known is not None:
        return known
    family_name, _, rest = code.partition(":")
    family = _PREFIXES.get(family_name, SignalFamily.JOB)
    words = (rest or code).replace("_", " ").strip() or code
    return SignalText(code=code, family=family, title=words[:1].upper() + words[1:],
                      meaning=f"A finding stormwatch does not describe yet (its code is {code}).")


def markdown_table() -> str:
    """docs/signals.md's table: every signal's title, code and meaning."""
    lines = ["| Title | Code | Meaning |", "|---|---|---|"]
    lines += [f"| {item.title} | `{item.code}` | {item.meaning} |" for item in _TABLE]
    return "\n".join(lines)
