"""A location setting is declared once: an IngressAnnotations field declared with profile_setting() is the
LocationProfile field of the same name and type, and every way to make a profile (profile_with, profile_for,
LocationProfile.of) carries every setting without listing them."""
from __future__ import annotations

from dataclasses import fields

from services.nginxconf.config import DEFAULT_PROFILE, CorsPolicy, LocationProfile, Mirror, ModSecurity, RateLimit
from services.syncer.annotations.base import PROFILE_SETTINGS, IngressAnnotations

CORS = CorsPolicy(allow_origin="*", allow_methods="GET", allow_headers="X-A", allow_credentials=False, max_age=5)
# A value other than the default for every setting the annotations give.
SET = {"backend_scheme": "grpc", "cors": CORS, "denied": ("10.0.0.0/8",), "snippet": "return 204;",
       "server_snippet": "location /s { return 204; }", "stream_snippet": "server { listen 9999; return x; }",
       "custom_http_errors": (404,), "pass_backend_errors": True,
       "mirror": Mirror(target="http://m.internal/copy", host="m.internal"),
       "ssl_ciphers": "ECDHE-RSA-AES128-GCM-SHA256", "ssl_prefer_server_ciphers": "off",
       "modsecurity": ModSecurity(enabled=True, owasp_core_rules=True)}


def test_each_profile_setting_of_the_annotations_is_the_profile_field_of_that_name_and_type():
    profile_types = {f.name: f.type for f in fields(LocationProfile)}
    annotation_types = {f.name: f.type for f in fields(IngressAnnotations)}
    assert PROFILE_SETTINGS and set(SET) == set(PROFILE_SETTINGS)
    assert {name: annotation_types[name] for name in PROFILE_SETTINGS} == {
        name: profile_types[name] for name in PROFILE_SETTINGS}


def test_every_setting_reaches_the_profile_and_a_rate_limit_loses_none_of_them():
    annotations = IngressAnnotations(prefix="p", **SET, rate_limit=RateLimit(zone="", rps=5))
    shared = annotations.profile_with(basic_auth=None, global_auth=None)
    limited = annotations.profile_for("default_app_uid")

    assert {name: getattr(shared, name) for name in SET} == SET
    assert limited.settings() == shared.settings() | {"rate_limit": RateLimit(zone="default_app_uid", rps=5)}
    assert limited.name not in (shared.name, DEFAULT_PROFILE)


def test_a_profile_without_settings_is_the_default_and_each_setting_names_another():
    assert LocationProfile.of() == LocationProfile(DEFAULT_PROFILE)
    assert LocationProfile.of(backend_scheme="http", custom_http_errors=None, denied=()).name == DEFAULT_PROFILE
    names = {LocationProfile.of(**{name: value}).name for name, value in SET.items()}
    assert len(names) == len(SET) and DEFAULT_PROFILE not in names


def test_profile_names_stay_those_of_existing_configurations():
    # Names are in nginx.conf and in the pushed routes: a changed name reloads every nginx and moves routes.
    # These are the names the profiles had before of() was derived from the fields.
    assert LocationProfile.of((("proxy_read_timeout", "30s"),)).name == "b0c4870188ab"
    assert LocationProfile.of(backend_scheme="https", cors=CORS).name == "e46ed9ca25a0"
    assert LocationProfile.of(denied=("10.0.0.0/8",), pass_backend_errors=True).name == "8fd98ad1a9ad"
