"""A real PostgreSQL server for the storage tests: initdb into a temporary folder, ``postgres`` on loopback at a free
port, stopped by its PID. The binaries come from the ``pgserver`` wheel (the dev extra, so ``make test`` installs
them), else from the PATH (Debian's ``postgresql`` package); without either, starting fails with the fix."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from xc_core.measure import free_port

#: the server refuses to run as root: as root, the tests run it as this unprivileged user
SERVER_USER = "nobody"


def server_binaries() -> Path:
    """The folder holding ``initdb`` and ``postgres``."""
    spec = importlib.util.find_spec("pgserver")  # found, never imported: its import writes to the user's run dir
    if spec is not None and spec.submodule_search_locations:
        folder = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
        if (folder / "postgres").exists():
            return folder
    found = shutil.which("postgres")
    if found:
        return Path(found).parent
    raise RuntimeError("no PostgreSQL server binary (postgres, initdb): run `make install` (the dev extra installs "
                       "pgserver's binaries) or `apt-get install postgresql`")


class PostgresServer:
    """One server with its data in a fresh temporary folder (removed by :meth:`stop`); :attr:`url` is what
    ``XC_POSTGRES_URL`` takes. Not under pytest's ``tmp_path``: as root the server runs as :data:`SERVER_USER`, who
    must reach its folder, and pytest's are private to root."""

    def __init__(self) -> None:
        self.folder, self.port = Path(tempfile.mkdtemp(prefix="xc-postgres-")), free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.user = SERVER_USER if os.geteuid() == 0 else None

    @property
    def url(self) -> str:
        return f"postgresql://xc@127.0.0.1:{self.port}"

    def _binaries(self) -> Path:
        """The server's binaries, copied beside its data when it runs as another user: the wheel's copy sits in a
        virtual environment that user may not be able to reach (a checkout under /root). The copy is relocatable:
        PostgreSQL finds its libraries and share files relative to its executable."""
        binaries = server_binaries()
        if self.user is None or binaries.parent.name != "pginstall":
            return binaries
        package = binaries.parent.parent  # site-packages/pgserver; its shared libraries beside it (the wheel's
        for part in (package / "pginstall", package.parent / "pgserver.libs"):  # rpath $ORIGIN/../../../pgserver.libs)
            if part.exists():
                target = self.folder / part.relative_to(package.parent)
                shutil.copytree(part, target, symlinks=True)
        return self.folder / "pgserver" / "pginstall" / "bin"

    def start(self, timeout: float = 60.0) -> PostgresServer:
        binaries = self._binaries()
        if self.user is not None:
            shutil.chown(self.folder, self.user)
        data = self.folder / "data"
        subprocess.run([str(binaries / "initdb"), "-D", str(data), "-U", "xc", "--auth=trust", "-E", "UTF8",
                        "--no-sync"], check=True, capture_output=True, user=self.user)
        log = (self.folder / "server.log").open("wb")
        # loopback only, the socket in the test's folder; no fsync: a test server's data is thrown away
        self.process = subprocess.Popen(
            [str(binaries / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(self.port),
             "-k", str(self.folder), "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "max_connections=200"],
            stdout=log, stderr=subprocess.STDOUT, user=self.user)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited ({self.process.returncode}): "
                                   f"{(self.folder / 'server.log').read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"postgres did not listen on 127.0.0.1:{self.port} within {timeout:.0f} s")

    def stop(self) -> None:
        """Fast shutdown by PID (SIGINT: roll back open transactions, disconnect clients, stop); the folder goes."""
        try:
            if self.process is not None and self.process.poll() is None:
                os.kill(self.process.pid, signal.SIGINT)
                try:
                    self.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
