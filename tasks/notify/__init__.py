"""Notifications and alerting: findings as alerts (a state per fingerprint, routes, silences, grouping,
inhibition), Slack and email messages, delivery, the append-only ledger, settings and secrets, and
the Prefect step. The pure parts (observations, alert_state, decisions, routes, silences, inhibition,
grouping, messages, overview) take records and return decisions; IO lives in step, config_store and sending."""
