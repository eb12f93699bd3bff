"""Suites and tasks: the suite and task models (suite.py), loading and checking them
(load.py), suite.toml's and task.toml's tables (suitefile.py, taskfolders.py), a trial's
budget (budget.py), the strict base of their tables (strict.py), and what a task folder may bring into a sandbox (taskfiles.py)."""
