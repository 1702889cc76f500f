"""The offers: buttons that spend money, waiting for their click, each used once (recorded in the database)."""

from __future__ import annotations

from dataclasses import fields

from bot.store.jobs.base import StoreBase, _marks
from bot.store.jobs.records import _OFFER_COLUMNS, AdmissionRefused, NewOffer, Offer, OfferOutcome


class Offers(StoreBase):
    """The offers' rows."""

    async def add_offer(self, new: NewOffer, *, max_open: int | None = None) -> Offer:
        """Write the offer down. `max_open`: the offers its member may have open at once (every server and DM
        together); past it, AdmissionRefused `too_many_offers`, whose `retry_at` is when the first of them
        closes. Counted and written in one statement, so a burst of clicks cannot pass the bound together."""
        now = self._clock()
        values = {f.name: getattr(new, f.name) for f in fields(NewOffer)}
        values["created_at"] = now
        open_offers = "(SELECT COUNT(*) FROM offers WHERE user_id = ? AND used_at IS NULL AND expires_at > ?)"
        bound, bound_params = ("1 = 1", ()) if max_open is None else (
            f"{open_offers} < ?", (new.user_id, now, max_open))
        async with self._write():
            row = await self._db.fetch_one(
                f"INSERT INTO offers ({', '.join(values)}) SELECT {_marks(tuple(values))} WHERE {bound} RETURNING id",
                (*values.values(), *bound_params),
            )
            if row is None:
                held = await self._one(
                    "SELECT COUNT(*), MIN(expires_at) FROM offers WHERE user_id = ? AND used_at IS NULL "
                    "AND expires_at > ?", (new.user_id, now),
                )
                assert held is not None
                raise AdmissionRefused("too_many_offers", now if held[1] is None else float(held[1]),
                                       open=int(held[0]), limit=max_open)
        offer = await self.get_offer(int(row[0]))
        assert offer is not None
        return offer

    async def get_offer(self, offer_id: int) -> Offer | None:
        row = await self._one(f"SELECT {', '.join(_OFFER_COLUMNS)} FROM offers WHERE id = ?", (offer_id,))
        return Offer(**dict(zip(_OFFER_COLUMNS, tuple(row), strict=True))) if row else None

    async def prune_offers(self, *, closed_before: float) -> int:
        """Delete the offers used, cancelled or expired before `closed_before` (a click on one finds it unknown);
        the jobs they started keep every figure of the ledger. Returns how many went."""
        where = "(used_at IS NOT NULL AND used_at < ?) OR (used_at IS NULL AND expires_at < ?)"
        params = (closed_before, closed_before)
        if await self._one(f"SELECT 1 FROM offers WHERE {where} LIMIT 1", params) is None:
            return 0  # nothing to delete: the write lock, which /video's row waits for, is not taken
        async with self._write():
            return await self._db.execute(f"DELETE FROM offers WHERE {where}", params)

    async def use_offer(self, offer_id: int, outcome: OfferOutcome) -> bool:
        """Use an offer once: True for the one caller whose UPDATE changed the row, False for every other.

        `used` and `cancelled` need it unexpired; `expired` (its timer) needs it past its time. One
        statement decides, so a double click or two members clicking at once cannot both pass.
        """
        now = self._clock()
        expiry = "expires_at <= ?" if outcome == "expired" else "expires_at > ?"
        async with self._write():
            changed = await self._db.execute(
                f"UPDATE offers SET used_at = ?, outcome = ? WHERE id = ? AND used_at IS NULL AND {expiry}",
                (now, outcome, offer_id, now),
            )
            return changed == 1

    async def offer_shown(self, offer_id: int, message_id: int) -> None:
        """The message the offer's buttons were shown on: the one message a click on them counts from."""
        async with self._write():
            await self._db.execute("UPDATE offers SET message_id = ? WHERE id = ?", (message_id, offer_id))

    async def offer_started(self, offer_id: int, job_id: int) -> None:
        """The job the offer's use started (for the record: which click paid for which job)."""
        async with self._write():
            await self._db.execute("UPDATE offers SET job_id = ? WHERE id = ?", (job_id, offer_id))
