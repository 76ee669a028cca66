"""ipMasq: one masquerade rule per network in nftables table inet pyngress, checked and repaired."""
from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from services.cniworker import masquerade
from proto.cni import CHECK_FAILED
from proto.cni import CniError


def masquerade_rules(pods) -> list[str]:
    listing = pods.sh("nft", "list", "chain", masquerade.FAMILY, masquerade.TABLE,
                      masquerade.chain_name(pods.name), check=False)
    return [line.strip() for line in listing.stdout.splitlines() if "masquerade" in line and "comment" in line]


def test_ip_masq_installs_one_rule_per_network_and_keeps_it(pods, restore_ip_forward):
    first_ns, second_ns = pods.netns(), pods.netns()
    first = pods.add("masq1", first_ns, ipMasq=True)
    pods.add("masq2", second_ns, ipMasq=True)
    assert masquerade_rules(pods) == [
        f'ip saddr {pods.subnet} ip daddr != {pods.subnet} ip daddr != 224.0.0.0/4 masquerade '
        f'comment "pyngress: masquerade pods of network {pods.name}"']
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text().strip() == "1"
    assert pods.call("CHECK", "masq1", first_ns, ipMasq=True, prevResult=first) == {}
    # the rule belongs to the network, not to a pod: it stays when the pods go
    pods.call("DEL", "masq1", first_ns, ipMasq=True)
    pods.call("DEL", "masq2", second_ns, ipMasq=True)
    assert len(masquerade_rules(pods)) == 1


def test_a_missing_rule_fails_check_and_update_puts_it_back(pods, restore_ip_forward):
    ns = pods.netns()
    added = pods.add("masq3", ns, ipMasq=True)
    masquerade.remove(pods.name)
    with pytest.raises(CniError) as err:
        pods.call("CHECK", "masq3", ns, ipMasq=True, prevResult=added)
    assert err.value.code == CHECK_FAILED and "masquerade rule" in err.value.msg
    pods.call("UPDATE", "masq3", ns, ipMasq=True)
    assert len(masquerade_rules(pods)) == 1
    chains = json.loads(pods.sh("nft", "-j", "list", "table", masquerade.FAMILY, masquerade.TABLE).stdout)
    hooked = [c["chain"] for c in chains["nftables"] if c.get("chain", {}).get("name") == masquerade.chain_name(pods.name)]
    assert (hooked[0]["type"], hooked[0]["hook"]) == ("nat", "postrouting")


def test_an_add_trusts_a_recent_check_and_looks_again_after_it(pods, restore_ip_forward):
    """ADD skips the `nft` listing (a process start) for RECHECK_SECONDS after this process saw the rule; a
    rule deleted behind its back is back with the first ensure() that looks."""
    subnet = ipaddress.IPv4Network(pods.subnet)
    assert masquerade.ensure(pods.name, subnet) is True
    pods.sh("nft", "delete", "chain", masquerade.FAMILY, masquerade.TABLE, masquerade.chain_name(pods.name))
    assert masquerade.ensure(pods.name, subnet, trust_seconds=masquerade.RECHECK_SECONDS) is False
    assert masquerade_rules(pods) == []
    assert masquerade.ensure(pods.name, subnet, trust_seconds=0) is True
    assert len(masquerade_rules(pods)) == 1
