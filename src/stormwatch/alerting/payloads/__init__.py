"""Request bodies for the integrations (Alertmanager, the JSON webhook, PagerDuty, Teams): pure builders."""
