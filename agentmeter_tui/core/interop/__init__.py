"""Formats other tools read and write: ATIF trajectories and the agent CLIs'
own session stores. Readers are pydantic models that keep unknown fields; writers produce
only what the newest published schema knows, so strict consumers accept our files.
Harbor's job folders are read and written in ``core/harbor/``."""
