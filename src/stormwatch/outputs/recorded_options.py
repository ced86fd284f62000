"""model.json's ``options`` member: how the document's job was diagnosed, as a read-only mapping."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from stormwatch.outputs.json_members import MemberError, Members, shown

OptionValue = str | int | float | bool | None


class RecordedOptions(Mapping[str, OptionValue]):
    """How the document's job was diagnosed (:meth:`~stormwatch.diagnose.DiagnoseOptions.recorded`):
    rank filter, session, preset, engine version, caps, all sessions, leak-min.

    A read-only mapping rather than a record: its keys differ between engine versions (caps and
    ``leak_min`` appear only when not the defaults, ``all_sessions`` and ``max_sessions`` only when every session is
    diagnosed) and an audit compares it whole with the options it runs with, so a key this version
    does not know has to be kept (and make the two differ) rather than refused or dropped.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, OptionValue]) -> None:
        self._values = dict(values)

    def __getitem__(self, key: str) -> OptionValue:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"RecordedOptions({self._values!r})"

    @classmethod
    def from_json(cls, members: Members) -> RecordedOptions:
        """Raises :class:`~stormwatch.outputs.json_members.MemberError` for a value that is not a scalar."""
        for key, value in members.data.items():
            if isinstance(value, Mapping | list | tuple):
                raise MemberError(members.where(str(key)), f"{shown(value)} is not an option value")
        return cls(members.data)
