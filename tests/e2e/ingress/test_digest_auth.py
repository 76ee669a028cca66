"""auth-type digest through the whole controller, with real digest clients (requests' HTTPDigestAuth and curl
--digest): the challenge, the right and wrong passwords, a replayed Authorization header, a nonce from before
a reload, and a changed Secret applied without a reload."""
from __future__ import annotations

import concurrent.futures
import hashlib
import subprocess

import pytest
import requests
from requests.auth import HTTPDigestAuth

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.htpasswd import digest_auth_secret
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"
REALM = "Team Area"


@pytest.fixture
def stage(reachable_controller, echo):
    controller, cluster = reachable_controller
    return Stage(controller, cluster, echo)


def secured(stage: Stage, name: str, host: str, secret: str) -> None:
    stage.cluster.apply(*stage.backend("DIGEST", service=f"{name}-svc"))
    stage.cluster.apply(k8s.ingress(name, [k8s.rule(host, ("/", "Prefix", f"{name}-svc", 80))], annotations={
        f"{PREFIX}/auth-type": "digest", f"{PREFIX}/auth-secret": secret, f"{PREFIX}/auth-realm": REALM}))


def url(stage: Stage, path: str = "/") -> str:
    return f"http://127.0.0.1:{stage.controller.http_port}{path}"


def get(stage: Stage, host: str, path: str = "/", **kwargs) -> requests.Response:
    return requests.get(url(stage, path), headers={"Host": host, **kwargs.pop("headers", {})}, timeout=5, **kwargs)


def answer_for(challenge: dict[str, str], user: str, password: str, uri: str, nc: str = "00000001") -> str:
    """An Authorization header computed as a client does (RFC 7616, MD5, qop=auth)."""
    ha1 = hashlib.md5(f"{user}:{REALM}:{password}".encode()).hexdigest()
    ha2 = hashlib.md5(f"GET:{uri}".encode()).hexdigest()
    response = hashlib.md5(f"{ha1}:{challenge['nonce']}:{nc}:abcdef:auth:{ha2}".encode()).hexdigest()
    return (f'Digest username="{user}", realm="{REALM}", nonce="{challenge["nonce"]}", uri="{uri}", qop=auth, '
            f'nc={nc}, cnonce="abcdef", response="{response}", algorithm=MD5')


def challenge_of(answer: requests.Response) -> dict[str, str]:
    header = answer.headers["WWW-Authenticate"]
    assert header.startswith("Digest "), header
    return {key: value.strip('"') for key, value in (part.split("=", 1) for part in header[7:].split(", "))}


def test_digest_challenge_clients_replay_and_reload(stage):
    host = "digest.example.com"
    stage.cluster.apply(digest_auth_secret("digest-auth", {"alice": "s3cret"}, realm=REALM))
    secured(stage, "digest", host, "digest-auth")
    wait_for(lambda: get(stage, host).status_code == 401, 15, what="401 without credentials")

    anonymous = get(stage, host)
    challenge = challenge_of(anonymous)
    assert (challenge["realm"], challenge["qop"], challenge["algorithm"]) == (REALM, "auth", "MD5")
    assert "stale" not in challenge

    with requests.Session() as session:
        session.headers["Host"] = host
        session.auth = HTTPDigestAuth("alice", "s3cret")
        first, second = session.get(url(stage, "/a?x=1"), timeout=5), session.get(url(stage, "/b"), timeout=5)
        for answer in (first, second):
            assert answer.status_code == 200 and answer.json()["backend"] == "DIGEST"
            assert "authorization" not in answer.json()["headers"]
    assert get(stage, host, auth=HTTPDigestAuth("alice", "wrong")).status_code == 401
    assert get(stage, host, auth=HTTPDigestAuth("mallory", "s3cret")).status_code == 401
    curl = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--digest", "-u", "alice:s3cret",
                           "-H", f"Host: {host}", url(stage, "/curl")], capture_output=True, text=True, timeout=30)
    assert curl.stdout == "200"

    # One Authorization header is accepted once: a replay gets a new challenge.
    header = answer_for(challenge_of(get(stage, host, "/r")), "alice", "s3cret", "/r")
    assert get(stage, host, "/r", headers={"Authorization": header}).status_code == 200
    assert get(stage, host, "/r", headers={"Authorization": header}).status_code == 401
    # The same header sent by many clients at once, across the workers: accepted exactly once.
    header = answer_for(challenge_of(get(stage, host, "/c")), "alice", "s3cret", "/c")
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(lambda _: get(stage, host, "/c", headers={"Authorization": header}).status_code,
                              range(24)))
    assert sorted(codes) == [200] + [401] * 23
    # An answer for another URI than the one requested is refused.
    header = answer_for(challenge_of(get(stage, host, "/r")), "alice", "s3cret", "/other")
    assert get(stage, host, "/r", headers={"Authorization": header}).status_code == 401

    # A nonce signed before a reload: the right password gets stale=true (clients retry without asking).
    old_nonce = challenge_of(get(stage, host, "/s"))
    reloads = stage.controller.metric("nginx_ingress_controller_success")
    stage.cluster.apply(*stage.backend("DIGEST", service="reload-svc"),
                        k8s.ingress("reload", [k8s.rule("reload.example.com", ("/", "Prefix", "reload-svc", 80))],
                                    annotations={f"{PREFIX}/proxy-read-timeout": "17"}))
    wait_for(lambda: stage.controller.metric("nginx_ingress_controller_success") > reloads, 15, what="a reload")
    wait_for(lambda: get(stage, "reload.example.com").status_code == 200, 15, what="the reloaded nginx serving")
    stale = get(stage, host, "/s", headers={"Authorization": answer_for(old_nonce, "alice", "s3cret", "/s")})
    assert stale.status_code == 401 and challenge_of(stale).get("stale") == "true"
    assert get(stage, host, "/s", auth=HTTPDigestAuth("alice", "s3cret")).status_code == 200

    # A new password applies without a reload (the file is re-read).
    reloads = stage.controller.metric("nginx_ingress_controller_success")
    stage.cluster.apply(digest_auth_secret("digest-auth", {"alice": "n3w"}, realm=REALM))
    wait_for(lambda: get(stage, host, auth=HTTPDigestAuth("alice", "n3w")).status_code == 200, 15,
             what="the new password")
    assert get(stage, host, auth=HTTPDigestAuth("alice", "s3cret")).status_code == 401
    assert stage.controller.metric("nginx_ingress_controller_success") == reloads
    assert "s3cret" not in stage.controller.nginx_conf().decode()
