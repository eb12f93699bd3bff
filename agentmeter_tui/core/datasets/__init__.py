"""Datasets by name: a registry file in Harbor's format (``core/harbor/dataset_registry.py``), and
the pinned task folders it names fetched with git into a cache once (``agentmeter run NAME@VERSION``)."""
