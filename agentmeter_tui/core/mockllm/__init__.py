"""The scripted server's package before issue 33 renamed it, kept for compatibility only:
``python -m`` on this package runs the scripted server (``__main__.py``), as the docs of
earlier versions said. The server itself lives in ``core/scripted/``; import from there.
"""
