"""Which addresses are the host's own network: the rule behind plain-http service addresses and redirects."""

from __future__ import annotations

import pytest

from bot.core.addresses import ip_of, is_internal, is_local_host


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.8.9.10", "10.0.0.1", "172.16.5.4", "192.168.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
    "224.0.0.1", "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::",
])
def test_internal_addresses(address: str) -> None:
    ip = ip_of(address)
    assert ip is not None and is_internal(ip)


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses(address: str) -> None:
    ip = ip_of(address)
    assert ip is not None and not is_internal(ip)


def test_local_host_names() -> None:
    assert all(map(is_local_host, ["localhost", "LOCALHOST.", "sim.localhost", "simulator", "[::1]", "10.1.2.3"]))
    assert not any(map(is_local_host, ["video.example", "api.example.com", "93.184.216.34", "[2606:4700::1111]"]))
    assert ip_of("video.example") is None
