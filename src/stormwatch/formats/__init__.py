"""Readers that turn one artifact's bytes into canonical events (see :mod:`stormwatch.events.records`)."""
