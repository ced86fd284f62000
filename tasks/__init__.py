"""Prefect tasks, one thin IO step each: fetch and diagnose a job, publish the fleet, notify; and
the storage they read and write."""
