"""Money is whole yen (the service's smallest unit): how an amount reads in English, for logs and commands."""

from __future__ import annotations


def format_yen(amount: int) -> str:
    """`¥1,250`; a negative amount `-¥250`."""
    return f"-¥{-amount:,}" if amount < 0 else f"¥{amount:,}"
