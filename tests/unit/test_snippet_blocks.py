"""A snippet must stay inside the block it is written into: table of what is accepted and refused."""
import pytest

from services.nginxconf.snippet_blocks import SnippetError, check_contained


@pytest.mark.parametrize("snippet", [
    "add_header X-A b;",
    "more_set_headers 'X: y';",
    'if ($http_x = "a}") { return 418; }',
    "set $x ${host}a; return 200 '}';",
    "# a comment with } and {\nreturn 200;",
    "return 200 \"a\\\"}\";",
    "location ~ ^/x { deny all; }",
    "rewrite ^/(.*)$ /$1 break;",
    "access_by_lua 'ngx.exit(403)';",
    "if ($a) {\n  if_modified_since off;\n}\n",
    "a}b;",  # '}' inside a word is a plain character for nginx
    "",
])
def test_contained_snippets_are_accepted(snippet):
    check_contained(snippet)


@pytest.mark.parametrize("snippet, reason", [
    ("} location @profile_other { return 200;", "closes a block the snippet did not open"),
    ('return 200 "x"; }', "closes a block the snippet did not open"),
    ("\"{\" }", "closes a block the snippet did not open"),
    ("if ($a) { return 200;", "are not closed"),
    ("return 200", "does not end with ';'"),
    ("add_header X \"unterminated;", "quote is never closed"),
    ("add_header X 'a'b;", "right after a closing quote"),
    ("return 200 x\\", "does not end with ';'"),
    ("content_by_lua_block { ngx.say('}') }", "holds Lua"),
    ('"access_by_lua_block" { }', "holds Lua"),
    ("return 200;\x00", "control character"),
])
def test_snippets_that_could_reach_outside_their_block_are_refused(snippet, reason):
    with pytest.raises(SnippetError, match=reason):
        check_contained(snippet)
