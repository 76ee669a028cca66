"""The ADD result in each supported CNI version."""
from ipaddress import IPv4Address, IPv4Interface

import pytest

from proto.cni import INCOMPATIBLE_VERSION, CniError
from services.cniworker.results import Attachment, add_result

ATTACHMENT = Attachment(host_ifname="veth0123456789a", host_mac="aa:bb:cc:00:00:01", pod_ifname="eth0",
                        pod_mac="aa:bb:cc:00:00:02", sandbox="/var/run/netns/pod", address=IPv4Interface("10.1.2.3/24"),
                        gateway=IPv4Address("10.1.2.1"), mtu=1450)
DNS = {"nameservers": ["10.96.0.10"], "search": ["svc.cluster.local"]}


@pytest.mark.parametrize("version", ["1.0.0", "1.1.0"])
def test_1x_results_list_host_then_pod_interface_and_point_the_ip_at_the_pod(version):
    result = add_result(cni_version=version, attachment=ATTACHMENT, dns=DNS)
    assert result["cniVersion"] == version
    assert [i["name"] for i in result["interfaces"]] == ["veth0123456789a", "eth0"]
    assert "sandbox" not in result["interfaces"][0]
    assert result["interfaces"][1]["sandbox"] == "/var/run/netns/pod"
    assert result["ips"] == [{"address": "10.1.2.3/24", "gateway": "10.1.2.1", "interface": 1}]
    assert result["routes"] == [{"dst": "0.0.0.0/0", "gw": "10.1.2.1"}]
    assert result["dns"] == DNS


def test_only_1_1_0_reports_the_mtu():
    assert all(i["mtu"] == 1450 for i in add_result(cni_version="1.1.0", attachment=ATTACHMENT, dns={})["interfaces"])
    assert all("mtu" not in i for i in add_result(cni_version="1.0.0", attachment=ATTACHMENT, dns={})["interfaces"])


def test_0_4_0_ips_carry_the_ip_version():
    result = add_result(cni_version="0.4.0", attachment=ATTACHMENT, dns={})
    assert result["ips"] == [{"version": "4", "address": "10.1.2.3/24", "gateway": "10.1.2.1", "interface": 1}]
    assert result["dns"] == {}


def test_an_unsupported_version_is_refused():
    with pytest.raises(CniError) as err:
        add_result(cni_version="0.3.1", attachment=ATTACHMENT, dns={})
    assert err.value.code == INCOMPATIBLE_VERSION and "1.1.0" in err.value.details
