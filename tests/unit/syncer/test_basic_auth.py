"""auth-type basic: the annotations' validators, the Secret → htpasswd file, and the profile the model makes."""
import base64

import pytest

from services.nginxconf.config import BasicAuth, LocationProfile
from services.nginxconf.render import render
from services.syncer.annotations import ANNOTATIONS
from services.syncer.annotations.base import InvalidValue
from services.syncer.model.auth_secrets import DENIED_PROFILE
from services.syncer.model.htpasswd import hash_problem
from tests.support.htpasswd import basic_auth_secret, hash_password

PREFIX = "nginx.ingress.kubernetes.io"
BASIC = {"auth-type": "basic", "auth-secret": "basic-auth", "auth-realm": "Authentication Required"}


@pytest.mark.parametrize("name, value, canonical", [
    ("auth-type", "basic", "basic"),
    ("auth-type", "BASIC", "basic"),
    ("auth-secret", "basic-auth", "basic-auth"),
    ("auth-secret", "team-a/basic-auth", "team-a/basic-auth"),
    ("auth-secret", "a.b-c", "a.b-c"),
    ("auth-secret-type", "auth-file", "auth-file"),
    ("auth-secret-type", "AUTH-MAP", "auth-map"),
    ("auth-realm", "", ""),
    ("auth-realm", "Authentication Required - foo", "Authentication Required - foo"),
    ("auth-realm", "a/b:c~d_e.f", "a/b:c~d_e.f"),
])
def test_accepted_values(name, value, canonical):
    assert ANNOTATIONS[name].validate(value) == canonical


@pytest.mark.parametrize("name, value, message", [
    ("auth-type", "ntlm", "must be basic or digest"),
    ("auth-type", "basic;", "must be basic or digest"),
    ("auth-type", "", "must be basic"),
    ("auth-secret", "Basic-Auth", "must name a Secret as NAME or NAMESPACE/NAME"),
    ("auth-secret", "a/b/c", "must name a Secret"),
    ("auth-secret", "../etc/passwd", "must name a Secret"),
    ("auth-secret", "/basic-auth", "must name a Secret"),
    ("auth-secret", "x" * 254, "must name a Secret"),
    ("auth-secret-type", "htpasswd", "must be one of auth-file, auth-map"),
    ("auth-realm", 'x"; return 200; #', "must be at most 200 letters"),
    ("auth-realm", "$host", "must be at most 200 letters"),
    ("auth-realm", "a\nb", "must be at most 200 letters"),
    ("auth-realm", "x" * 201, "must be at most 200 letters"),
    # nginx reads `auth_basic off` as no authentication at all.
    ("auth-realm", "off", '"off" would turn authentication off'),
    ("auth-realm", "OFF", '"off" would turn authentication off'),
])
def test_refused_values(name, value, message):
    with pytest.raises(InvalidValue, match=message.replace("(", r"\(")):
        ANNOTATIONS[name].validate(value)


@pytest.mark.parametrize("scheme", ["apr1", "md5", "sha256", "sha512", "bcrypt", "yescrypt", "sha", "ssha"])
def test_hashes_nginx_checks_are_accepted(scheme):
    assert hash_problem(hash_password("s3cret", scheme)) is None


@pytest.mark.parametrize("password_hash, problem", [
    ("{PLAIN}s3cret", "clear text"),
    ("s3cret-in-clear", "is not one nginx can check"),
    ("$7$CU..../....abc$hash", "is not one nginx can check"),
    ("$2y$05$tooshort", "is not one nginx can check"),
    ("$apr1$salt$cut", "is not one nginx can check"),
    ("{SHA}AAAA", "is not a whole SHA-1 digest"),
    ("", "is not one nginx can check"),
])
def test_hashes_nginx_cannot_check_are_refused(password_hash, problem):
    assert problem in hash_problem(password_hash)


def secured_app(cluster, annotations=BASIC, **secret):
    cluster.app(annotations=annotations)
    if secret is not None:
        cluster.add(basic_auth_secret("basic-auth", **({"users": {"alice": "s3cret"}} | secret)))


