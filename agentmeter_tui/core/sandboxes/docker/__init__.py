"""Docker-family sandboxes: one container per trial on a local or remote engine
(``sandbox``), and swarm services spread over a swarm's nodes (``swarm``, ``swarmjob``), with
what both share: the engine connection, image resolution, root filesystems and containers.
"""
