"""Installing the agent CLIs (installer.py) and the runtime bundle that runs them in any
glibc image (clisbundle.py)."""
