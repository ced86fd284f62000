"""Packaging that pyproject.toml cannot say statically: one installed namespace over four folders.

The engine lives in ``stormwatch/``; the pipeline's folders ``tasks/``, ``flows/`` and
``reports/`` stay at the top of the repo but install as ``stormwatch.tasks``,
``stormwatch.flows`` and ``stormwatch.reports``, so no top-level ``tasks`` or ``flows``
package (names most Prefect projects use for their own folders) ever reaches site-packages.
"""

from __future__ import annotations

from setuptools import find_packages, setup

PIPELINE_FOLDERS = ("tasks", "flows", "reports")

packages = find_packages(include=["stormwatch", "stormwatch.*"])
for folder in PIPELINE_FOLDERS:
    packages.append(f"stormwatch.{folder}")
    packages += [f"stormwatch.{folder}.{sub}" for sub in find_packages(where=folder)]
packages.append("stormwatch.reports.templates")  # data only; listed so setuptools ships it without a warning

setup(
    packages=packages,
    package_dir={"stormwatch": "stormwatch", **{f"stormwatch.{folder}": folder for folder in PIPELINE_FOLDERS}},
    package_data={"stormwatch.reports.templates": ["*"]},
)
