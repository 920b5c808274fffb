"""A repository to serve: checked with ``ctrgen validate``'s rules, ports checked free, the server configured for it
(shared by ``ctrgen serve``, ``ctrgen query REPO`` and the served demo)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import UserError


def check_repository(repo: Path) -> list[str]:
    """``ctrgen validate``'s rules; raises UserError (the findings, one per line) on any error. Returns the models."""
    from ..triton.lint.findings import ERROR
    from ..triton.lint.validate import validate_repository
    from .server import repository_models

    _check_entries(repo)
    findings = validate_repository(repo)
    errors = [f for f in findings if f.severity == ERROR]
    if errors:
        from ..errors import Problem

        raise UserError([Problem(f.file, f"{f.message} (not served: 'ctrgen validate' finds this)", f.field,
                                 f.line, f.col, f.fix) for f in errors])
    return repository_models(repo)


def _check_entries(repo: Path) -> None:
    """Every entry the server may open is a regular file or a folder: a FIFO would block the server's loader (it
    then gives up after the load timeout with an unrelated message) and a device would be read without end. A link is
    followed (assemble writes none; a hand-made repository may have them) and what it points to must be the same."""
    if not repo.is_dir():
        return          # validate_repository reports a missing repository
    for base, dirnames, filenames in os.walk(repo):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            path = Path(base) / name
            try:
                mode = os.stat(path).st_mode
            except OSError as exc:
                raise UserError.one(path, f"cannot be read: {exc.strerror}", field="REPO",
                                    fix="remove the entry, or point the link at a file") from None
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
                raise UserError.one(path, f"is {kind}, not a regular file: the server would block or read without "
                                    "end loading it", field="REPO", fix="replace it with the file it stands for")


def check_ports(host: str, ports: dict[str, int | None]) -> None:
    import errno
    import socket

    try:
        socket.getaddrinfo(host, None)
    except (OSError, UnicodeError) as exc:      # 999.1.1.1, a name that does not resolve
        raise UserError.one(host, f"not an address of this machine: {getattr(exc, 'strerror', None) or exc}",
                            field="--host", fix="give an address of this machine, e.g. 127.0.0.1 or 0.0.0.0") from None
    _check_unicast(host)
    for option, port in ports.items():
        if port is None:
            continue
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise UserError.one(f"{host}:{port}", f"port {port} is in use", field=option,
                                        fix=f"stop what listens there, or pass {option} with a free port") from None
                raise UserError.one(f"{host}:{port}", f"cannot listen there: {exc.strerror or exc}", field="--host",
                                    fix="give an address of this machine, e.g. 127.0.0.1 or 0.0.0.0") from None


def _check_unicast(host: str) -> None:
    """A multicast or broadcast address binds on Linux, but no TCP client can ever connect to it: the server would
    start and never be reached."""
    import ipaddress

    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:      # a host name: what it resolves to is bound below
        return
    if address.is_multicast or (address.version == 4 and address.is_reserved):
        kind = "a multicast" if address.is_multicast else "a broadcast or reserved"
        raise UserError.one(host, f"cannot listen there: {kind} address", field="--host",
                            fix="give an address of this machine, e.g. 127.0.0.1 or 0.0.0.0")


def server_for(repo: Path, scratch: Path, *, host: str, http_port: int, grpc_port: int,
               metrics_port: int | None):
    from .server import Server

    extra = []
    ps = repo / "ps.json"
    if ps.is_file():              # the HugeCTR backend reads its parameter server config from the command line
        extra.append(f"--backend-config=hugectr,ps={ps.resolve()}")
    return Server(repos=[repo.resolve()], scratch=scratch, http_port=http_port, grpc_port=grpc_port,
                  metrics_port=metrics_port, host=host, extra_args=tuple(extra))
