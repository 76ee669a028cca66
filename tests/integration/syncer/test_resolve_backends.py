"""Backend names resolved at push time, with the system's resolver (/etc/hosts)."""
import asyncio

from services.syncer.nginx_apply.external_names import resolve_backends


def test_names_that_resolve_to_the_node_itself_or_not_at_all_are_left_out_when_pushed():
    # What the model cannot see: a DNS name whose address is a loopback one (here from /etc/hosts).
    resolved, named = asyncio.run(resolve_backends({"default-ext-80": ["localhost:80"], "default-ok-80": ["10.0.0.1:80"],
                                             "default-gone-80": ["no-such-name.invalid:80"]}))
    assert resolved == {"default-ext-80": [], "default-ok-80": ["10.0.0.1:80"], "default-gone-80": []}
    assert named == {"default-ext-80", "default-gone-80"}  # pushed again each time: a name may resolve anew
