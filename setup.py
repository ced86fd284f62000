"""Packaging that pyproject.toml cannot say statically: one installed namespace over four folders.

The engine lives in ``src/stormwatch/``; the pipeline's folders ``tasks/``, ``flows/`` and
``reports/`` stay at the top of the repo but install as ``stormwatch.tasks``,
``stormwatch.flows`` and ``stormwatch.reports``, so no top-level ``tasks`` or ``flows``
package (names most Prefect projects use for their own folders) ever reaches site-packages.

``pip install -e .`` is a strict editable install (``options`` below; a command line's
``--config-settings editable_mode=lenient`` still wins): setuptools builds the installed layout
as a tree of links to the repo's files under ``build/__editable__.stormwatch-*/`` and puts that
folder on sys.path with a plain ``.pth`` line, which mypy, pyright and jedi follow, where the
lenient mode's import hook they cannot. The engine sits under ``src/`` so that no folder named
``stormwatch`` at the repo root (on sys.path for ``python -m pytest``, and the project root of
mypy and of editors) hides that tree. Edits to a file show at once; a new or renamed module shows
after ``pip install -e .`` again.
"""

from __future__ import annotations

from setuptools import find_packages, setup

ENGINE = "src/stormwatch"
PIPELINE_FOLDERS = ("tasks", "flows", "reports")

packages = find_packages(where="src", include=["stormwatch", "stormwatch.*"])
for folder in PIPELINE_FOLDERS:
    packages.append(f"stormwatch.{folder}")
    packages += [f"stormwatch.{folder}.{sub}" for sub in find_packages(where=folder)]
# data only; listed so setuptools ships them without a warning
packages += ["stormwatch.reports.templates", "stormwatch.tasks.notify.templates"]

setup(
    packages=packages,
    package_dir={"stormwatch": ENGINE, **{f"stormwatch.{folder}": folder for folder in PIPELINE_FOLDERS}},
    package_data={"stormwatch": ["py.typed"], "stormwatch.reports.templates": ["*"],  # py.typed: PEP 561
                  "stormwatch.tasks.notify.templates": ["*"]},
    options={"editable_wheel": {"mode": "strict"}},  # the default of `pip install -e .` (see above)
)
