"""Build hook: the built-in suites and the themes travel inside the wheel.

They live at the top of the checkout (``suites/``, ``themes/``), where people edit them; a
wheel has only the package, so ``build_py`` copies both under ``agentmeter_tui/_builtin/``,
where ``agentmeter_tui.core.paths.builtin_dir`` finds them through ``importlib.resources``.
An editable install skips the copy and reads the checkout's folders instead.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = ("suites", "themes")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.db", "*.db-*", ".*")


class BuildWithData(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        root = Path(__file__).resolve().parent
        for name in DATA:
            target = Path(self.build_lib) / "agentmeter_tui" / "_builtin" / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(root / name, target, ignore=SKIP)


setup(cmdclass={"build_py": BuildWithData})
