"""Alerting's pure logic: findings as alerts, one state per fingerprint, routed, silenced, inhibited, grouped.

Records in, decisions out; bytes in, state out. Nothing here sends, reads storage or imports Prefect,
an HTTP client, SMTP or templating (``tests/test_import_boundaries.py``): the notify step
(``stormwatch.tasks.notify``) reads the ledger, the alert state and the configuration files, calls
these modules, sends what they decide and writes the results back.
"""
