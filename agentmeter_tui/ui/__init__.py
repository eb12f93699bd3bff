"""The Textual layer: an app that attaches to a runner and reads the store.

``app.run_app(db=..., mode=...)`` is the entry point for ``run``, ``demo``, ``attach`` and
``review``. Everything here may import ``textual``; nothing in ``core`` imports this package.
Modules without Textual (``format``, ``live_state``, ``grid_state``, ``data``,
``transcript_doc``) hold the state and the store queries, so they are tested on their own.
"""
