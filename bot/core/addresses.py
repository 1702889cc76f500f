"""Which network addresses are the host's own (loopback, private, link-local...) rather than the internet's.

Two rules read this: a remote VIDEO_API_BASE_URL must be https (bot/config/settings.py), and a download follows a
redirect only to a public https host (bot/service/client.py), so the service's answers cannot point the bot at the
host's own network (a cloud's metadata address, an admin page on loopback).
"""

from __future__ import annotations

import ipaddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def ip_of(host: str) -> IPAddress | None:
    """`host` as an IP address if it is written as one (brackets of an IPv6 URL host allowed), else None."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def is_internal(address: IPAddress) -> bool:
    """Not an address of the public internet: loopback, private, link-local, shared (CGNAT), multicast, reserved,
    unspecified; an IPv4 address mapped into IPv6 is judged as the IPv4 one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


def is_local_host(host: str) -> bool:
    """A host name that can only mean the host's own network: an internal address, `localhost` (or a name under
    it), or a name of one label (`simulator`, a container's name in a private network)."""
    name = host.strip("[]").rstrip(".").lower()
    address = ip_of(name)
    if address is not None:
        return is_internal(address)
    return name == "localhost" or name.endswith(".localhost") or "." not in name
