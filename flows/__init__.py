"""Front doors: the command line and (later) the Prefect flows."""
