"""The scripted model server: a local HTTP server that speaks the model APIs the agent CLIs
call and plays a scripted scenario per API key, so that real CLIs run offline and tests can
compare what a CLI reports with exactly what it was served.

Modules: ``scenario`` (scenario files), ``replies`` (protocol-neutral answers, shell-tool
discovery), ``session`` (per-key state, usage served, request log), one module per wire
protocol (``chat``, ``anthropic``, ``responses``, ``gemini``: a :class:`~.protocol.ScriptedProtocol`
each, named by its protocol's class in ``core/wire/``), ``app`` (the aiohttp routes),
``server`` (process and thread runners) and ``client`` (stdlib-only helpers for the runner
and tests). The format is described in ``docs/scenarios.md``.

Nothing is imported here, so that ``client`` stays free of aiohttp and pydantic.
"""
