"""The ssh sandbox: trials on remote hosts over asyncssh (``sandbox``), with its connections
(``conn``) and host settings and remote scripts (``hosts``).
"""
