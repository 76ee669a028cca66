"""What `pyngress up` hands supervisord: the repository's supervisord.conf without the programs it does not start."""
from __future__ import annotations

import re

import pytest

from services.common.settings import Settings
from services.supervisor.up import SUPERVISORD_CONF, environment, started_programs_only

ALL_ON = {"PYNGRESS_ENABLE_INGRESS": "true", "PYNGRESS_ENABLE_SSL_PASSTHROUGH": "true",
          "PYNGRESS_ENABLE_CNI": "true", "PYNGRESS_ENABLE_VALIDATING_WEBHOOK": "true"}


def sections(conf: str) -> list[str]:
    return re.findall(r"^\[([^\]]+)\]", conf, re.M)


def section_texts(conf: str) -> list[tuple[str, list[str]]]:
    """(name, its settings' lines up to the next header) of each section; comments left out, since the comment
    above a header ends the section before it."""
    headers = list(re.finditer(r"^\[([^\]]+)\]", conf, re.M))
    return [(match.group(1), [line for line in conf[match.start():following.start() if following else len(conf)]
                              .splitlines() if line and not line.startswith(";")])
            for match, following in zip(headers, [*headers[1:], None])]


def test_with_everything_on_the_configuration_is_unchanged():
    conf = SUPERVISORD_CONF.read_text()
    assert started_programs_only(conf, ALL_ON) == conf


@pytest.mark.parametrize(("off", "gone"), [
    ("PYNGRESS_ENABLE_SSL_PASSTHROUGH", {"program:proxy"}),
    ("PYNGRESS_ENABLE_CNI", {"program:cniserver", "program:cniworker"}),
    ("PYNGRESS_ENABLE_VALIDATING_WEBHOOK", {"program:webhook"}),
    ("PYNGRESS_ENABLE_INGRESS", {"program:nginx-listeners", "program:nginx", "program:watcher", "program:syncer",
                                 "program:tracer"}),
])
def test_the_programs_of_a_feature_that_is_off_are_left_out_and_nothing_else(off, gone):
    conf = SUPERVISORD_CONF.read_text()
    kept = started_programs_only(conf, {**ALL_ON, off: "false"})
    assert set(sections(kept)) == set(sections(conf)) - gone
    # Every other section stays as it was, in its order.
    assert [text for name, text in section_texts(conf) if name not in gone] == list(dict(section_texts(kept)).values())


def test_a_program_whose_variable_is_unset_or_not_false_is_kept():
    conf = "[program:a]\nautostart=%(ENV_A)s\n\n[program:b]\nautostart=%(ENV_B)s\n\n[program:c]\nautostart=true\n"
    assert sections(started_programs_only(conf, {"A": "FALSE", "B": "yes"})) == ["program:b", "program:c"]


def test_the_webhook_program_runs_only_when_an_address_is_given():
    assert environment(Settings())["PYNGRESS_ENABLE_VALIDATING_WEBHOOK"] == "false"
    on = environment(Settings.from_flags(validating_webhook=":8443"))
    assert on["PYNGRESS_ENABLE_VALIDATING_WEBHOOK"] == "true" and on["PYNGRESS_VALIDATING_WEBHOOK_PROCESSES"] == "1"
