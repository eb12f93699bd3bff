"""``python -m agentmeter_tui.core.scripted serve ...``: the server without the rest of the CLI
(no store, no sqlite-utils), which keeps its start fast."""

import sys

from .server import main

sys.exit(main())
