"""Source NAT for traffic leaving a pod network (`ipMasq: true`), with nftables.

One table, `inet pyngress`, holds a postrouting nat chain per network (`masq-<network>`) with one
rule: from the subnet, to anywhere outside it (and not multicast), masquerade. The rules stay when
the last pod of a network goes: they cost nothing, another pod may come any moment, and removing
them would race with an ADD in another worker. `remove` exists for tearing a network down.

Applying a batch with `nft -f` takes ~14 ms, listing a chain 2-5 ms (a process start each), so `ensure`
lists first and writes only when the chain is missing or differs; and an ADD trusts a check this process
made in the last RECHECK_SECONDS instead of listing again (a rule deleted by hand comes back with the first
ADD after that; CHECK and UPDATE always look). Each batch is atomic (flush + add), so workers applying it
at once still leave exactly one rule.
"""
from __future__ import annotations

import json
import subprocess
import time
from ipaddress import IPv4Network

TABLE = "pyngress"
FAMILY = "inet"
_MULTICAST = IPv4Network("224.0.0.0/4")
RECHECK_SECONDS = 10.0
# (network, subnet) -> when this process last saw or wrote the rule (time.monotonic()).
_confirmed: dict[tuple[str, IPv4Network], float] = {}


class NftError(Exception):
    pass


def chain_name(network: str) -> str:
    return f"masq-{network}"


def ensure(network: str, subnet: IPv4Network, *, trust_seconds: float = 0.0) -> bool:
    """Makes the network's masquerade rule present; True if it had to be (re)written. With `trust_seconds`,
    a check or write by this process that recent is taken as still true."""
    seen = _confirmed.get((network, subnet))
    if seen is not None and time.monotonic() - seen < trust_seconds:
        return False
    if is_present(network, subnet):
        _confirmed[(network, subnet)] = time.monotonic()
        return False
    chain = {"family": FAMILY, "table": TABLE, "name": chain_name(network)}
    _run(["-f", "-"], stdin={"nftables": [
        {"add": {"table": {"family": FAMILY, "name": TABLE}}},
        {"add": {"chain": {**chain, "type": "nat", "hook": "postrouting", "prio": 100, "policy": "accept"}}},
        {"flush": {"chain": chain}},
        {"add": {"rule": {"family": FAMILY, "table": TABLE, "chain": chain_name(network),
                          "comment": f"pyngress: masquerade pods of network {network}",
                          "expr": _rule_expr(subnet)}}},
    ]})
    _confirmed[(network, subnet)] = time.monotonic()
    return True


def is_present(network: str, subnet: IPv4Network) -> bool:
    """True when the network's chain holds exactly the rule `ensure` writes for `subnet`."""
    listing = _run(["list", "chain", FAMILY, TABLE, chain_name(network)], missing_ok=True)
    if listing is None:
        return False
    rules = [item["rule"] for item in listing.get("nftables", []) if "rule" in item]
    return len(rules) == 1 and rules[0].get("expr") == _rule_expr(subnet)


def remove(network: str) -> None:
    """Deletes the network's chain; a missing chain or table is fine."""
    for key in [key for key in _confirmed if key[0] == network]:
        _confirmed.pop(key, None)
    _run(["delete", "chain", FAMILY, TABLE, chain_name(network)], missing_ok=True)


def _rule_expr(subnet: IPv4Network) -> list[dict]:
    return [_match("==", field="saddr", net=subnet), _match("!=", field="daddr", net=subnet),
            _match("!=", field="daddr", net=_MULTICAST), {"masquerade": None}]


def _match(op: str, *, field: str, net: IPv4Network) -> dict:
    return {"match": {"op": op, "left": {"payload": {"protocol": "ip", "field": field}},
                      "right": {"prefix": {"addr": str(net.network_address), "len": net.prefixlen}}}}


def _run(args: list[str], *, stdin: dict | None = None, missing_ok: bool = False) -> dict | None:
    """Runs `nft -j <args>`; returns its JSON output (None when missing_ok and the object does not exist)."""
    proc = subprocess.run(["nft", "-j", *args], input=json.dumps(stdin) if stdin is not None else None,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        if missing_ok and "No such file or directory" in proc.stderr:
            return None
        raise NftError(f"nft {' '.join(args)} failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


IP_FORWARD = "/proc/sys/net/ipv4/ip_forward"


def enable_ip_forwarding(path: str = IP_FORWARD) -> None:
    """Masqueraded traffic leaves through the host's routing, like the reference bridge plugin's
    ipMasq: turn on IPv4 forwarding (a host-wide switch) if it is off. Read first, and open for writing
    only when it is off: container runtimes mount /proc/sys read-only, usually with forwarding already on."""
    with open(path) as f:
        if f.read().strip() == "1":
            return
    with open(path, "w") as f:
        f.write("1")
