"""Which webhook URLs a served agent may POST push notifications to.

By default a webhook must be ``http`` or ``https`` and reach a public address: loopback,
link-local (``169.254.169.254``, the cloud metadata address, included), private
(``10/8``, ``172.16/12``, ``192.168/16``, ``fc00::/7``), shared (``100.64/10``),
multicast, unspecified and reserved addresses are refused, in IPv4 and IPv6, and also
when an IPv6 address carries an IPv4 one (``::ffff:127.0.0.1``, 6to4, Teredo, NAT64).
IPv4 spellings that resolvers accept (``2130706433``, ``0x7f.1``, ``127.1``,
``0177.0.0.1``) are read as the address they stand for; ``localhost`` names are loopback.

The URL is checked twice: as given, when a push config is set (``PushPolicy.check_url``,
no DNS), and at every delivery after resolving its host (``PushPolicy.resolve``), so a
name that resolves to an internal address is refused then. The delivery connects to the
address that was checked (``PushTarget``), never to a second resolution of the name.

``PushPolicy(allow=["127.0.0.1/32", "10.1.0.0/16"])`` lets deployments with internal
receivers in: an address inside an allowed network is accepted whatever its kind.
``PushUrlRefused.rule`` says which rule refused a URL, in words that never repeat the
URL, its host or its credentials.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

import httpx

__all__ = [
    "PUSH_SCHEMES",
    "PushPolicy",
    "PushTarget",
    "PushUrlRefused",
    "Resolver",
    "address_rule",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

PUSH_SCHEMES: Final = frozenset({"http", "https"})
"""The URL schemes a webhook may use."""

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``await resolver(host, port)``: the addresses ``host`` resolves to, as text.

Raises ``OSError`` when the name does not resolve."""

_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
_RESOLVE_TIMEOUT_SECONDS: Final = 5.0


class PushUrlRefused(ValueError):
    """A webhook URL the policy refuses; ``rule`` names why (never the URL itself)."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """The addresses the system resolver gives for ``host`` (every family)."""
    loop = asyncio.get_running_loop()
    infos = await asyncio.wait_for(
        loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), _RESOLVE_TIMEOUT_SECONDS
    )
    return [str(info[4][0]) for info in infos]


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, Teredo client, NAT64)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_rule(address: IPAddress) -> str | None:
    """Why the default policy refuses ``address`` (e.g. ``"loopback"``), or None."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return address_rule(embedded)
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address.is_unspecified:
        return "unspecified"
    if address.is_reserved:
        return "reserved"
    if address.is_private:
        return "private"
    if not address.is_global:
        return "reserved"
    return None


def _literal_address(host: str) -> IPAddress | None:
    """``host`` as an IP address, in any spelling a resolver accepts; None for a name."""
    text = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except (OSError, ValueError):
        return None


def _is_localhost_name(host: str) -> bool:
    name = host.rstrip(".").lower()
    return name == "localhost" or name.endswith(".localhost")


@dataclass(frozen=True, slots=True)
class PushTarget:
    """Where one delivery goes: the URL, and the checked address to connect to."""

    url: httpx.URL
    address: str

    def pinned_url(self) -> httpx.URL:
        """The URL with its host replaced by the checked address."""
        return self.url.copy_with(host=self.address)

    def host_header(self) -> str:
        """The ``Host`` header the receiver expects (the URL's own host and port)."""
        return self.url.netloc.decode("ascii").rsplit("@", 1)[-1]


@dataclass(frozen=True)
class PushPolicy:
    """The webhook URL policy of a served agent.

    ``allow``: networks (CIDR text such as ``"10.1.0.0/16"`` or ``"127.0.0.1/32"``) whose
    addresses are accepted even though the default rules refuse them. ``resolver``: how
    host names are resolved at delivery (the system resolver by default; tests replace it).
    A bad ``allow`` entry raises ``ValueError`` naming it.
    """

    allow: Sequence[str] = ()
    resolver: Resolver = system_resolver
    _networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        networks: list[IPNetwork] = []
        for entry in self.allow:
            try:
                networks.append(ipaddress.ip_network(str(entry).strip(), strict=False))
            except ValueError:
                raise ValueError(
                    f"push allow-list entry {entry!r} is not a network (write it as CIDR, "
                    "e.g. '10.1.0.0/16' or '127.0.0.1/32')"
                ) from None
        object.__setattr__(self, "allow", tuple(str(n) for n in networks))
        object.__setattr__(self, "_networks", tuple(networks))

    def allows(self, address: IPAddress) -> bool:
        """True when ``address`` is inside an allowed network (or carries one that is)."""
        candidates: list[IPAddress] = [address]
        if isinstance(address, ipaddress.IPv6Address):
            embedded = _embedded_ipv4(address)
            if embedded is not None:
                candidates.append(embedded)
        return any(
            candidate.version == network.version and candidate in network
            for candidate in candidates
            for network in self._networks
        )

    def check_address(self, address: IPAddress) -> None:
        """Raise ``PushUrlRefused`` unless ``address`` may receive a webhook."""
        if self.allows(address):
            return
        rule = address_rule(address)
        if rule is not None:
            raise PushUrlRefused(f"it points to a {rule} address, which webhooks may not reach")

    def check_url(self, url: str) -> httpx.URL:
        """The parsed URL, or ``PushUrlRefused``: scheme, host, and a literal address.

        No DNS: a host name is checked when a delivery resolves it (``resolve``).
        """
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError, ValueError):
            raise PushUrlRefused("it is not a valid URL") from None
        if parsed.scheme not in PUSH_SCHEMES:
            raise PushUrlRefused("its scheme must be http or https")
        host = parsed.host
        if not host:
            raise PushUrlRefused("it has no host")
        literal = _literal_address(host)
        if literal is not None:
            self.check_address(literal)
        elif _is_localhost_name(host) and not self.allows(ipaddress.IPv4Address("127.0.0.1")):
            raise PushUrlRefused("it points to a loopback address, which webhooks may not reach")
        return parsed

    async def resolve(self, url: str) -> PushTarget:
        """Check ``url``, resolve its host and check every address it resolves to.

        Returns the target to connect to (the first address); raises ``PushUrlRefused``
        when the URL or any resolved address is refused, or the name does not resolve.
        """
        parsed = self.check_url(url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        literal = _literal_address(parsed.host)
        if literal is not None:
            return PushTarget(parsed, str(literal))
        try:
            found = list(await self.resolver(parsed.host, port))
        except (OSError, TimeoutError, UnicodeError, ValueError):
            raise PushUrlRefused("its host name does not resolve") from None
        addresses = _parse_all(found)
        if not addresses:
            raise PushUrlRefused("its host name does not resolve")
        for address in addresses:
            self.check_address(address)
        return PushTarget(parsed, str(addresses[0]))


def _parse_all(found: Iterable[str]) -> list[IPAddress]:
    addresses: list[IPAddress] = []
    for text in found:
        address = _literal_address(text)
        if address is not None and address not in addresses:
            addresses.append(address)
    return addresses
