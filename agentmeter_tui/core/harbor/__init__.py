"""Harbor (harborframework.com) in one package: its task format, its container contract, its
verifier, and its job folders read, written and checked.

- ``taskfile.py``: a Harbor ``task.toml`` (pydantic) and telling one from ours (``is_harbor``);
- ``contract.py``: how a Harbor task's agent runs in its container (image WORKDIR and ENV, root,
  writable root filesystem, the task's limits); the docker and swarm sandboxes apply it;
- ``verifier.py``: ``bash /tests/test.sh`` judged by its reward file, registered in the verifier
  registry as ``harbor`` through this package's entry points, like any plugin's verifier;
- ``results.py``: Harbor's job and trial ``result.json`` (pydantic);
- ``importer.py``: a Harbor job folder as trials of a suite (``agentmeter import harbor``);
- ``exporter.py``: a suite as Harbor job folders (``agentmeter export harbor-jobs``);
- ``submission.py``: job folders against a leaderboard's rules (``agentmeter submission check``);
- ``dataset_registry.py``: Harbor's ``registry.json`` of datasets (``agentmeter run NAME@VERSION``).

Nothing here is imported by the package's ``__init__``: each module is loaded when it is used.
"""
