"""The PostgreSQL backend of the stores (DATABASE_URL=postgresql://…), on an asyncpg pool.

Several bot processes may share one database, so a write transaction takes one advisory lock first:
one writer at a time across processes, as SQLite's BEGIN IMMEDIATE is on one file. A quota check and
the row it allows are therefore one decision, whichever process makes it. Reads outside a transaction
use any pooled connection; reads inside one run on the transaction's own connection.

The stores' SQL is SQLite's, with `?` placeholders; `translate` turns it into PostgreSQL's.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any

import asyncpg

from bot.config.database_url import password_of, redacted
from bot.store.sqlite import BUSY_TIMEOUT_MS, DatabaseTooNew, Dialect, Migration, Row, Step, StoreUnavailable

#: pg_advisory_xact_lock key of every write transaction ("vbot" in ASCII): one writer at a time.
WRITE_LOCK_KEY = 0x76626F74
#: pg_advisory_lock key held while migrating, so two processes starting at once apply each migration once.
MIGRATE_LOCK_KEY = WRITE_LOCK_KEY + 1
#: Like SQLite's busy_timeout, the same wait: a write waiting this long for another process's lock fails as
#: StoreUnavailable (the row is written before the interaction is acknowledged, inside Discord's 3 s).
LOCK_TIMEOUT_MS = BUSY_TIMEOUT_MS
#: What `transaction(wait=False)` waits for another process's write before giving up (StoreUnavailable).
NO_WAIT_LOCK_TIMEOUT_MS = 200


# -- SQL translation --------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """SQLite's SQL as the stores write it, in PostgreSQL's dialect. Text inside literals is never touched.

    - `?` becomes `$1`, `$2`, … in order;
    - `IS ?` becomes `IS NOT DISTINCT FROM $n` (and `IS NOT ?` becomes `IS DISTINCT FROM $n`): SQLite's
      `IS` compares NULL as a value, PostgreSQL's `IS` takes only NULL, TRUE or FALSE;
    - `json_object(…)` becomes `json_build_object(…)::text` (SQLite's returns text; one inside another
      stays json, so it nests as an object).
    """
    out: list[str] = []
    closers: list[str] = []  # for each open parenthesis, what its `)` becomes
    count = 0
    i, n = 0, len(sql)

    def skip_space(j: int) -> int:
        while j < n and sql[j].isspace():
            j += 1
        return j

    def word_at(j: int) -> tuple[str, int]:
        k = j
        while k < n and (sql[k].isalnum() or sql[k] == "_"):
            k += 1
        return sql[j:k], k

    while i < n:
        char = sql[i]
        if char in "'\"":  # a string literal or a quoted identifier, doubled quotes inside
            end = i + 1
            while end < n:
                if sql[end] == char:
                    if end + 1 < n and sql[end + 1] == char:
                        end += 2
                        continue
                    break
                end += 1
            out.append(sql[i:end + 1])
            i = end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            out.append(sql[i:end])
            i = end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(sql[i:end])
            i = end
        elif char == "?":
            count += 1
            out.append(f"${count}")
            i += 1
        elif char == "(":
            closers.append(")")
            out.append(char)
            i += 1
        elif char == ")":
            out.append(closers.pop() if closers else ")")
            i += 1
        elif char.isalpha() or char == "_":
            word, end = word_at(i)
            lowered = word.lower()
            if i > 0 and (sql[i - 1].isalnum() or sql[i - 1] in "_$"):
                out.append(word)  # the tail of a longer token (a number's exponent, a $n)
            elif lowered == "is":
                after = skip_space(end)
                following, following_end = word_at(after)
                if after < n and sql[after] == "?":
                    count += 1
                    out.append(f"IS NOT DISTINCT FROM ${count}")
                    end = after + 1
                elif following.lower() == "not" and (mark := skip_space(following_end)) < n and sql[mark] == "?":
                    count += 1
                    out.append(f"IS DISTINCT FROM ${count}")
                    end = mark + 1
                else:
                    out.append(word)
            elif lowered == "json_object" and (paren := skip_space(end)) < n and sql[paren] == "(":
                out.append("json_build_object(")
                # Only the outermost becomes text: a json_object inside another stays an object, as in SQLite.
                closers.append(")" if ")::text" in closers else ")::text")
                end = paren + 1
            else:
                out.append(word)
            i = end
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _rowcount(status: str) -> int:
    """The rows a statement changed, from its command tag ("UPDATE 3", "INSERT 0 1", "DELETE 0")."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


def _scrubbed(text: str, url: str) -> str:
    password = password_of(url)
    return text.replace(password, "***") if password else text


@contextlib.contextmanager
def _postgres_errors() -> Iterator[None]:
    try:
        yield
    except (asyncpg.exceptions.IntegrityConstraintViolationError, asyncpg.exceptions.SyntaxOrAccessError,
            asyncpg.exceptions.DataError):
        raise  # a broken rule of the schema, or SQL this backend cannot run: a bug, not an outage
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        raise StoreUnavailable(f"the database could not be written: {type(exc).__name__}: {exc}") from exc


