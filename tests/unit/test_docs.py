"""docs/annotations.md is the registry's own table: it must be regenerated whenever an annotation changes; the
same for docs/configmap.md and the figures of docs/migrating.md."""
import re
from pathlib import Path

from services.syncer.annotations import ANNOTATIONS
from services.syncer.model.configmap import FIELDS, SERVER_FIELDS
from services.syncer.annotations.external_auth import GLOBAL_AUTH_KEYS
from services.tools.configmap_docs import DIFFERS, MEANING, configmap_keys, configmap_markdown
from services.syncer.model.configmap_server_keys import ANNOTATION_DEFAULTS
from services.tools.docs import annotations_markdown
from services.tools.ingress_nginx_annotations import INGRESS_NGINX_ANNOTATIONS, NOT_IMPLEMENTED
from services.tools.migrating_figures import figures_markdown, section_of

DOC = Path(__file__).resolve().parents[2] / "docs" / "annotations.md"
CONFIGMAP_DOC = Path(__file__).resolve().parents[2] / "docs" / "configmap.md"
MIGRATING_DOC = Path(__file__).resolve().parents[2] / "docs" / "migrating.md"


def test_docs_configmap_md_is_current():
    assert CONFIGMAP_DOC.read_text() == configmap_markdown(), \
        "docs/configmap.md is out of date: run `.venv/bin/pyngress docs --configmap > docs/configmap.md` and commit it"


def test_every_configmap_key_that_is_not_one_directive_says_what_it_means():
    assert set(FIELDS) | set(SERVER_FIELDS) | set(ANNOTATION_DEFAULTS) <= set(MEANING)


def test_docs_migrating_md_figures_are_current():
    assert section_of(MIGRATING_DOC.read_text()) == figures_markdown(), \
        ("the figures in docs/migrating.md are out of date: replace its figures section with the output of "
         "`.venv/bin/pyngress docs --migrating-figures`")


def test_docs_migrating_md_counts_nothing_by_hand():
    """Outside the generated section no sentence counts what pyngress takes ("95 of ingress-nginx's keys")."""
    text = MIGRATING_DOC.read_text().replace(section_of(MIGRATING_DOC.read_text()), "")
    assert re.findall(r"\b\d+ (?:of|ConfigMap|annotation|flag|key)", text) == []


def test_docs_annotations_md_is_current():
    assert DOC.read_text() == annotations_markdown(), \
        "docs/annotations.md is out of date: run `.venv/bin/pyngress docs > docs/annotations.md` and commit it"


def test_every_annotation_is_listed_once_and_none_is_both_built_and_missing():
    text = annotations_markdown()
    for name in ANNOTATIONS:
        assert text.count(f"| `{name}` |") == 1, name
    assert not set(NOT_IMPLEMENTED) & set(ANNOTATIONS)


def test_the_registry_names_only_ingress_nginx_annotations_but_the_hourly_limit_it_refuses():
    assert set(ANNOTATIONS) - INGRESS_NGINX_ANNOTATIONS == {"limit-rph"}


def test_each_difference_from_ingress_nginx_is_shown_once_beside_its_key():
    """The `differs` texts (the registry's, configmap_docs.DIFFERS) are the docs' last column, on their own row."""
    annotations, configmap = annotations_markdown(), configmap_markdown()
    differing = {name: a.differs for name, a in ANNOTATIONS.items() if a.differs}
    assert {"satisfy", "auth-keepalive", "server-snippet", "fastcgi-params-configmap", "server-alias"} <= set(differing)
    for name, text in differing.items():
        assert re.search(rf"^\| `{re.escape(name)}` \|.*\| {re.escape(text)} \|$", annotations, re.M), name
    assert set(DIFFERS) <= configmap_keys() | set(GLOBAL_AUTH_KEYS)
    assert {"bind-address", "geoip2-autoreload-in-minutes", "block-cidrs", "access-log-params"} <= set(DIFFERS)
    for key, text in DIFFERS.items():
        assert text and configmap.count(text) == list(DIFFERS.values()).count(text), key  # shared texts: a row each
        if key not in GLOBAL_AUTH_KEYS:
            assert re.search(rf"^\| `{re.escape(key)}` \|.*\| {re.escape(text)} \|$", configmap, re.M), key


def test_a_plain_directive_annotation_shows_its_default():
    assert "| `proxy-read-timeout` | Timeout between two reads from the backend. | `60s` |" in annotations_markdown()
