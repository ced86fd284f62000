"""The wheel, installed alone in a fresh virtual environment, works from a folder holding
its own ``flows``, ``tasks`` and ``reports`` packages.

The wheel is built offline from a copy of the sources (``pip wheel --no-deps
--no-build-isolation --no-index``; building in the repo would race other runs over
``build/``). The venv gets the wheel only (``pip install --no-deps --no-index``); its
dependencies are this environment's site-packages folders, listed as plain paths in a
``.pth`` file. Not ``--system-site-packages``: that would also read this environment's
``__editable__...pth``, which puts the editable install's link tree (or, for a lenient install,
a meta-path finder) on the path, serving ``stormwatch.*`` modules from the repo whenever the
installed copy lacks one and hiding exactly the packaging mistakes tested here (plain path lines
in a ``.pth`` add folders without reading the ``.pth`` files in them). The listed folders are
only the dependencies' site-packages, never the editable install's ``build/__editable__...``.

Building a wheel offline needs setuptools >= 70.1 (or the ``wheel`` package) in this
environment, as the test extras install; without it the test skips, unless CI is set.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests import builders as b

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "stormwatch"
BUILD_FILES = ("setup.py", "pyproject.toml", "README.md", "MANIFEST.in")
DECOYS = ("flows", "tasks", "reports")

# Imports every module of the installed package and reports where each came from.
PROBE = """
import json, pkgutil, sys
import stormwatch
names = [info.name for info in pkgutil.walk_packages(stormwatch.__path__, "stormwatch.")]
for name in names:
    __import__(name)
print(json.dumps({
    "files": {name: getattr(sys.modules[name], "__file__", None) for name in ["stormwatch", *names]},
    "meta_path": [repr(finder) for finder in sys.meta_path],
    "bare": sorted(name for name in sys.modules if name.split(".")[0] in ("flows", "tasks", "reports")),
    "version": __import__("importlib.metadata").metadata.version("stormwatch"),
}))
"""


def _setup_constant(name: str) -> Any:
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"setup.py defines no {name}")


def pipeline_folders() -> tuple[str, ...]:
    return tuple(_setup_constant("PIPELINE_FOLDERS"))


def engine_folder() -> str:
    """The engine's folder, ``src/stormwatch``: never ``stormwatch`` at the repo root (see setup.py)."""
    return str(_setup_constant("ENGINE"))


def source_files() -> dict[str, Path]:
    """Installed path (``stormwatch/tasks/retry.py``) -> the repo's file, for every module and template."""
    out = {}
    for folder, installed in [(engine_folder(), PACKAGE), *((f, f"{PACKAGE}/{f}") for f in pipeline_folders())]:
        for path in (ROOT / folder).rglob("*"):
            relative = path.relative_to(ROOT / folder)
            wanted = path.suffix == ".py" or relative.parts[0] == "templates"
            if wanted and path.is_file() and "__pycache__" not in relative.parts and path.suffix != ".pyc":
                out[f"{installed}/{relative.as_posix()}"] = path
    return out


CAN_BUILD = bool(importlib.util.find_spec("setuptools.command.bdist_wheel") or importlib.util.find_spec("wheel"))
CANNOT_BUILD = "building a wheel offline needs setuptools>=70.1 or wheel (pip install -e '.[test]')"
# Skipped before any fixture starts (the Prefect server is session-scoped), but never under CI.
pytestmark = pytest.mark.skipif(not CAN_BUILD and not os.environ.get("CI"), reason=CANNOT_BUILD)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH")}
    return {**env, "PYTHONNOUSERSITE": "1", **extra}


def _run(
    command: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _copy_sources(source: Path) -> Path:
    """What a build reads, copied to ``source`` (building in the repo would race other runs over build/)."""
    source.mkdir()
    for name in BUILD_FILES:
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, source / name)
    for folder in (engine_folder(), *pipeline_folders()):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return source


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not CAN_BUILD:
        pytest.fail(f"CI is set: {CANNOT_BUILD}")
    work = tmp_path_factory.mktemp("wheel")
    source = _copy_sources(work / "checkout")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                  "-q", "-w", str(work / "dist"), str(source)], cwd=work, env=_clean_env())
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = (work / "dist").glob("stormwatch-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel; returns its bin folder."""
    home = tmp_path_factory.mktemp("venv") / "env"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(home)
    python = home / "bin" / "python"
    done = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                 "-q", str(wheel)], cwd=home, env=_clean_env())
    assert done.returncode == 0, done.stdout + done.stderr
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=home, env=_clean_env()).stdout.strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    dependencies = [p for p in sys.path if p in ours or p.endswith(("site-packages", "dist-packages"))]
    (site / "zz_dependencies_from_the_test_environment.pth").write_text("\n".join(dict.fromkeys(dependencies)) + "\n")
    return home / "bin"


@pytest.fixture(scope="module")
def decoy_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working folder with the user's own flows/, tasks/ and reports/ packages, which must never load."""
    folder = tmp_path_factory.mktemp("user-project")
    for name in DECOYS:
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(
            f"raise RuntimeError('the user\\'s own top-level {name!s} package was imported')\n"
        )
    return folder


def test_no_folder_at_the_root_hides_the_installed_package() -> None:
    """``python -m pytest``, mypy and editors put the repo root first on their path: a ``stormwatch/``
    there would be the whole package to them, without stormwatch.tasks, .flows and .reports."""
    assert not (ROOT / PACKAGE).exists()
    assert engine_folder() != PACKAGE


