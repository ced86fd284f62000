"""Import boundaries, read from the source with ``ast`` (nothing is imported).

Each source folder is named by the module it installs as (setup.py's package_dir): the
engine ``src/stormwatch/`` stays free of the pipeline and of Prefect, AWS, HTTP and templating, and
its alerting logic (``stormwatch.alerting``) of every network and mail module besides;
``tasks/`` never reaches up into the flows, ``reports/`` into tasks or flows; nothing
imports a bare top-level ``tasks``, ``flows`` or ``reports`` (such a package is the user's
own, never ours); and the modules' import-time imports form no cycle.

A rule covers every import of a module, lazy ones in functions and ``importlib.import_module``
of a literal name included; the cycle check follows only the imports run when a module is
first imported (module and class bodies, not functions, not ``if TYPE_CHECKING:``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Source folder -> the module it installs as (setup.py: packages and package_dir).
SOURCE_FOLDERS = {
    "src/stormwatch": "stormwatch",
    "tasks": "stormwatch.tasks",
    "flows": "stormwatch.flows",
    "reports": "stormwatch.reports",
}
# Folders that are not installed but must follow the rules meant for everybody.
OTHER_FOLDERS = {"tests": "tests", "bench": "bench"}
PIPELINE = ("stormwatch.tasks", "stormwatch.flows", "stormwatch.reports")
ALERTING = "stormwatch.alerting"
# What talks to the world (or renders for it): the pure alerting logic imports none of it.
NETWORK = ("prefect", "boto3", "botocore", "httpx", "jinja2", "smtplib", "socket", "ssl", "urllib.request", "requests",
           "http.client", "aiosmtpd")
BARE = ("tasks", "flows", "reports")


@dataclass(frozen=True)
class Import:
    """``names``: the modules an import statement may load (for ``from a import b``: ``a`` and ``a.b``)."""

    names: tuple[str, ...]
    line: int
    at_import_time: bool


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    imports: tuple[Import, ...]


@dataclass(frozen=True)
class Rule:
    """Modules in ``folders`` (only those named ``under``, or below it, when given) never import a module
    named in ``forbidden`` (or below it)."""

    name: str
    folders: tuple[str, ...]
    forbidden: tuple[str, ...]
    under: str | None = None

    def covers(self, module: Module) -> bool:
        return self.under is None or _under(module.name, (self.under,)) is not None


RULES = (
    Rule("the engine is pure", ("src/stormwatch",),
         (*PIPELINE, "prefect", "prefect_dask", "dask", "distributed", "boto3", "botocore", "jinja2", "httpx")),
    Rule("alerting decides, never sends", ("src/stormwatch",), (*PIPELINE, *NETWORK), under=ALERTING),
    Rule("tasks never import flows", ("tasks",), ("stormwatch.flows",)),
    Rule("reports never import tasks or flows", ("reports",), ("stormwatch.tasks", "stormwatch.flows")),
    Rule("nobody imports a bare top-level tasks, flows or reports", (*SOURCE_FOLDERS, *OTHER_FOLDERS), BARE),
)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, at_import_time: bool) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        yield child, at_import_time
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, False)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for statement in child.body:
                yield statement, False
                yield from _walk(statement, False)
            for statement in child.orelse:
                yield statement, at_import_time
                yield from _walk(statement, at_import_time)
        else:
            yield from _walk(child, at_import_time)


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of ``from <level dots><target> import ...`` written in ``module``."""
    if level == 0:
        return target or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, target] if target else base)


def imports_of(tree: ast.Module, module: str, *, is_package: bool) -> tuple[Import, ...]:
    found = []
    for node, at_import_time in _walk(tree, True):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")]
        elif (
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
            )
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        if names:
            found.append(Import(tuple(names), getattr(node, "lineno", 0), at_import_time))
    return tuple(found)


def collect(root: Path, folders: Mapping[str, str]) -> dict[str, list[Module]]:
    """Folder -> its modules, named as installed."""
    out: dict[str, list[Module]] = {}
    for folder, package in folders.items():
        modules = out.setdefault(folder, [])
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join([package, *(parts[:-1] if is_package else parts)])
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            modules.append(Module(name, path, imports_of(tree, name, is_package=is_package)))
    return out


def _under(name: str, prefixes: tuple[str, ...]) -> str | None:
    return next((prefix for prefix in prefixes if name == prefix or name.startswith(prefix + ".")), None)


def violations(rule: Rule, modules: Mapping[str, list[Module]], root: Path) -> list[str]:
    found = []
    for folder in rule.folders:
        for module in filter(rule.covers, modules.get(folder, [])):
            for item in module.imports:
                hit = next((name for name in item.names if _under(name, rule.forbidden)), None)
                if hit is not None:
                    found.append(f"{module.path.relative_to(root)}:{item.line}: {module.name} imports {hit}")
    return found


