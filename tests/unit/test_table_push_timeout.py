"""A whole table's POST to nginx's configuration API may take time in proportion to its size: nginx's Lua takes
the table in entry by entry before it answers."""
import asyncio

import pytest

from services.nginxconf import tables
from services.nginxconf.config_api import HTTP_TIMEOUT_SECONDS, NginxUnavailableError
from services.nginxconf.paths import NginxPaths
from services.nginxconf.tables import post_timeout


def test_the_routes_of_100000_hosts_get_more_than_the_fixed_timeout():
    assert post_timeout(0) == HTTP_TIMEOUT_SECONDS
    # About 31 MB of routes (311 bytes a host): the first push took 13 s on a shared machine (bench/bench_scale.py),
    # past 30 s under heavier load, where a fixed 30 s failed every retry and nothing was ever served.
    assert post_timeout(31_000_000) >= 3 * 30


def test_a_push_nginx_does_not_answer_in_time_says_so(tmp_path, monkeypatch):
    """aiohttp's timeout carries no message: the syncer's log line must still say what happened."""
    paths = NginxPaths.of(tmp_path / "state", tmp_path / "run")
    paths.config_socket.parent.mkdir(parents=True)
    monkeypatch.setattr(tables, "post_timeout", lambda body_bytes: 0.3)

    async def read_and_never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 20)
        await asyncio.sleep(5)
        writer.close()

    async def never_taken() -> None:
        raise AssertionError("a push nginx did not answer is taken only once nginx holds its version")

    async def push() -> str:
        server = await asyncio.start_unix_server(read_and_never_answer, path=str(paths.config_socket))
        async with server, tables.config_api.session(paths) as session:
            with pytest.raises(NginxUnavailableError) as caught:
                await tables.TablePusher(paths)._post(session, "routes", "/configuration/routes", body=b" " * 2_000_000,
                                                      version="v1", taken=never_taken)
        return str(caught.value)

    assert asyncio.run(push()) == "pushing routes to nginx failed: no answer within 0.3 s to a body of 2.0 MB"