def test_a_plain_editable_install_is_a_strict_link_tree(tmp_path: Path) -> None:
    """``pip install -e .`` (no config settings) puts a link tree of the installed layout on sys.path
    with a plain ``.pth`` line, which static tools follow, and no import hook (setup.py)."""
    if not CAN_BUILD:
        pytest.fail(f"CI is set: {CANNOT_BUILD}")
    source = _copy_sources(tmp_path / "checkout")
    build = "import sys; from setuptools import build_meta; print(build_meta.build_editable(sys.argv[1]))"
    built = _run([sys.executable, "-c", build, str(tmp_path / "dist")], cwd=source, env=_clean_env())
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    with zipfile.ZipFile(tmp_path / "dist" / built.stdout.split()[-1]) as archive:
        (text,) = [archive.read(name).decode() for name in archive.namelist() if name.endswith(".pth")]
    (line,) = text.split()  # one folder, no `import` line
    tree = Path(line)
    assert tree.parent == (source / "build").resolve() and tree.name.startswith(f"__editable__.{PACKAGE}-"), text
    linked = {path.relative_to(tree).as_posix(): path for path in tree.rglob("*") if path.is_file()}
    assert sorted(set(source_files()) - set(linked)) == []
    assert linked[f"{PACKAGE}/tasks/retry.py"].resolve() == (source / "tasks" / "retry.py").resolve()


def test_the_editable_install_of_this_checkout_is_current() -> None:
    """A strict editable install links the files that existed when it was made: a module added
    since is missing to Python and mypy alike (mypy skips it silently), one removed is a dead link."""
    trees = [Path(entry) for entry in sys.path
             if Path(entry).parent == ROOT / "build" and Path(entry).name.startswith(f"__editable__.{PACKAGE}-")]
    if not trees:
        pytest.skip("no strict editable install of this checkout on sys.path")
    (tree,) = trees
    links = {path.relative_to(tree).as_posix(): path for path in tree.rglob("*") if path.is_symlink() or path.is_file()}
    missing = sorted(set(source_files()) - set(links))
    dead = sorted(name for name, path in links.items() if not path.exists())
    assert not missing and not dead, f"run `pip install -e .` again: new {missing}, removed {dead}"


def test_the_wheel_holds_one_top_level_package_with_every_module_and_template(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (top_level,) = [name for name in names if name.endswith(".dist-info/top_level.txt")]
        assert archive.read(top_level).decode().split() == [PACKAGE]
        entry_points = archive.read(top_level.replace("top_level.txt", "entry_points.txt")).decode()
    assert {name.split("/")[0] for name in names} == {PACKAGE, top_level.split("/")[0]}
    expected = source_files()
    assert {f"{PACKAGE}/reports/templates/{p.name}" for p in (ROOT / "reports" / "templates").iterdir()} <= set(names)
    assert sorted(set(expected) - set(names)) == []
    assert "stormwatch = stormwatch.flows.cli:main" in entry_points


def test_the_installed_package_imports_only_itself(installed: Path, decoy_folder: Path) -> None:
    """Every module imports from the venv (never the repo), with the decoys on sys.path first."""
    probe = _run([str(installed / "python"), "-s", "-c", PROBE], cwd=decoy_folder, env=_clean_env())
    assert probe.returncode == 0, probe.stderr[-3000:]
    report = json.loads(probe.stdout.splitlines()[-1])
    venv_root = installed.parent.resolve()
    outside = {name: file for name, file in report["files"].items()
               if file is None or not Path(file).resolve().is_relative_to(venv_root)}
    assert outside == {}
    assert {name.removeprefix("stormwatch.").split(".")[0] for name in report["files"]} >= set(pipeline_folders())
    assert not [finder for finder in report["meta_path"] if "editable" in finder.lower()]
    assert report["bare"] == []


def test_diagnose_and_audit_run_from_the_installed_wheel(
    installed: Path, decoy_folder: Path, prefect_api: str, tmp_path: Path
) -> None:
    storage = tmp_path / "fleet"
    b.write_multi_rank_job(storage / "jobs" / "quiet-1", world_size=2, samples=12, job_id="quiet-1")
    env = _clean_env(PREFECT_API_URL=prefect_api)

    diagnosed = _run([str(installed / "stormwatch"), "diagnose", str(storage / "jobs" / "quiet-1"),
                      "--out", str(tmp_path / "out")], cwd=decoy_folder, env=env)
    assert diagnosed.returncode == 0, diagnosed.stdout + diagnosed.stderr
    assert diagnosed.stdout.startswith("quiet-1: CLEAN: no anomaly (exit 0)")
    assert orjson.loads((tmp_path / "out" / "model.json").read_bytes())["verdict"]["status"] == "clean"
    assert (tmp_path / "out" / "report.html").stat().st_size > 0

    audited = _run([str(installed / "stormwatch"), "audit", "--storage", str(storage), "--workers", "1"],
                   cwd=decoy_folder, env=env)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert "audited 1 jobs: 1 diagnosed" in audited.stdout
    fleet = orjson.loads((storage / "reports" / "fleet.json").read_bytes())
    assert [(job["job_id"], job["status"]) for job in fleet["jobs"]] == [("quiet-1", "diagnosed")]
    for key in ("index.html", "quiet-1/model.json", "quiet-1/report.html"):
        assert (storage / "reports" / key).is_file(), key
