"""The pipeline's storage root (a local folder or an S3 prefix): settings, key and job-id rules
and the :class:`~.protocol.Storage` interface, the two backends, :func:`~.open.open_storage`,
and the audit lease."""
