"""The addresses an nginx.conf listens on: which are single addresses (bind-address), whose change needs a
restart rather than a reload."""
from services.nginxconf.config import NginxConfig
from services.nginxconf.listen_addresses import bound_addresses, bound_hosts, gateway_ports, listen_addresses
from services.nginxconf.render import render

EVERY_ADDRESS = """
    listen 80 default_server;
    listen [::]:80 default_server;
    listen 443 ssl http2 default_server;
    listen "unix:/run/pyngress/nginx/config.sock";
"""
BOUND = """
    listen 10.0.0.5:80 default_server;
    listen [2001:db8::5]:80 default_server;
    listen 10.0.0.5:443 ssl;
    listen [::]:443 ssl;
"""


def test_every_address_binds_no_single_one():
    assert listen_addresses(EVERY_ADDRESS) == {"0.0.0.0:80", "[::]:80", "0.0.0.0:443",
                                               "unix:/run/pyngress/nginx/config.sock"}
    assert bound_addresses(EVERY_ADDRESS) == set() and bound_hosts(EVERY_ADDRESS, 80) == ()


def test_bound_addresses_and_their_hosts_by_port():
    assert bound_addresses(BOUND) == {"10.0.0.5:80", "[2001:db8::5]:80", "10.0.0.5:443"}
    assert bound_hosts(BOUND, 80) == ("10.0.0.5", "2001:db8::5")
    assert bound_hosts(BOUND, 443) == ("10.0.0.5",)


def test_the_ports_gateway_listeners_have_to_themselves_are_read_from_the_rendered_file():
    config = NginxConfig(http_port=80, https_port=443, state_dir="/var/lib/p", run_dir="/run/p", listen_ipv6=True,
                         gateway_ports=((8080, "http"), (8443, "https")))
    text = render(config)
    assert gateway_ports(text) == (8080, 8443)
    assert {"0.0.0.0:8080", "[::]:8080", "0.0.0.0:8443", "[::]:8443"} <= listen_addresses(text)
    assert gateway_ports(render(NginxConfig(http_port=80, https_port=443, state_dir="/var/lib/p",
                                            run_dir="/run/p"))) == ()