def route_profile(model, host="app.example.com"):
    name = model.routes[host].prefix["/"].profile
    [profile] = [p for p in model.config.profiles if p.name == name]
    return profile


@pytest.mark.parametrize("secret_type", ["auth-file", "auth-map"])
def test_the_secret_becomes_the_profiles_htpasswd_file(cluster, secret_type):
    cluster.app(annotations={**BASIC, "auth-secret-type": secret_type})
    secret = cluster.add(basic_auth_secret("basic-auth", {"alice": "a", "bob": "b"}, secret_type=secret_type))
    model = cluster.build()
    auth = route_profile(model).basic_auth
    assert auth is not None and auth.realm == "Authentication Required"
    content = model.auth_files[auth.user_file].decode()
    assert [line.split(":")[0] for line in content.splitlines()] == ["alice", "bob"]
    if secret_type == "auth-file":
        assert content == base64.b64decode(secret["data"]["auth"]).decode()
    assert cluster.rejections(model) == []


def test_a_changed_secret_changes_the_file_not_the_profile(cluster):
    # The file is what nginx re-reads per request: same profile, so no reload.
    secured_app(cluster)
    before = cluster.build()
    cluster.add(basic_auth_secret("basic-auth", {"alice": "new password"}))
    after = cluster.build()
    assert route_profile(before) == route_profile(after)
    assert before.config.digest() == after.config.digest()
    [name] = after.auth_files
    assert before.auth_files[name] != after.auth_files[name]


def test_string_data_is_read_as_the_api_server_reads_it(cluster):
    cluster.app(annotations=BASIC)
    line = f"alice:{hash_password('a')}\n"
    cluster.add({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "basic-auth", "namespace": "default"},
                 "stringData": {"auth": line}})
    assert list(cluster.build().auth_files.values()) == [line.encode()]


def test_the_default_realm_is_empty_as_in_ingress_nginx(cluster):
    secured_app(cluster, annotations={"auth-type": "basic", "auth-secret": "basic-auth"})
    assert route_profile(cluster.build()).basic_auth.realm == ""


@pytest.mark.parametrize("change, problem", [
    (lambda c: None, "auth-secret default/basic-auth was not found"),
    (lambda c: c.add(basic_auth_secret("basic-auth", {"alice": "x"}) | {"data": {"users": "YQ=="}}),
     "has no key named auth"),
    (lambda c: c.add(basic_auth_secret("basic-auth", {"alice": "x"}) | {"data": {"auth": "!!"}}),
     "has a key auth whose value is not valid base64"),
    (lambda c: c.add(basic_auth_secret("basic-auth", {"alice": "x"}) | {"data": {
        "auth": base64.b64encode(f"alice:{hash_password('a')}\nmallory:{{PLAIN}}pw\n".encode()).decode()}}),
     "auth line 2: the password hash of user 'mallory' is the password in clear text"),
    (lambda c: c.add(basic_auth_secret("basic-auth", {"alice": "x"}) | {"data": {
        "auth": base64.b64encode(b"alice\n").decode()}}),
     "auth line 1 is not user:hash"),
])
def test_an_unusable_secret_denies_the_location_with_503(cluster, change, problem):
    # As ingress-nginx's denied location: `return 503`, never served without authentication.
    cluster.app(annotations=BASIC)
    cluster.app("other", host="other.example.com")
    change(cluster)
    model = cluster.build()
    assert route_profile(model) == DENIED_PROFILE
    assert model.auth_files == {}
    [rejection] = cluster.rejections(model)
    assert rejection.startswith("Ingress default/web: auth-secret default/basic-auth ")
    assert problem in rejection and rejection.endswith("its paths answer 503 until the Secret is fixed")
    assert route_profile(model, "other.example.com").name == "default"


