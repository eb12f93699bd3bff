"""The command line ``python -m`` gave the scripted server under its old package name (``serve
...``), kept working: the same as ``python -m agentmeter_tui.core.scripted serve ...``."""

import sys

from ..scripted.server import main

sys.exit(main())
