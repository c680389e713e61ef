"""A throw-away PostgreSQL server in a temporary directory, for tests and benchmarks.

``start_postgres()`` runs the distribution's own ``initdb`` and ``pg_ctl`` (Debian's
``postgresql`` package: ``/usr/lib/postgresql/<N>/bin``; or whatever is on ``PATH``) on a
fresh data directory in a new temporary directory, listening on a free loopback port with
``trust`` authentication, and returns its SQLAlchemy URL. PostgreSQL refuses to run as root,
so as root the server runs as the ``postgres`` system user (created by the package) through
``runuser``, in a directory of its own under the system temp dir (pytest's per-test folders
are private to root). Nothing else is touched; :meth:`PostgresServer.stop` stops the server
and removes the directory.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rlgate.core.commands import command

__all__ = ["PostgresServer", "PostgresUnavailable", "find_postgres_bin", "start_postgres"]


class PostgresUnavailable(RuntimeError):
    """The server binaries (or a user to run them as) are not on this machine."""


def find_postgres_bin() -> Path:
    """The folder holding ``initdb`` and ``pg_ctl``, newest version first."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
    )
    for folder in [*reversed(candidates), *(os.path.dirname(shutil.which("initdb") or ""),)]:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    raise PostgresUnavailable(
        "PostgreSQL server binaries not found (Debian: apt-get install postgresql; "
        "ci/install.sh installs it)"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    """A running server: its URL (database ``postgres``), data directory and how to stop it."""

    url: str
    folder: Path
    _run: str  # the words that start each command ("runuser -u postgres --" as root)
    _bin: Path

    def stop(self) -> None:
        """Stop the server (fast shutdown), wait for it, remove its directory."""
        subprocess.run(
            command(
                f"{self._run} {{pg_ctl}} stop -D {{data}} -m fast",
                pg_ctl=self._bin / "pg_ctl",
                data=self.folder / "pgdata",
            ).argv,
            capture_output=True,
            check=False,
            timeout=120,
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def start_postgres() -> PostgresServer:
    """Initialise and start a server; raises PostgresUnavailable if this machine can't."""
    bin_dir = find_postgres_bin()
    run = ""
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError as exc:
            raise PostgresUnavailable("running as root and there is no 'postgres' user") from exc
        run = "runuser -u postgres --"  # rlgate's own words, the start of each command
    folder = Path(tempfile.mkdtemp(prefix="rlgate-postgres-"))
    data, sockets = folder / "pgdata", folder / "sockets"
    sockets.mkdir(exist_ok=True)
    if run:
        for path in (folder, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
    init = subprocess.run(
        command(
            f"{run} {{initdb}} -D {{data}} -A trust -U rlgate -E UTF8",
            initdb=bin_dir / "initdb",
            data=data,
        ).argv,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if init.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise PostgresUnavailable(f"initdb failed: {init.stderr.strip()[-500:]}")
    port = _free_port()
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    start = subprocess.run(
        command(
            f"{run} {{pg_ctl}} start -D {{data}} -w -t 60 -l {{log}} --options={{options}}",
            pg_ctl=bin_dir / "pg_ctl",
            data=data,
            log=folder / "server.log",
            options=options,
        ).argv,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if start.returncode != 0:
        log = folder / "server.log"
        tail = log.read_text(errors="replace")[-500:] if log.is_file() else ""
        shutil.rmtree(folder, ignore_errors=True)
        raise PostgresUnavailable(f"pg_ctl start failed: {start.stderr.strip()} {tail}")
    url = f"postgresql+psycopg://rlgate@127.0.0.1:{port}/postgres"
    return PostgresServer(url, folder, run, bin_dir)