class _NoRow(Exception):
    """A `needs_row` step of `write_steps` returned none."""


class PostgresDatabase:
    """An asyncpg pool; write transactions one at a time across every process on the database."""

    dialect: Dialect = "postgresql"

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        # Coroutines of this process queue here rather than each holding a pooled connection while it waits.
        self._write_lock = asyncio.Lock()
        self._transaction: contextvars.ContextVar[Any | None] = contextvars.ContextVar(
            f"postgres_transaction_{id(self)}", default=None
        )

    @classmethod
    async def open(cls, url: str, *, min_size: int = 1, max_size: int = 8) -> PostgresDatabase:
        """Connect a pool; a database that cannot be reached is StoreUnavailable (its password never shown)."""
        try:
            pool = await asyncpg.create_pool(
                url, min_size=min_size, max_size=max_size, command_timeout=60,
                server_settings={"application_name": "video-request-bot", "lock_timeout": str(LOCK_TIMEOUT_MS)},
            )
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError, ValueError) as exc:
            detail = _scrubbed(f"{type(exc).__name__}: {exc}", url)
            raise StoreUnavailable(f"cannot connect to the database at {redacted(url)}: {detail}") from None
        return cls(pool)

    async def close(self) -> None:
        await self._pool.close()

    # -- migrations ------------------------------------------------------------------------------

    async def schema_version(self) -> int:
        async with self._pool.acquire() as connection:
            return await self._version(connection)

    @staticmethod
    async def _version(connection: Any) -> int:
        if await connection.fetchval("SELECT to_regclass('schema_version')") is None:
            return 0
        return int(await connection.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_version"))

    async def migrate(self, migrations: Sequence[Migration]) -> None:
        async with self._pool.acquire() as connection:
            await connection.execute("SET lock_timeout = 0")  # another process's migration may take a while
            await connection.execute("SELECT pg_advisory_lock($1)", MIGRATE_LOCK_KEY)
            try:
                await connection.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                known = len(migrations)
                while (current := await self._version(connection)) != known:
                    if current > known:
                        raise DatabaseTooNew(current, known)
                    migration = migrations[current]
                    async with connection.transaction():
                        await connection.execute(migration.sql)  # one script, PostgreSQL splits it itself
                        await connection.execute("DELETE FROM schema_version")
                        await connection.execute("INSERT INTO schema_version (version) VALUES ($1)",
                                                 migration.version)
            finally:
                await connection.execute("SELECT pg_advisory_unlock($1)", MIGRATE_LOCK_KEY)

    # -- statements ------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _write(self, wait: bool) -> AsyncIterator[None]:
        async with self._write_lock:
            with _postgres_errors():
                async with self._pool.acquire() as connection:
                    token = self._transaction.set(connection)
                    try:
                        if wait:
                            # One trip: the transaction and the lock that makes it the only writer.
                            await connection.execute(f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})")
                        else:
                            # Another process writes often (every poll): a short wait, not none, or a periodic
                            # write (the lease renewal) would lose too many rounds to ordinary traffic.
                            await connection.execute(
                                f"BEGIN; SET LOCAL lock_timeout = {NO_WAIT_LOCK_TIMEOUT_MS};"
                                f" SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY});"
                                f" SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}"
                            )
                        yield
                        await connection.execute("COMMIT")
                    except BaseException:
                        if connection.is_in_transaction():
                            with contextlib.suppress(asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                                await connection.execute("ROLLBACK")
                        raise
                    finally:
                        self._transaction.reset(token)

    def transaction(self, *, wait: bool = True) -> contextlib.AbstractAsyncContextManager[None]:
        return self._write(wait)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        target = self._transaction.get() or self._pool
        with _postgres_errors():
            return _rowcount(await target.execute(translate(sql), *params))

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        target = self._transaction.get() or self._pool
        with _postgres_errors():
            await target.executemany(translate(sql), [tuple(row) for row in rows])

    async def write_steps(self, steps: Sequence[Step], *, durable: bool = True) -> list[list[Row]] | None:
        # Every commit waits for the server's disk: `durable=False` only spares SQLite's fsync in this process.
        results: list[list[Row]] = []
        try:
            async with self._write(wait=True):
                for step in steps:
                    rows = await self.fetch_all(step.sql, step.params)
                    results.append(rows)
                    if step.needs_row and not rows:
                        raise _NoRow  # out of the transaction, rolling it back
        except _NoRow:
            return None
        return results

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        target = self._transaction.get() or self._pool
        with _postgres_errors():
            return list(await target.fetch(translate(sql), *params))

    async def fetch_many(self, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Row]]:
        """One after the other: a trip to the server each (there is no thread to save a trip to)."""
        return [await self.fetch_all(sql, params) for sql, params in queries]

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None
