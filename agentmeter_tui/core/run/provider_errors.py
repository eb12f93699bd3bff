"""Provider errors a trial met at the wire, and whether its agent gave up because of them.

A 429, 408, 5xx (Anthropic's 529 overloaded included), an error inside a 200 stream, or a
provider the proxy could not reach is the provider's fault, not the configuration's: a trial
whose agent ended on such an error (its last model call failed that way) is ``infra-invalid``
(seed 000 section 3.5), keeps its tokens in the accounting, and is retried after a backoff
that honours the provider's retry-after. A 400/401/403/404 is the configuration's and stays
the agent's outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BACKOFF_BASE = 1.0  # seconds before the first retry, doubled per attempt ...
BACKOFF_CAP = 60.0  # ... up to this, unless the provider asked for longer


def is_provider_error(error: dict[str, Any] | None) -> bool:
    if not error:
        return False
    status = int(error.get("status") or 0)
    return status in (408, 429) or status >= 500 or status < 400  # < 400: an error inside a 2xx answer


@dataclass
class ProviderErrors:
    errors: list[dict[str, Any]] = field(default_factory=list)
    last_failed: bool = False  # the trial's last model call ended on a provider error

    def record(self, error: dict[str, Any] | None) -> bool:
        """One model call's outcome; True when it was a provider error."""
        failed = is_provider_error(error)
        self.last_failed = failed
        if failed:
            self.errors.append(error)  # type: ignore[arg-type]
        return failed

    @property
    def gave_up(self) -> bool:
        return self.last_failed

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for error in self.errors:
            label = f"{error.get('status')} {error.get('type')}"
            counts[label] = counts.get(label, 0) + 1
        return ", ".join(f"{label} x{n}" if n > 1 else label for label, n in counts.items())

    def retry_after(self) -> float | None:
        waits = [e["retry_after"] for e in self.errors if e.get("retry_after") is not None]
        return max(waits) if waits else None

    def backoff(self, attempt: int) -> float:
        """Seconds before retrying attempt ``attempt``: exponential, never less than asked for."""
        return max(self.retry_after() or 0.0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** attempt))
