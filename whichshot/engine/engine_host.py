"""Which machine an engine runs on: this one, or the host an attached server's URL names.

What counts as this machine: every address the URL's host resolves to is a loopback address (all
of 127.0.0.0/8 and ::1: 127.0.0.2 is this machine too), the unspecified address (0.0.0.0 connects
here) or an address of one of this machine's network interfaces (its own LAN address, say). Anything
else is another host, and so is a name that does not resolve. Decided by address alone: a port
forward or SSH tunnel on a loopback port (ssh -L 8080:gpu-box:8080) makes a remote server look
local, and a container on this machine reached by its own bridge address looks remote.

Where the engine runs on another host, this machine's samplers, hardware probe, identity and the
engine's threads setting say nothing about it: those columns of its shots are not measured
(caveat engine_on_another_host).
"""

import functools
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import psutil

from whichshot.engine.process import LOOPBACK

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class EngineHost:
    """The host an engine is reached at (as the config names it) and whether it is this machine."""

    host: str
    this_machine: bool


# Every engine whichshot starts runs here and binds the loopback address.
STARTED_HERE = EngineHost(LOOPBACK, True)


def attached(build: dict[str, Any]) -> bool:
    """Whether this build is a server whichshot attaches to (and never starts)."""
    return bool(build.get("attached_url"))


def engine_host(build: dict[str, Any]) -> EngineHost:
    """Where the engine of this build runs: an attached server's URL host (build.json's
    attached_url, credentials redacted), else this machine."""
    url = build.get("attached_url")
    if not url:
        return STARTED_HERE
    host = urlsplit(url).hostname or ""
    return EngineHost(host, is_this_machine(host))


@functools.lru_cache(maxsize=64)  # asked for every shot: resolve a name once
def is_this_machine(host: str) -> bool:
    """Whether every address `host` resolves to is this machine's (see the module's words)."""
    try:
        found = socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        return False
    addresses = {_address(info[4][0]) for info in found}
    own = machine_addresses()
    return bool(addresses) and all(a.is_loopback or a.is_unspecified or a in own for a in addresses)


def machine_addresses() -> set[Address]:
    """The IP addresses of this machine's network interfaces."""
    families = (socket.AF_INET, socket.AF_INET6)
    return {
        _address(a.address) for nics in psutil.net_if_addrs().values() for a in nics if a.family in families
    }


def _address(text: str) -> Address:
    address = ipaddress.ip_address(text.split("%", 1)[0])  # fe80::1%eth0: the zone is no part of it
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address
