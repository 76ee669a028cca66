"""The addresses an nginx.conf listens on: which are single addresses (bind-address), whose change needs a
restart rather than a reload."""
from services.nginxconf.listen_addresses import bound_addresses, bound_hosts, listen_addresses

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
