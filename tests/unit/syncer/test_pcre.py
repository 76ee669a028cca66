"""Regular expressions are judged by the PCRE library nginx runs them with, with nginx's options, and a refused
one carries PCRE's own message (services/nginxconf/pcre.py, validators.pcre_regex)."""
import subprocess

import pytest

from services.nginxconf import pcre
from services.syncer.annotations.base import InvalidValue
from services.syncer.annotations.validators import pcre_regex

LUA_MODULE = "/usr/lib/nginx/modules/ngx_http_lua_module.so"


def use_regex_path(path: str) -> None:
    """As the model checks a use-regex path: rewrite.lua compiles "^" .. path with the flags "ijo"."""
    pcre_regex(path, ignore_case=True, anchored=True)


@pytest.mark.parametrize("path, says", [
    ("/[:alpha:]", '"POSIX named classes are supported only within a class" at \'[:alpha:]\''),
    ("/[[:nosuch:]]", '"unknown POSIX class name" at \'nosuch:]]\''),
    ("/a(b", '"missing )"'),
    ("/a)b", '"unmatched parentheses" at \')b\''),
    ("/(?<=a+)b", '"lookbehind assertion is not fixed length" at \')b\''),
    ("/a{2,1}", '"numbers out of order in {} quantifier" at \'}\''),
    ("/\\u0041", '"PCRE does not support \\L, \\l, \\N{name}, \\U, or \\u" at \'u0041\''),
    ("/(?a)", '"unrecognized character after (? or (?-" at \'a)\''),
    ("/\\k<x>", '"reference to non-existent subpattern" at \'>\''),
    ("/a\\", '"\\ at end of pattern"'),
])
def test_a_path_pcre_refuses_is_refused_with_pcres_message(path, says):
    with pytest.raises(InvalidValue) as refused:
        use_regex_path(path)
    assert str(refused.value) == (f"{path!r} is not a valid regular expression: PCRE (nginx's Lua, libpcre.so.3) "
                                  f"says {says}")


@pytest.mark.parametrize("path", [
    "/api(/|$)(.*)", "/[[:alpha:]]+", "/(?<=ab|c)x", "/\\x41", "/(?i)x", "/\\p{L}", "/(?<name>a)\\k<name>",
    "/a\\Nb",  # \N (not a newline) is PCRE syntax Python's re refuses
    "/a\\yb",  # an unknown escape is the letter itself for ngx.re's PCRE
    "/é+",
])
def test_a_path_pcre_compiles_is_accepted(path):
    use_regex_path(path)


def test_the_engine_that_runs_a_pattern_judges_it():
    # nginx's map regexes use PCRE2, which refuses an unknown escape ngx.re's PCRE reads as a letter.
    assert pcre.refusal("bot\\y", pcre.Engine.NGX_LUA, caseless=False) is None
    assert pcre.refusal("bot\\y", pcre.Engine.NGINX, caseless=False) == pcre.Refusal(
        "unrecognized character follows \\", 4)
    with pytest.raises(InvalidValue, match=r"PCRE \(nginx, libpcre2-8.so.0\) says \"unrecognized character"):
        pcre_regex("bot\\y", engine=pcre.Engine.NGINX)


def test_a_nul_character_is_refused_rather_than_cut_short():
    assert pcre.refusal("a\0(", pcre.Engine.NGX_LUA, caseless=True) == pcre.Refusal(
        "a NUL character cannot be part of a pattern", 1)


def test_the_offset_is_in_characters_of_the_pattern():
    assert pcre.refusal("éé(", pcre.Engine.NGINX, caseless=False).offset == 3


@pytest.mark.parametrize("binary, library", [("/usr/sbin/nginx", "libpcre2-8.so.0"), (LUA_MODULE, "libpcre.so.3")])
def test_each_engine_checks_with_the_library_nginx_loads_for_it(binary, library):
    # pcre.py's engines name these libraries: if a package update changes them, the checks must follow.
    linked = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    assert f"{library} => " in linked


def test_a_use_regex_path_pcre_refuses_rejects_only_its_ingress(cluster):
    cluster.app("good", host="good.example.com")
    cluster.ingress("bad", host="bad.example.com", paths=[("/[:alpha:]", "ImplementationSpecific", "good", 80)],
                    annotations={"use-regex": "true"})
    model = cluster.build()
    assert cluster.rejections(model) == [
        "Ingress default/bad: host bad.example.com path '/[:alpha:]': '/[:alpha:]' is not a valid regular "
        "expression: PCRE (nginx's Lua, libpcre.so.3) says \"POSIX named classes are supported only within a "
        "class\" at '[:alpha:]'"]
    assert "good.example.com" in model.routes and "bad.example.com" not in model.routes
