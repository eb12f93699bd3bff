"""Formats other tools read and write: ATIF trajectories, Harbor job folders, the agent CLIs'
own session stores. Readers are pydantic models that keep unknown fields; writers produce
only what the newest published schema knows, so strict consumers accept our files."""
