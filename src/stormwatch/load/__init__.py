"""Loading a job: the artifact tree (bytes by key), which keys are telemetry and how they group
into units, per-job limits, and :func:`~stormwatch.load.loader.load_artifacts`, which parses
every unit (through :mod:`stormwatch.formats`) into one events frame plus its sessions."""
