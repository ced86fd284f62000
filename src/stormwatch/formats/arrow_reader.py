"""Reading a JSON Lines buffer with Arrow: the schema of the known fields, and guards.

``pyarrow.json`` types the known fields by :data:`SCHEMA` (strings as
``large_string``, as pandas keeps them) and infers everything else, ``metadata``
included. The schema's field order follows the buffer's first line, which is what
Arrow's reader parses fastest. Buffers Arrow would crash on, or read wrongly, are
refused (``None``): lines that do not start an object, lines nested deeper than
Arrow's stack can take, and strings that are not UTF-8.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pj

from stormwatch.events.schema import COUNTER_COLUMNS, INT_COLUMNS, STRING_COLUMNS
from stormwatch.formats.lines import Buffer, LineIndex

STRING_FIELDS = STRING_COLUMNS
INT_FIELDS = (*INT_COLUMNS, *COUNTER_COLUMNS)
#: The known fields' types; Arrow infers everything else (``metadata`` included).
SCHEMA = pa.schema(
    [(name, pa.large_string()) for name in STRING_FIELDS] + [(name, pa.int64()) for name in INT_FIELDS]
)

#: Arrow's parser recurses once per nesting level and overflows its stack (killing
#: the process) some 20,000 levels deep; a line with more opening brackets than this
#: is left to the line-by-line path.
_MAX_OPENINGS = 10_000
_OPENING = np.zeros(256, dtype=bool)
_OPENING[[ord("{"), ord("[")]] = True
#: Arrow parses a buffer in blocks of about this size, one thread per block; a
#: larger buffer gets larger blocks, so that its columns come in few chunks.
_MIN_BLOCK_BYTES = 2 << 20
_BLOCKS_PER_BUFFER = 4
#: Set (by :func:`side_by_side`) on a loader worker whose unit parses beside others, each on one core:
#: Arrow's thread pool is then left to the units parsed alone (``load.loader._arrow_threads`` decides).
_SIDE_BY_SIDE: ContextVar[bool] = ContextVar("stormwatch_side_by_side", default=False)
#: Tables are read into the C library's heap, not Arrow's default pool (mimalloc),
#: which keeps freed pages for a second: a table lives only until its columns are
#: copied out, and the heap hands its memory straight to the next unit's numpy
#: arrays, which lowers the load's peak memory (see bench/README.md, model_bench.py).
_POOL = pa.system_memory_pool()


def _schema_in_line_order(first_line: bytes) -> pa.Schema:
    """:data:`SCHEMA` with its fields in the key order of ``first_line`` (and ``metadata``
    at its place, as an object whose fields Arrow infers).

    Arrow's reader expects a line's next key at the next schema field and falls back to a
    hash lookup when the orders differ (see bench/README.md, tricks_bench.py schema-order).
    Writers differ (stormlog's sink sorts keys, its exporters do not), so the order is read
    from the data. Known fields the line lacks go last.
    """
    try:
        keys = orjson.loads(first_line)
    except orjson.JSONDecodeError:
        return SCHEMA
    if not isinstance(keys, dict):
        return SCHEMA
    fields = [
        pa.field(key, pa.struct([])) if key == "metadata" else SCHEMA.field(key)
        for key in keys
        if key in SCHEMA.names or key == "metadata"
    ]
    return pa.schema(fields + [field for field in SCHEMA if field.name not in keys])


def _arrow_can_read(data: Buffer, lines: LineIndex) -> bool:
    """Whether every line starts an object (Arrow crashes on some other first lines,
    ``null`` for one) and none nests deep enough to overflow Arrow's stack."""
    buffer = np.frombuffer(data, dtype=np.uint8)
    if lines.count == 0 or (buffer[lines.starts] != ord("{")).any():
        return False
    long_lines = np.flatnonzero(lines.ends - lines.starts > _MAX_OPENINGS)
    return not any(
        np.count_nonzero(_OPENING[buffer[lines.starts[line] : lines.ends[line]]]) > _MAX_OPENINGS
        for line in long_lines.tolist()
    )


@contextmanager
def side_by_side(beside_others: bool = True) -> Iterator[None]:
    """Within the block, this thread's parses (JSON Lines and CSV) run on the calling thread alone
    when ``beside_others``, else on Arrow's thread pool: the loader's worker threads parse several
    units at once, each on one core, where the pool's threads would only contend with the other
    workers' parses (see bench/README.md, tricks_bench.py ``arrow-threads``). The events are the
    same either way."""
    token = _SIDE_BY_SIDE.set(beside_others)
    try:
        yield
    finally:
        _SIDE_BY_SIDE.reset(token)


def arrow_threads() -> bool:
    """Whether a parse here may use Arrow's thread pool (false inside :func:`side_by_side`)."""
    return not _SIDE_BY_SIDE.get()


def _read_options(size_bytes: int) -> pj.ReadOptions:
    if not arrow_threads():
        return pj.ReadOptions(use_threads=False)
    return pj.ReadOptions(block_size=max(_MIN_BLOCK_BYTES, -(-size_bytes // _BLOCKS_PER_BUFFER)))


def read_table(data: Buffer, lines: LineIndex) -> pa.Table | None:
    """The buffer's lines as one table (one row per line of ``lines``), or None when refused;
    parsed on Arrow's thread pool unless inside :func:`side_by_side`."""
    if not _arrow_can_read(data, lines):
        return None
    schema = _schema_in_line_order(data[lines.starts[0] : lines.ends[0]])
    try:
        table = pj.read_json(
            pa.py_buffer(data),
            read_options=_read_options(len(data)),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer"),
            memory_pool=_POOL,
        )
        if not lines.ascii:  # Arrow's reader lets bytes that are not UTF-8 into strings
            table.validate(full=True)
    except (pa.ArrowException, ValueError):
        return None
    if not lines.ascii and not _names_are_text(table.schema):  # ... and into key names
        return None
    return table


def _names_are_text(schema: pa.Schema) -> bool:
    """Whether every key name, at any depth, is valid UTF-8 (the validation does not check them)."""
    try:
        schema.names  # noqa: B018 (decodes every top-level name)
        nested_names(schema)
    except UnicodeDecodeError:
        return False
    return True


def nested_names(schema: pa.Schema) -> frozenset[str]:
    """Every key name that occurs below the top level of the table's objects (any depth).

    Raises UnicodeDecodeError for a name that is not UTF-8 (:func:`read_table` refuses
    tables holding one).
    """
    nested: set[str] = set()
    pending = [field.type for field in schema]
    while pending:
        kind = pending.pop()
        if pa.types.is_struct(kind):
            for index in range(kind.num_fields):
                nested.add(kind.field(index).name)
                pending.append(kind.field(index).type)
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
            pending.append(kind.value_type)
    return frozenset(nested)
