"""Reading a JSON object member by member, each value checked for the type it must have.

A :class:`Members` is one JSON object at a path in its document (``""`` for the document itself,
``verdict``, ``attempts[1]``, ``model.per_rank_timelines.3``). Its readers return the value of a
member as the type the reader names, or raise :class:`MemberError` naming the member's full path
and what is wrong with it (``member "verdict.status": "bogus" is not a verdict status``).

Readers accept the two forms a stormwatch document takes: parsed JSON (lists, string keys) and the
engine's data before it is written (:func:`~stormwatch.outputs.model_json.json_safe` output: tuples,
numpy integers and arrays). A member that is absent reads as the reader's ``default`` when it has
one (what a document written before the member existed means), else it is an error; an optional
reader also takes ``null``. Integers never read booleans, numbers never read strings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any, Final, TypeVar

import numpy as np
import orjson

_E = TypeVar("_E", bound=Enum)
_T = TypeVar("_T")
#: Readers' ``default`` when the member must be present.
REQUIRED: Final[Any] = object()
_SHOWN_CHARS = 40


class MemberError(ValueError):
    """A member that is missing or holds the wrong value: ``member`` is its path in the document,
    ``problem`` what is wrong (``"bogus" is not a verdict status``, ``missing``)."""

    def __init__(self, member: str, problem: str) -> None:
        super().__init__(f'member "{member}": {problem}')
        self.member = member
        self.problem = problem


def shown(value: Any) -> str:
    """``value`` as it reads in JSON, cut to a few dozen characters (for error messages)."""
    if isinstance(value, np.ndarray):
        return f"an array of {value.dtype}"
    try:
        text = orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def is_integer(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


def child_path(path: str, name: str | int) -> str:
    """The path of member ``name`` (an item's index) below ``path``."""
    if isinstance(name, int):
        return f"{path}[{name}]"
    return f"{path}.{name}" if path else name


class Members:
    """The JSON object ``data`` found at ``path`` (``""``: the document)."""

    __slots__ = ("data", "path")

    def __init__(self, data: Mapping[str, Any], path: str = "") -> None:
        self.data = data
        self.path = path

    @classmethod
    def of(cls, value: Any, path: str) -> Members:
        """``value`` (found at ``path``) as an object; MemberError when it is not one."""
        if not isinstance(value, Mapping):
            raise MemberError(path, f"{shown(value)} is not an object")
        return cls(value, path)

    def where(self, name: str | int) -> str:
        return child_path(self.path, name)

    def error(self, name: str, problem: str) -> MemberError:
        return MemberError(self.where(name), problem)

    def has(self, name: str) -> bool:
        return name in self.data

    def _get(self, name: str, default: Any, *, nullable: bool) -> tuple[bool, Any]:
        """(found, value): not found when absent with a default, or null where null is allowed."""
        if name not in self.data:
            if default is REQUIRED:
                raise self.error(name, "missing")
            return False, default
        value = self.data[name]
        if value is None and nullable:
            return False, None
        return True, value

    def _typed(self, name: str, default: Any, *, nullable: bool, check: Callable[[Any], bool],
               what: str) -> Any:
        found, value = self._get(name, default, nullable=nullable)
        if found and not check(value):
            raise self.error(name, f"{shown(value)} is not {what}")
        return value

    def integer(self, name: str, default: Any = REQUIRED) -> int:
        value = self._typed(name, default, nullable=False, check=is_integer, what="an integer")
        return int(value)

    def optional_integer(self, name: str) -> int | None:
        value = self._typed(name, None, nullable=True, check=is_integer, what="an integer or null")
        return None if value is None else int(value)

    def number(self, name: str) -> float:
        """A number as it was written: an integer stays an integer (it is written back as one)."""
        value: float = self._typed(name, REQUIRED, nullable=False, check=is_number, what="a number")
        return value

    def optional_number(self, name: str) -> float | None:
        value: float | None = self._typed(name, None, nullable=True, check=is_number, what="a number or null")
        return value

    def text(self, name: str, default: Any = REQUIRED) -> str:
        value: str = self._typed(name, default, nullable=False, check=lambda item: isinstance(item, str),
                                 what="a string")
        return value

    def optional_text(self, name: str) -> str | None:
        value: str | None = self._typed(name, None, nullable=True, check=lambda item: isinstance(item, str),
                                        what="a string or null")
        return value

    def flag(self, name: str, default: Any = REQUIRED) -> bool:
        value = self._typed(name, default, nullable=False, check=lambda item: isinstance(item, bool | np.bool_),
                            what="true or false")
        return bool(value)

    def optional_flag(self, name: str) -> bool | None:
        value = self._typed(name, None, nullable=True, check=lambda item: isinstance(item, bool | np.bool_),
                            what="true, false or null")
        return None if value is None else bool(value)

    def enum(self, name: str, kind: type[_E], what: str, default: Any = REQUIRED) -> _E:
        """A member holding one of ``kind``'s values (``what`` names the set in an error)."""
        found, value = self._get(name, default, nullable=False)
        if not found:
            return value  # type: ignore[no-any-return]
        try:
            return kind(value)
        except ValueError:
            raise self.error(name, f"{shown(value)} is not {what}") from None

    def optional_enum(self, name: str, kind: type[_E], what: str) -> _E | None:
        found, value = self._get(name, None, nullable=True)
        return self.enum(name, kind, what) if found else None

    def member(self, name: str) -> Members:
        """A member that must be an object."""
        _, value = self._get(name, REQUIRED, nullable=False)
        return Members.of(value, self.where(name))

    def optional_member(self, name: str) -> Members | None:
        """An object member; None when absent or null."""
        found, value = self._get(name, None, nullable=True)
        return Members.of(value, self.where(name)) if found else None

    def array(self, name: str, default: Any = REQUIRED) -> Sequence[Any]:
        """A member that must be an array (a list, or a tuple in the engine's data)."""
        found, value = self._get(name, default, nullable=False)
        if found and not isinstance(value, list | tuple):
            raise self.error(name, f"{shown(value)} is not an array")
        return value  # type: ignore[no-any-return]

    def items(self, name: str, default: Any = REQUIRED) -> list[Members]:
        """An array of objects, each with its path (``name[3]``)."""
        where = self.where(name)
        return [Members.of(item, child_path(where, index)) for index, item in enumerate(self.array(name, default))]

    def each(self, name: str, read: Callable[[Members], _T], default: Any = REQUIRED) -> tuple[_T, ...]:
        """``read`` applied to each object of an array member."""
        return tuple(read(item) for item in self.items(name, default))

    def _elements(self, name: str, default: Any, check: Callable[[Any], bool], what: str) -> list[Any]:
        values = self.array(name, default)
        where = self.where(name)
        for index, value in enumerate(values):
            if not check(value):
                raise MemberError(child_path(where, index), f"{shown(value)} is not {what}")
        return list(values)

    def integers(self, name: str, default: Any = REQUIRED) -> tuple[int, ...]:
        return tuple(int(value) for value in self._elements(name, default, is_integer, "an integer"))

    def texts(self, name: str, default: Any = REQUIRED) -> tuple[str, ...]:
        return tuple(self._elements(name, default, lambda item: isinstance(item, str), "a string"))

    def entries(self, name: str, default: Any = REQUIRED) -> list[tuple[str, Any, str]]:
        """The (key, value, path) of each entry of an object member, in order (keys as written: an
        integer key of the engine's data is given as its decimal text)."""
        found, value = self._get(name, default, nullable=False)
        if not found:
            return []
        members = Members.of(value, self.where(name))
        return [(str(key), item, members.where(str(key))) for key, item in members.data.items()]


def integer_key(key: str, path: str, *, what: str = "a rank") -> int:
    """An object key naming an integer, a rank by default (``"3"``; ``3`` in the engine's data), as the
    int it was written from; MemberError (saying it is not ``what``) for any other text."""
    try:
        number = int(key)
    except ValueError:
        number = None
    if number is None or str(number) != key:
        raise MemberError(path, f"{shown(key)} is not {what}")
    return number
