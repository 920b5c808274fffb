"""The serving tests' Triton server: the package's own (codegen/serve/server.py), which ``ctrgen serve`` runs too.
Kept as a module so tests and bench scripts import ``Server``, ``pytriton_dir`` and ``free_port`` from one place."""

from codegen.serve.server import (ENV_GLOB, EXIT_TIMEOUT_S, SHM_GLOB, Server, backend_dir, free_port,  # noqa: F401
                                  pytriton_dir)
