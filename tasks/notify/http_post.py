"""POST a JSON body to an integration (Alertmanager, a webhook, PagerDuty, Teams) and classify the answer.

The body is sent as given (bytes), so a signature computed over it is over exactly what goes on
the wire. Every request runs under the client's timeout (connect, read, write, pool), so a server
that accepts and never answers costs at most that per attempt. A 2xx is success; 408, 429, 5xx and
network errors are retriable :class:`~.delivery.SendError`; any other status is permanent (a
refused payload or bad credentials). Error texts may quote the URL (httpx does): the caller redacts.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from stormwatch.alerting.plain_text import one_line
from stormwatch.outputs.media_types import MediaType
from stormwatch.tasks.notify.delivery import SendError


def retry_after_s(raw: str | None) -> float | None:
    """An HTTP ``Retry-After`` in seconds (a date form is ignored)."""
    try:
        return None if raw is None else max(0.0, float(raw))
    except ValueError:
        return None


def post_body(client: httpx.Client, url: str, body: bytes, *, headers: Mapping[str, str] | None = None
              ) -> httpx.Response:
    """POST ``body`` as JSON with ``headers``; the response when 2xx, else raises :class:`SendError`."""
    try:
        response = client.post(url, content=body, headers={"Content-Type": MediaType.JSON, **(headers or {})})
    except httpx.TransportError as exc:  # timeouts included
        raise SendError(f"{type(exc).__name__}: {exc}", retriable=True) from None
    if response.is_success:
        return response
    status = response.status_code
    raise SendError(f"HTTP {status} {response.reason_phrase}: {one_line(response.text, 200)}",
                    retriable=status in (408, 429) or status >= 500,
                    retry_after_s=retry_after_s(response.headers.get("Retry-After")))
