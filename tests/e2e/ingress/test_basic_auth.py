"""auth-type basic through the whole controller: manifests → watcher → syncer → real nginx → echo backend.

What a client sees: 401 with the realm without (or with wrong) credentials, 200 with them, the backend never
sees them; a changed Secret applies without a reload; a missing Secret answers 503 (ingress-nginx's denied
location); the hashes never leave the file nginx reads (not in nginx.conf, logs, /metrics, render output).
"""
import base64
import pwd
import requests
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from services.syncer.nginx_apply.worker_files import NGINX_WORKER_USER
from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.htpasswd import basic_auth_secret
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"
REALM = "Authentication Required - team a"


@pytest.fixture
def stage(reachable_controller, echo):
    controller, cluster = reachable_controller
    return Stage(controller, cluster, echo)


def secured(stage: Stage, name: str, host: str, *, secret: str = "basic-auth", **annotations: str) -> None:
    stage.cluster.apply(*stage.backend("AUTH", service=f"{name}-svc"))
    stage.cluster.apply(k8s.ingress(name, [k8s.rule(host, ("/", "Prefix", f"{name}-svc", 80))], annotations={
        f"{PREFIX}/auth-type": "basic", f"{PREFIX}/auth-secret": secret, f"{PREFIX}/auth-realm": REALM,
        **{f"{PREFIX}/{k}": v for k, v in annotations.items()}}))


def status(stage: Stage, host: str, auth: tuple[str, str] | None = None) -> int:
    return stage.controller.get("/", host, auth=auth).status_code


def test_credentials_are_asked_for_checked_and_not_passed_on(stage):
    host = "basic.example.com"
    stage.cluster.apply(basic_auth_secret("basic-auth", {"alice": "s3cret", "bob": "hunter2"}))
    secured(stage, "basic", host)
    wait_for(lambda: status(stage, host) == 401, 10, what="401 without credentials")

    anonymous = stage.controller.get("/", host)
    assert anonymous.headers["WWW-Authenticate"] == f'Basic realm="{REALM}"'
    assert status(stage, host, ("alice", "wrong")) == 401
    assert status(stage, host, ("mallory", "s3cret")) == 401
    for user, password in (("alice", "s3cret"), ("bob", "hunter2")):
        answer = stage.controller.get("/", host, auth=(user, password))
        assert answer.status_code == 200 and answer.json()["backend"] == "AUTH"
        assert "authorization" not in answer.json()["headers"]


def test_a_changed_secret_applies_without_a_reload(stage):
    host = "rotate.example.com"
    stage.cluster.apply(basic_auth_secret("rotating", {"alice": "old"}))
    secured(stage, "rotate", host, secret="rotating")
    wait_for(lambda: status(stage, host, ("alice", "old")) == 200, 10, what="old password accepted")
    reloads = stage.controller.metric("nginx_ingress_controller_success")
    conf = stage.controller.nginx_conf()

    stage.cluster.apply(basic_auth_secret("rotating", {"alice": "new"}, scheme="bcrypt"))
    wait_for(lambda: status(stage, host, ("alice", "new")) == 200, 10, what="new password accepted")
    assert status(stage, host, ("alice", "old")) == 401
    assert stage.controller.metric("nginx_ingress_controller_success") == reloads
    assert stage.controller.nginx_conf() == conf


@pytest.mark.parametrize("scheme", ["apr1", "bcrypt", "yescrypt", "sha512", "sha256", "md5", "sha", "ssha"])
def test_every_accepted_hash_is_checked_by_nginx(stage, scheme):
    host = f"{scheme}.example.com"
    stage.cluster.apply(basic_auth_secret(f"hash-{scheme}", {"alice": "s3cret"}, scheme=scheme,
                                          secret_type="auth-map"))
    secured(stage, f"hash-{scheme}", host, secret=f"hash-{scheme}", **{"auth-secret-type": "auth-map"})
    wait_for(lambda: status(stage, host, ("alice", "s3cret")) == 200, 10, what=f"{scheme} hash accepted")
    assert status(stage, host, ("alice", "s3creT")) == 401


def test_a_missing_or_unusable_secret_answers_503_until_fixed(stage):
    host = "denied.example.com"
    secured(stage, "denied", host, secret="not-yet")
    wait_for(lambda: status(stage, host) == 503, 10, what="503 without the Secret")
    assert "503 Service Temporarily Unavailable" in stage.controller.get("/", host).text
    assert status(stage, host, ("alice", "s3cret")) == 503

    unusable = basic_auth_secret("not-yet", {"alice": "s3cret"})
    unusable["data"]["auth"] = "YWxpY2U6e1BMQUlOfXMzY3JldAo="  # alice:{PLAIN}s3cret
    stage.cluster.apply(unusable)
    wait_for(lambda: "auth line 1: the password hash of user 'alice' is the password in clear text"
             in stage.controller.log_path.read_text(), 10, what="the refusal logged")
    assert status(stage, host, ("alice", "s3cret")) == 503

    stage.cluster.apply(basic_auth_secret("not-yet", {"alice": "s3cret"}))
    wait_for(lambda: status(stage, host, ("alice", "s3cret")) == 200, 10, what="served once the Secret is fixed")
    assert status(stage, host) == 401
    stage.cluster.delete(basic_auth_secret("not-yet", {}))
    wait_for(lambda: status(stage, host, ("alice", "s3cret")) == 503, 10, what="503 once the Secret is gone")


def test_the_htpasswd_file_is_readable_by_the_workers_only(stage):
    host = "perms.example.com"
    stage.cluster.apply(basic_auth_secret("perms", {"alice": "s3cret"}))
    secured(stage, "perms", host, secret="perms")
    wait_for(lambda: status(stage, host, ("alice", "s3cret")) == 200, 10, what="served")
    auth_dir = stage.controller.state_dir / "nginx" / "auth"
    files = list(auth_dir.glob("*.htpasswd"))
    assert files
    worker_gid = pwd.getpwnam(NGINX_WORKER_USER).pw_gid
    info = auth_dir.stat()
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o750, 0, worker_gid)
    for path in files:
        info = path.stat()
        assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o640, 0, worker_gid)
    # Nobody else can read it (nginx's workers can, as the 200 above shows).
    reader = subprocess.run(["setpriv", "--reuid=daemon", "--regid=daemon", "--clear-groups", "cat", str(files[0])],
                            capture_output=True)
    assert reader.returncode != 0


def test_the_hashes_stay_in_the_htpasswd_files(stage, tmp_path):
    host = "secret.example.com"
    secret = basic_auth_secret("leak-check", {"alice": "s3cret"})
    stage.cluster.apply(secret)
    secured(stage, "leak", host, secret="leak-check")
    wait_for(lambda: status(stage, host, ("alice", "s3cret")) == 200, 10, what="served")
    password_hash = base64.b64decode(secret["data"]["auth"]).decode().split(":", 1)[1].strip()
    metrics = requests.get(f"http://127.0.0.1:{stage.controller.healthz_port}/metrics", timeout=2).text
    rendered = subprocess.run([str(Path(sys.executable).parent / "pyngress"), "render",
                               f"--manifests={stage.cluster.directory}", f"--state-dir={tmp_path}",
                               f"--run-dir={tmp_path}"], capture_output=True, text=True, check=True).stdout
    assert "auth_basic_user_file" in rendered
    for text in (stage.controller.nginx_conf().decode(), stage.controller.log_path.read_text(), metrics, rendered):
        assert password_hash not in text
    assert not list(tmp_path.rglob("*.htpasswd"))  # render writes no file
