"""What a diagnosed job becomes: the ``model.json`` document and the fleet rows (``fleet.json``,
``fleet.parquet``)."""
