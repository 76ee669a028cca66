"""auth-type digest: the Secret → htdigest file (the lines of the realm, each checked) and the profile."""
import base64
import hashlib

import pytest

from services.nginxconf.render import render
from services.syncer.model.auth_secrets import DENIED_PROFILE
from tests.support.htpasswd import digest_auth_secret

REALM = "Team Area"
DIGEST = {"auth-type": "digest", "auth-secret": "digest-auth", "auth-realm": REALM}


def ha1(user: str, password: str, realm: str = REALM) -> str:
    return hashlib.md5(f"{user}:{realm}:{password}".encode()).hexdigest()


def route_profile(model):
    name = model.routes["app.example.com"].prefix["/"].profile
    [profile] = [p for p in model.config.profiles if p.name == name]
    return profile


@pytest.mark.parametrize("secret_type", ["auth-file", "auth-map"])
def test_the_secret_becomes_an_htdigest_file_of_the_realm(cluster, secret_type):
    cluster.app(annotations={**DIGEST, "auth-secret-type": secret_type})
    cluster.add(digest_auth_secret("digest-auth", {"alice": "a", "bob": "b"}, realm=REALM, secret_type=secret_type))
    model = cluster.build()
    auth = route_profile(model).basic_auth
    assert auth.digest and auth.realm == REALM and auth.user_file.endswith(".htdigest")
    assert model.auth_files[auth.user_file].decode() == f"alice:{REALM}:{ha1('alice', 'a')}\nbob:{REALM}:{ha1('bob', 'b')}\n"
    assert cluster.rejections(model) == []
    conf = render(model.config)
    assert f'require("pyngress.digest_auth").check("{REALM}",' in conf and "auth_basic " not in conf
    assert ha1("alice", "a") not in conf  # the hashes stay in the file


def test_lines_of_other_realms_are_left_out(cluster):
    cluster.app(annotations=DIGEST)
    lines = f"alice:{REALM}:{ha1('alice', 'a')}\ncarol:Other:{ha1('carol', 'c', 'Other')}\n"
    cluster.add({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": "digest-auth", "namespace": "default"},
                 "data": {"auth": base64.b64encode(lines.encode()).decode()}})
    model = cluster.build()
    assert model.auth_files[route_profile(model).basic_auth.user_file].decode() == lines.splitlines()[0] + "\n"


@pytest.mark.parametrize("content, problem", [
    ("alice:{SHA}abc\n", "auth line 1: user 'alice' needs realm:HA1 (32 hexadecimal digits) after the user"),
    (f"alice:{REALM}:1234\n", "auth line 1: user 'alice' needs realm:HA1"),
    (f"carol:Other:{'a' * 32}\n", f"has no user of realm '{REALM}'"),
    (f":{REALM}:{'a' * 32}\n", "auth line 1: user '' may not be empty"),
])
def test_an_unusable_secret_denies_the_paths(cluster, content, problem):
    cluster.app(annotations=DIGEST)
    cluster.add({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": "digest-auth", "namespace": "default"},
                 "data": {"auth": base64.b64encode(content.encode()).decode()}})
    model = cluster.build()
    assert route_profile(model) == DENIED_PROFILE
    [rejection] = cluster.rejections(model)
    assert problem in rejection and "its paths answer 503" in rejection


def test_basic_and_digest_of_one_secret_are_two_files(cluster):
    cluster.app(annotations=DIGEST)
    cluster.app("basic", host="basic.example.com", annotations={**DIGEST, "auth-type": "basic"})
    cluster.add(digest_auth_secret("digest-auth", {"alice": "a"}, realm=REALM))
    model = cluster.build()
    assert route_profile(model).basic_auth.digest
    assert cluster.rejections(model)  # the htdigest lines are no htpasswd file: basic refuses them
