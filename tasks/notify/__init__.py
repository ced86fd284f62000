"""Notifications: what talks to the world for alerting. Slack and email (rendering and sending), delivery
with retries, secrets resolved and redacted, settings from flags and the environment, the routes and
silences files in storage, and the audit's notify step (its Prefect task, the alert state's claims).
What to send, and why, is decided by the pure :mod:`stormwatch.alerting`."""
