"""Serving on this machine: the Triton server the venv installs (server.py), a repository checked and configured for
it (repository.py), ``ctrgen serve`` (cli_serve.py) and ``ctrgen query`` (query.py, offline.py, cli_query.py)."""