def import_graph(modules: Mapping[str, list[Module]]) -> dict[str, set[str]]:
    """Module -> the project modules its import-time imports load."""
    known = {module.name for group in modules.values() for module in group}
    graph: dict[str, set[str]] = {name: set() for name in known}
    for group in modules.values():
        for module in group:
            for item in module.imports:
                if item.at_import_time:
                    # ``from a import b``: the submodule a.b when there is one, else the package a
                    targets = [name for name in item.names[1:] if name in known] or [item.names[0]]
                    graph[module.name].update(name for name in targets if name in known and name != module.name)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle (a path back to its start) per strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # recursion depth: the longest import chain, a few dozen at most
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(group, graph) for group in groups]


def _cycle_in(group: set[str], graph: Mapping[str, set[str]]) -> list[str]:
    """The shortest path from the group's first module back to itself (breadth first)."""
    start = min(group)
    previous: dict[str, str] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & group):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if target not in previous:
                previous[target] = node
                queue.append(target)
    raise AssertionError(f"no cycle in {sorted(group)}")


@pytest.fixture(scope="module")
def modules() -> dict[str, list[Module]]:
    return collect(ROOT, {**SOURCE_FOLDERS, **OTHER_FOLDERS})


def test_source_folders_are_those_setup_py_installs() -> None:
    setup = ast.parse((ROOT / "setup.py").read_text())
    constants = {
        target.id: ast.literal_eval(node.value)
        for node in setup.body if isinstance(node, ast.Assign)
        for target in node.targets if isinstance(target, ast.Name) and target.id in ("ENGINE", "PIPELINE_FOLDERS")
    }
    installed = {folder: f"stormwatch.{folder}" for folder in constants["PIPELINE_FOLDERS"]}
    assert {constants["ENGINE"]: "stormwatch", **installed} == SOURCE_FOLDERS


@pytest.mark.parametrize("rule", RULES, ids=[rule.name for rule in RULES])
def test_import_boundaries(rule: Rule, modules: dict[str, list[Module]]) -> None:
    assert sum(1 for folder in rule.folders for module in modules[folder] if rule.covers(module)) > 0
    found = violations(rule, modules, ROOT)
    assert not found, f"{rule.name}:\n" + "\n".join(found)


def test_no_import_cycles(modules: dict[str, list[Module]]) -> None:
    source = {folder: modules[folder] for folder in SOURCE_FOLDERS}
    found = cycles(import_graph(source))
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


# --- the checker itself catches what it should ------------------------------------------------

FIXTURE_TREE = {
    "src/stormwatch/__init__.py": "",
    "src/stormwatch/a.py": "from stormwatch import b\n",
    "src/stormwatch/b.py": "import stormwatch.c\n",
    "src/stormwatch/c.py": "from . import a\n\ndef later():\n    import prefect\n",
    "src/stormwatch/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from stormwatch import e\n",
    "src/stormwatch/e.py": "from stormwatch import d\nimport importlib\nimportlib.import_module('httpx')\n",
    "src/stormwatch/alerting/__init__.py": "",
    "src/stormwatch/alerting/s.py": (
        "import smtplib\nfrom urllib.parse import quote\n\ndef f():\n  import urllib.request\n"
    ),
    "tasks/__init__.py": "",
    "tasks/t.py": "from stormwatch.flows import f\n",
    "reports/__init__.py": "",
    "reports/r.py": "from ..tasks import t\n",
    "flows/__init__.py": "",
    "flows/f.py": "import flows.g\nfrom stormwatch import tasks\n",
}


def test_the_checker_finds_each_kind_of_violation(tmp_path: Path) -> None:
    for relative, text in FIXTURE_TREE.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    modules = collect(tmp_path, SOURCE_FOLDERS)
    found = {rule.name: violations(rule, modules, tmp_path) for rule in RULES}
    assert found == {
        "the engine is pure": [
            "src/stormwatch/c.py:4: stormwatch.c imports prefect",
            "src/stormwatch/e.py:3: stormwatch.e imports httpx",
        ],
        "alerting decides, never sends": [
            "src/stormwatch/alerting/s.py:1: stormwatch.alerting.s imports smtplib",
            "src/stormwatch/alerting/s.py:5: stormwatch.alerting.s imports urllib.request",
        ],
        "tasks never import flows": ["tasks/t.py:1: stormwatch.tasks.t imports stormwatch.flows"],
        "reports never import tasks or flows": ["reports/r.py:1: stormwatch.reports.r imports stormwatch.tasks"],
        "nobody imports a bare top-level tasks, flows or reports": ["flows/f.py:1: stormwatch.flows.f imports flows.g"],
    }
    # a -> b -> c -> a at import time; d -> e only under TYPE_CHECKING, so d <-> e is no cycle
    assert cycles(import_graph(modules)) == [["stormwatch.a", "stormwatch.b", "stormwatch.c", "stormwatch.a"]]
