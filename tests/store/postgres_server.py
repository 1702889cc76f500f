"""A real PostgreSQL server for the test session (and the benchmark's, bench/suite.py): started here, in a
temporary directory, on loopback.

The binaries are the system's (`initdb` and `postgres` on PATH, or under /usr/lib/postgresql/*/bin) when
present, else those of the `pgserver` wheel (a dev dependency). `VIDEO_BOT_PG_BIN=pgserver` takes the
wheel's even when the system has its own (to check the fallback); `VIDEO_BOT_PG_BIN=/some/bin` takes that
directory. No binaries at all is an error, never a skip: these tests are part of the suite.

initdb refuses to run as root (CI runs as root): then the server runs as an unprivileged account
(`nobody`, or one made for it if the system has none), owning the temporary directory.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PG_BIN_VARIABLE = "VIDEO_BOT_PG_BIN"
_ACCOUNT = "nobody"
_MADE_ACCOUNT = "videobot-pg"
_START_SECONDS = 60.0


class PostgresUnavailable(RuntimeError):
    pass


def _has_server(directory: Path) -> bool:
    return (directory / "initdb").is_file() and (directory / "postgres").is_file()


def pgserver_binaries() -> Path:
    """The bin directory of the pgserver wheel (found without importing it: its import has side effects)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:
        raise PostgresUnavailable("the pgserver wheel is not installed (it is in the dev dependencies)")
    directory = Path(spec.origin).parent / "pginstall" / "bin"
    if not _has_server(directory):
        raise PostgresUnavailable(f"the pgserver wheel has no initdb and postgres in {directory}")
    return directory


def system_binaries() -> Path | None:
    initdb, postgres = shutil.which("initdb"), shutil.which("postgres")
    if initdb and postgres:
        directory = Path(initdb).resolve().parent
        if _has_server(directory):
            return directory
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: p.parent.name, reverse=True)
    for directory in versions:
        if _has_server(directory):
            return directory
    return None


def find_binaries() -> Path:
    """Where initdb and postgres are: VIDEO_BOT_PG_BIN's choice, else the system's, else pgserver's."""
    choice = os.environ.get(PG_BIN_VARIABLE, "").strip()
    if choice == "pgserver":
        return pgserver_binaries()
    if choice:
        directory = Path(choice)
        if not _has_server(directory):
            raise PostgresUnavailable(f"{PG_BIN_VARIABLE}={choice}: no initdb and postgres there")
        return directory
    return system_binaries() or pgserver_binaries()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _unprivileged_account() -> pwd.struct_passwd:
    for name in (_ACCOUNT, _MADE_ACCOUNT):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", _MADE_ACCOUNT],
                   check=True, capture_output=True)
    return pwd.getpwnam(_MADE_ACCOUNT)


@dataclass
class PostgresServer:
    bin_dir: Path
    directory: Path
    port: int
    process: subprocess.Popen[bytes] = field(repr=False)
    user: str = "postgres"  # the database superuser (trust authentication on loopback)
    version: str = ""

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.directory / "server.log").read_text(errors="replace")
        return ""

    def stop(self) -> None:
        """A fast shutdown (SIGINT): open sessions are ended, nothing waits."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def start_server(bin_dir: Path | None = None, *, durable: bool = False) -> PostgresServer:
    """initdb a cluster in a new temporary directory and start postgres on a free loopback port.

    `durable`: PostgreSQL's own defaults (every commit flushed to disk), as the benchmark compares it with
    SQLite at `synchronous=FULL`; the tests' server trades that for speed.
    """
    bin_dir = bin_dir or find_binaries()
    # Under /tmp, readable by all: the server's account must reach its data directory.
    directory = Path(tempfile.mkdtemp(prefix="video-bot-pg-", dir="/tmp"))
    directory.chmod(0o755)
    uid: int | None = None
    gid: int | None = None
    if os.geteuid() == 0:
        account = _unprivileged_account()
        uid, gid = account.pw_uid, account.pw_gid
        os.chown(directory, uid, gid)
    # root's supplementary groups are dropped too (an empty list; None leaves them as they are).
    extra_groups: list[int] | None = [] if uid is not None else None
    data = directory / "data"
    log_path = directory / "server.log"
    try:
        subprocess.run(
            [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
             "--locale=C", "--no-sync"],
            check=True, capture_output=True, cwd=directory, user=uid, group=gid, extra_groups=extra_groups,
        )
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        raise PostgresUnavailable(f"initdb in {bin_dir} failed: {exc.stderr.decode(errors='replace')}") from exc
    port = _free_port()
    # Speed over durability: the tests' data lives only as long as their session.
    fast = [] if durable else ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
    with log_path.open("wb") as log:
        if uid is not None and gid is not None:
            os.chown(log_path, uid, gid)
        process = subprocess.Popen(
            [str(bin_dir / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port), "-k", str(directory),
             *fast, "-c", "max_connections=200"],
            stdout=log, stderr=subprocess.STDOUT, cwd=directory, user=uid, group=gid, extra_groups=extra_groups,
        )
    version = subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True, text=True).stdout.strip()
    server = PostgresServer(bin_dir, directory, port, process, version=version)
    deadline = time.monotonic() + _START_SECONDS
    while "ready to accept connections" not in server.log():
        if process.poll() is not None or time.monotonic() > deadline:
            log_text = server.log()
            server.stop()
            raise PostgresUnavailable(f"postgres ({bin_dir}) did not start:\n{log_text}")
        time.sleep(0.05)
    return server
