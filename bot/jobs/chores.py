"""The bot's chores beside the jobs: log channels, budget alerts, waiting receipts, forgetting old prompts,
pruning old events and offers.

Events are written to the database in the same transaction as what they report (bot/store/jobs/,
bot/store/servers.py), and posted from here in order per server, so a stop between the two loses no log line.
Servers take turns: each round starts a bounded share of every waiting server's lines, each server's share a task
of its own that the round does not wait for, so one server's burst, slow channel or fault never holds back
another's lines and alerts, nor the tick's other chores.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from bot.community import trust
from bot.community.server_rules import ServerRules
from bot.config.settings import Settings
from bot.core.tasks import BackgroundTasks, cancel_and_wait
from bot.jobs.port import ChannelRefused, DiscordUnavailable, LinePoster
from bot.jobs.progress import ProgressRefresher
from bot.service.client import VideoServiceClient
from bot.service.key_budget import KeyBudget
from bot.store.jobs import JobStore, meta
from bot.store.servers import Event

log = logging.getLogger(__name__)

#: A log-channel line for an event, in a language (the front end writes it: bot/frontend/settings_embeds.py).
EventText = Callable[[Event, str], str]
#: The language a server's own preferred locale gives, when its admins set none.
GuildLocale = Callable[[int], str | None]

#: Settings changes kept per server however old: `/settings` shows the latest five as its history.
SETTINGS_HISTORY_KEPT = 5

#: The chores, by their actions in the trust model (bot/community/trust.py; docs/trust.md lists them).
CHORES: tuple[str, ...] = (
    trust.LOG_LINES, trust.BUDGET_ALERTS, trust.RECEIPTS, trust.PROMPT_RETENTION, trust.RECORD_RETENTION,
)


@dataclass(frozen=True)
class Chores:
    tick_seconds: float = 2.0  # log lines appear within seconds; one indexed query a tick
    budget_check_seconds: float = 300.0  # /key/info is read at most this often for alerts
    retention_check_seconds: float = 3600.0
    give_up_posting_after: float = 3600.0  # a log line Discord keeps refusing is dropped after this
    closed_channel_seconds: float = 600.0  # after a 403/404, the channel's lines are dropped this long
    # A round (one tick) starts a share of up to this many lines per server, near Discord's own pace for one
    # channel (about 5 messages per 5 s): a burst waits in the database. A share asleep on its channel's rate
    # limit keeps only its own server out of the next rounds until it ends.
    lines_per_server: int = 3
    servers_per_round: int = 50  # shares in flight at once (Discord's global pace: 50 requests/s); more wait
    event_retention_days: float = 90.0  # posted log lines are deleted after this (the settings history's last 5 stay)
    offer_retention_seconds: float = 86400.0  # closed offers (used, cancelled, expired) are deleted after this


class Housekeeping:
    def __init__(
        self,
        store: JobStore,
        rules: ServerRules,
        client: VideoServiceClient,
        settings: Settings,
        post: LinePoster,
        *,
        event_text: EventText,
        guild_locale: GuildLocale = lambda guild_id: None,
        chores: Chores | None = None,
        progress: ProgressRefresher | None = None,
        clock: Callable[[], float] = time.time,
        leads: Callable[[], Awaitable[bool]] | None = None,
        key_budget: KeyBudget | None = None,
    ) -> None:
        """`leads`: whether this process does the chores done once for all processes on the database (the log
        channels, budget alerts, prompt retention); without it, this process alone does them. `key_budget`: the
        process's one reader of the key's budget (an alert then shares a /balance's read)."""
        self._store = store
        self._leads = leads
        self._rules = rules
        self._key_budget = key_budget or KeyBudget(client)
        self._settings = settings
        self._post = post
        self._event_text = event_text
        self._guild_locale = guild_locale
        self._chores = chores or Chores()
        self._progress = progress
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        # Each server's share still being posted: the next rounds skip that server, so its lines stay in order and
        # are posted once. The tasks are kept and their failures logged with their tracebacks.
        self._shares: dict[int, asyncio.Task[int]] = {}
        self._share_tasks = BackgroundTasks(log)
        self._last_budget_check = float("-inf")
        self._last_retention = float("-inf")
        self._closed_until: dict[int, float] = {}
        self._host = trust.Host(settings.allowed_guild_ids)

    def _speaks_to(self, action: str, guild_id: int) -> bool:
        """Whether the trust model lets this chore speak to that server (one the host no longer lists hears
        nothing more)."""
        return trust.decide(action, trust.Facts(guild_id=guild_id), self._host).allowed

    # -- the loop -----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="housekeeping")

    async def stop(self) -> None:
        """End the loop and every share still in flight (a line cut off before it was marked posted is posted
        again after a restart, never lost)."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        await self._share_tasks.cancel_all()
        self._shares.clear()

    async def _run(self) -> None:
        while True:
            await self.tick()
            await asyncio.sleep(self._chores.tick_seconds)

    async def tick(self) -> None:
        """One round of every chore that is due; one failing chore never stops the others or the loop."""
        now = self._clock()
        chores: list[tuple[str, Callable[[], Awaitable[object]]]] = []
        if self._progress is not None:
            chores.append((trust.RECEIPTS, self._progress.refresh))  # each process its own jobs' receipts
        try:
            leading = self._leads is None or await self._leads()
        except Exception:
            log.exception("housekeeping: could not tell which process leads the shared chores; skipping them")
            leading = False
        if not leading:
            # Another process posts the log lines and alerts: two would post each line twice.
            self._last_budget_check = self._last_retention = float("-inf")  # due at once if this one leads later
        else:
            chores.insert(0, (trust.LOG_LINES, self.start_round))  # started, not waited for
        if leading and now - self._last_budget_check >= self._chores.budget_check_seconds:
            self._last_budget_check = now
            chores.append((trust.BUDGET_ALERTS, self.check_budget))
        if leading and now - self._last_retention >= self._chores.retention_check_seconds:
            self._last_retention = now
            chores.append((trust.PROMPT_RETENTION, self.erase_old_prompts))
            chores.append((trust.RECORD_RETENTION, self.prune_old_records))
        for name, chore in chores:
            try:
                await chore()
            except Exception:
                log.exception("housekeeping: %s failed; trying again next round", name)

    # -- the chores ---------------------------------------------------------------------------------

    async def start_round(self) -> list[asyncio.Task[int]]:
        """Start one round of waiting events to their servers' log channels, and return its shares' tasks.

        Each server's share (`Chores.lines_per_server`, its oldest lines, in order) is posted in a task of its
        own, which the round does not wait for: a server whose channel is slow or rate-limited, or whose share
        fails, holds back only its own lines. A server whose share is still in flight is left out of the round
        (its lines stay in order, each posted once). A channel Discord cannot take a line for right now keeps
        its server's later lines waiting; one that refuses the bot (gone, or no access) gets none for a while,
        so a flood costs one refusal.
        """
        room = self._chores.servers_per_round - len(self._shares)
        if room <= 0:
            return []
        shares = await self._rules.store.unposted_by_server(
            per_server=self._chores.lines_per_server, servers=room, excluding=set(self._shares)
        )
        started = []
        for guild_id, events in shares.items():
            if guild_id in self._shares:
                continue  # started meanwhile by a round that ran at the same time
            task = self._share_tasks.spawn(self._post_share(events), f"log lines of server {guild_id}")
            self._shares[guild_id] = task
            task.add_done_callback(partial(self._share_ended, guild_id))
            started.append(task)
        return started

    def _share_ended(self, guild_id: int, task: asyncio.Task[int]) -> None:
        if self._shares.get(guild_id) is task:
            del self._shares[guild_id]

    async def post_events(self) -> int:
        """One round, waited for: how many lines its shares posted (a failed share counts none; its failure is
        logged)."""
        posted = await asyncio.gather(*await self.start_round(), return_exceptions=True)
        return sum(count for count in posted if isinstance(count, int))

    async def _post_share(self, events: list[Event]) -> int:
        """Post one server's share of a round, in order; stops at a line Discord cannot take now."""
        posted = 0
        now = self._clock()
        guild_id = events[0].guild_id
        server = await self._rules.effective(guild_id)
        channel = server.log_channel_id
        listed = self._speaks_to(trust.LOG_LINES, guild_id)  # a server the host no longer lists hears nothing more
        if not listed or channel is None or self._closed_until.get(channel, 0.0) > now:
            # Nowhere to post: the server's whole backlog is passed over at once, not a share a round.
            await self._rules.store.pass_over_events(guild_id, written_until=now)
            return 0
        language = server.language or self._guild_locale(guild_id) or "en"
        for event in events:
            if self._closed_until.get(channel, 0.0) > now:
                await self._rules.store.mark_posted([event.id])  # closed by this share's own refusal just now
                continue
            try:
                await self._post(channel, self._event_text(event, language))
            except ChannelRefused:
                # No retry helps; the admins can pick another channel with /settings log_channel.
                log.warning("server %s: cannot post to log channel %s; its lines are dropped for %.0f s",
                            guild_id, channel, self._chores.closed_channel_seconds)
                self._closed_until[channel] = now + self._chores.closed_channel_seconds
            except (DiscordUnavailable, OSError) as exc:
                if now - event.created_at < self._chores.give_up_posting_after:
                    log.warning("server %s: log channel unavailable (%s); retrying next round", guild_id,
                                type(exc.__cause__ or exc).__name__)
                    return posted  # keep this server's order: its later lines wait for this one
                log.warning("server %s: event %s dropped after an hour of failures", guild_id, event.id)
            else:
                posted += 1
            await self._rules.store.mark_posted([event.id])
        return posted

    async def check_budget(self) -> None:
        """One alert per server when the key's remaining budget falls below its threshold, until it recovers."""
        thresholds = {
            guild_id: threshold
            for guild_id, threshold in (await self._rules.store.guilds_with_setting("budget_alert_yen")).items()
            if self._speaks_to(trust.BUDGET_ALERTS, guild_id)
        }
        if not thresholds:
            return
        info = await self._key_budget.read()
        left = info.available
        for guild_id, threshold in thresholds.items():
            if not isinstance(threshold, int) or isinstance(threshold, bool):
                continue
            if (await self._rules.effective(guild_id)).log_channel_id is None:
                continue  # nowhere to say it: alert once a log channel is set
            key = meta.budget_alert(guild_id)
            alerted = await self._store.get_meta(key) is not None
            low = left is not None and left < threshold
            if low and not alerted:
                # The mark and the event in one transaction: of processes checking at once, one alerts.
                await self._rules.store.add_event_once(guild_id, "budget_low", once_key=key,
                                                       details={"left": left, "threshold": threshold})
            elif not low and alerted:
                await self._store.delete_meta(key)

    async def erase_old_prompts(self) -> int:
        cutoff = self._clock() - self._settings.prompt_retention_days * 86400
        erased = await self._store.erase_prompts(finished_before=cutoff)
        if erased:
            log.info("erased the prompts of %d requests finished more than %d days ago", erased,
                     self._settings.prompt_retention_days)
        return erased

    async def prune_old_records(self) -> tuple[int, int]:
        """Delete log lines posted more than `event_retention_days` ago (each server's last settings changes stay:
        `/settings` shows them) and offers closed more than `offer_retention_seconds` ago; returns both counts."""
        now = self._clock()
        events = await self._rules.store.prune_events(
            posted_before=now - self._chores.event_retention_days * 86400, keep_settings=SETTINGS_HISTORY_KEPT
        )
        offers = await self._store.prune_offers(closed_before=now - self._chores.offer_retention_seconds)
        if events or offers:
            log.info("deleted %d old log events and %d closed offers", events, offers)
        return events, offers

    async def forget_servers_left(self, present: set[int]) -> int:
        """At start-up: erase the prompts of servers the bot was removed from while it was not running.

        `present` holds the servers of this process's shards only: a server on another process's shard
        is absent from it without having been left, so its prompts stay.
        """
        erased = 0
        shards = self._settings.shards
        for guild_id in await self._store.guilds_with_prompts():
            if guild_id not in present and shards.owns_guild(guild_id):
                erased += await self.forget_server(guild_id)
        return erased

    async def forget_server(self, guild_id: int) -> int:
        """The bot left a server: its ledger stays (ids, amounts), its prompts go."""
        erased = await self._store.erase_prompts(guild_id=guild_id)
        log.info("left server %s: erased the prompts of its %d requests", guild_id, erased)
        return erased
