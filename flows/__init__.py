"""Front doors: the ``stormwatch`` command line and the Prefect flows (nightly-audit, post-job)
with their deployments."""