def test_a_refusal_names_the_user_never_the_hash(cluster):
    bad = "$2y$05$" + "x" * 40
    cluster.app(annotations={**BASIC, "auth-secret-type": "auth-map"})
    cluster.add(basic_auth_secret("basic-auth", {"alice": "a"}, secret_type="auth-map")
                | {"data": {"bob": base64.b64encode(bad.encode()).decode()}})
    [rejection] = cluster.rejections(cluster.build())
    assert "key bob: the password hash of user 'bob' is not one nginx can check" in rejection
    assert bad not in rejection


def test_a_secret_in_another_namespace_needs_allow_cross_namespace_resources(cluster):
    cluster.app(annotations={**BASIC, "auth-secret": "auth/shared"})
    cluster.add(basic_auth_secret("shared", {"alice": "a"}, namespace="auth"))
    model = cluster.build()
    assert route_profile(model) == DENIED_PROFILE
    assert cluster.rejections(model) == [
        "Ingress default/web: auth-secret auth/shared is in another namespace, which the ConfigMap's "
        "allow-cross-namespace-resources does not allow; its paths answer 503 until the Secret is in the "
        "Ingress's namespace"]
    cluster.configmap({"allow-cross-namespace-resources": "true"})
    allowed = cluster.build()
    assert route_profile(allowed).basic_auth is not None and cluster.rejections(allowed) == []


def test_same_namespace_spelled_out_is_not_cross_namespace(cluster):
    secured_app(cluster, annotations={**BASIC, "auth-secret": "default/basic-auth"})
    assert route_profile(cluster.build()).basic_auth is not None


def test_auth_secret_without_auth_type_is_denied_not_served_open(cluster):
    secured_app(cluster, annotations={"auth-secret": "basic-auth"})
    assert cluster.set_aside(cluster.build(), "auth-secret", "basic-auth") == (
        "needs auth-type: \"basic\" beside it: without it ingress-nginx serves the paths without authentication; "
        "add auth-type, or remove auth-secret")


def test_auth_type_without_auth_secret_is_denied(cluster):
    cluster.app(annotations={"auth-type": "basic"})
    assert cluster.set_aside(cluster.build(), "auth-type", "basic") == (
        "needs auth-secret naming the Secret with the users and password hashes")


def test_realm_and_type_without_auth_type_are_ignored_with_a_warning(cluster):
    cluster.app(annotations={"auth-realm": "x", "auth-secret-type": "auth-map"})
    model = cluster.build()
    assert route_profile(model).name == "default"
    assert cluster.warnings(model) == [
        f"warning: Ingress default/web: annotation {PREFIX}/auth-secret-type has no effect without auth-type; "
        "ignored",
        f"warning: Ingress default/web: annotation {PREFIX}/auth-realm has no effect without auth-type; ignored"]


def test_nginx_conf_has_the_realm_and_file_path_never_the_hashes(cluster):
    secured_app(cluster)
    model = cluster.build()
    conf = render(model.config)
    [(name, content)] = model.auth_files.items()
    assert 'auth_basic "Authentication Required";' in conf
    assert f'auth_basic_user_file "{model.config.state_dir}' in conf and f'/nginx/auth/{name}";' in conf
    assert 'proxy_set_header Authorization "";' in conf
    assert content.split(b":")[1].strip().decode() not in conf
    assert content.decode() not in repr(model)


def test_ingresses_sharing_a_secret_share_one_profile_and_file(cluster):
    secured_app(cluster)
    cluster.app("second", host="second.example.com", annotations=BASIC)
    model = cluster.build()
    assert route_profile(model) == route_profile(model, "second.example.com")
    assert len(model.auth_files) == 1


def test_basic_auth_profile_name_is_stable():
    profile = LocationProfile.of(basic_auth=BasicAuth(realm="r", user_file="f.htpasswd"))
    assert profile.name == LocationProfile.of(basic_auth=BasicAuth(realm="r", user_file="f.htpasswd")).name
    assert profile.name != LocationProfile.of(basic_auth=BasicAuth(realm="s", user_file="f.htpasswd")).name
