"""Notifications: what a finding says, Slack and email messages, delivery, the append-only
ledger that keeps a finding from being sent twice, settings and secrets, and the Prefect step."""
