import itertools
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from bot.app import build_client
from bot.config.settings import read_settings
from bot.core.retry import RetryPolicy
from bot.service.client import VideoServiceClient
from bot.simulator import SimulatorConfig, VideoServiceSimulator
from bot.store.jobs import JobStore
from tests.store.postgres_server import PostgresServer, PostgresUnavailable, find_binaries, start_server


def fail_once(owner: object, method: str, error: BaseException) -> list[BaseException]:
    """The next call of `owner.method` raises `error` (a database hiccup), the later ones go through. The list it
    returns empties once it has."""
    real = getattr(owner, method)
    failures = [error]

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return await real(*args, **kwargs)

    setattr(owner, method, flaky)
    return failures


def pid_namespace_prefix() -> list[str] | None:
    """`unshare` with the options that start a command in a PID namespace of its own here, or None where it cannot
    (no unshare, no privilege, no user namespaces)."""
    if shutil.which("unshare") is None:
        return None
    for options in (["--pid"], ["--user", "--map-root-user", "--pid"]):
        prefix = ["unshare", *options, "--fork", "--kill-child"]
        if subprocess.run([*prefix, "true"], capture_output=True, check=False).returncode == 0:
            return prefix
    return None


class Clock:
    """A clock the test moves by hand: pass it as `clock=` and set `now`."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

SIM_KEY = "sk-sim-test-key-abcdef123456"


SimulatorFactory = Callable[..., Awaitable[VideoServiceSimulator]]


@pytest.fixture
async def start_simulator() -> AsyncIterator[SimulatorFactory]:
    """Start simulators (the test key unless told otherwise); every one is stopped at teardown."""
    started: list[VideoServiceSimulator] = []

    async def start(**config: Any) -> VideoServiceSimulator:
        sim = VideoServiceSimulator(SimulatorConfig(**{"api_key": SIM_KEY, **config}))
        await sim.start()
        started.append(sim)
        return sim

    yield start
    for sim in started:
        await sim.stop()


@pytest.fixture
async def simulator(start_simulator: SimulatorFactory) -> VideoServiceSimulator:
    return await start_simulator(job_seconds=0.3, max_budget=10_000)


@pytest.fixture
async def http_session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def sim_client(
    simulator: VideoServiceSimulator, http_session: aiohttp.ClientSession, tmp_path: Path
) -> VideoServiceClient:
    """The bot's own client (built by the composition root) against the simulator, with quick retries."""
    fast = RetryPolicy(attempts=3, deadline=5, base_delay=0.05, max_delay=0.2)
    settings = read_settings({"DISCORD_TOKEN": "discord-token-for-tests", "VIDEO_API_BASE_URL": simulator.base_url,
                              "VIDEO_API_KEY": SIM_KEY, "DATABASE_PATH": str(tmp_path / "bot.sqlite3")})
    return build_client(settings, http_session, paced=False, timeout_seconds=2, create_retry=fast, read_retry=fast)


# -- databases: SQLite, and a real PostgreSQL server started once per session ---------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole session (tests/store/postgres_server.py): missing binaries fail,
    never skip."""
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


_database_numbers = itertools.count(1)


@pytest.fixture
async def postgres_url(postgres_server: PostgresServer) -> AsyncIterator[str]:
    """A fresh, empty database on the session's server, dropped after the test."""
    name = f"test_{os.getpid()}_{next(_database_numbers)}"
    admin = await asyncpg.connect(postgres_server.url())
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    finally:
        await admin.close()
    yield postgres_server.url(name)
    admin = await asyncpg.connect(postgres_server.url())
    try:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        await admin.close()


#: Empties every table of a migrated database and restarts its ids: as good as a fresh one for the store
#: tests, in milliseconds instead of the third of a second a CREATE DATABASE takes.
_EMPTY_TABLES = """
DO $$
DECLARE item record;
BEGIN
    SET LOCAL session_replication_role = replica;  -- no foreign key checks: any order of deletes
    FOR item IN SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_version' LOOP
        EXECUTE format('DELETE FROM %I', item.tablename);
    END LOOP;
    FOR item IN SELECT sequencename FROM pg_sequences WHERE schemaname = 'public' LOOP
        EXECUTE format('ALTER SEQUENCE %I RESTART', item.sequencename);
    END LOOP;
END $$;
"""
_STORE_DATABASE = "store_tests"
_migrated: set[str] = set()


@pytest.fixture
async def postgres_store_url(postgres_server: PostgresServer) -> str:
    """A migrated database with no rows, shared by the store tests one after another (emptied before each).

    A test that changes the schema uses `postgres_url` instead.
    """
    url = postgres_server.url(_STORE_DATABASE)
    if url not in _migrated:
        admin = await asyncpg.connect(postgres_server.url())
        try:
            await admin.execute(f'CREATE DATABASE "{_STORE_DATABASE}" TEMPLATE template0')
        finally:
            await admin.close()
        await (await JobStore.open_url(url)).close()
        _migrated.add(url)
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(_EMPTY_TABLES)
    finally:
        await connection.close()
    return url


BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The address of an empty, migrated database of each backend: the store tests run against both."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    url: str = request.getfixturevalue("postgres_store_url")
    return url


StoreOpener = Callable[..., Awaitable[JobStore]]


@pytest.fixture
async def open_store(database_url: str) -> AsyncIterator[StoreOpener]:
    """Open a store on the test's database (each call another store on the same data, as after a restart);
    every store still open is closed at teardown."""
    opened: list[JobStore] = []

    async def open_one(clock: Callable[[], float] = time.time) -> JobStore:
        store = await JobStore.open_url(database_url, clock=clock)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.close()  # closing twice is harmless: a test may have closed it to open another


def pytest_report_header() -> str:
    """Which PostgreSQL the session's server runs (the system's, or the pgserver wheel's)."""
    try:
        return f"postgresql binaries: {find_binaries()}"
    except PostgresUnavailable as exc:
        return f"postgresql binaries: none ({exc})"
