"""Everything that runs without a screen: suites, store, harness adapters, sandboxes,
the scheduler and runner, pricing and metrics.

Nothing in this package imports Textual, rich, docker or asyncssh at import time; the
integrations that need them are loaded lazily by name (see ``harnesses`` and ``sandboxes``).
"""
