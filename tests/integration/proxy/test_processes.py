"""Process-level behaviour of `pyngress proxy`: SO_REUSEPORT siblings, idle timeout, graceful stop."""
import os
import signal

from tests.integration.proxy.harness import (PASS_HOST, ProxyProcess, TlsClient, accepts, closed_by_peer, free_port,
                                             wait_for)


def test_kill_9_of_one_of_two_proxies_leaves_the_port_served(setup):
    port = free_port()
    first, second = setup.start_proxy(port), setup.start_proxy(port)
    try:
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(10)
        for _ in range(30):
            client = TlsClient(port, setup.pki.client_context(), PASS_HOST).handshake()
            assert client.read_line() == b"backend-a"
            client.close()
        second.stop()
        assert second.proc.returncode == 0  # SIGTERM: a clean stop
        assert second.status()["state"] == "stopped"
    finally:
        first.stop()
        second.stop()


def test_idle_connections_are_closed_after_the_idle_timeout(setup):
    port = free_port()
    proxy = ProxyProcess(port, setup.run_dir,
                         env={"PYNGRESS_PROXY_IDLE_TIMEOUT": "1"}).wait_serving(setup.table.publisher.seq)
    try:
        client = TlsClient(port, setup.pki.client_context(), PASS_HOST).handshake()
        assert client.read_line() == b"backend-a"
        assert closed_by_peer(client.sock, timeout=10)
        client.close()
    finally:
        proxy.stop()


def test_sigterm_lets_established_connections_finish_and_refuses_new_ones(setup):
    port = free_port()
    proxy = ProxyProcess(port, setup.run_dir,
                         env={"PYNGRESS_PROXY_DRAIN_TIMEOUT": "30"}).wait_serving(setup.table.publisher.seq)
    try:
        client = TlsClient(port, setup.pki.client_context(), PASS_HOST).handshake()
        assert client.read_line() == b"backend-a"
        proxy.proc.terminate()
        wait_for(lambda: proxy.status().get("state") == "draining", what="the proxy draining")
        assert not accepts(port)
        client.send(b"after SIGTERM\n")
        assert client.read_line() == b"after SIGTERM"
        client.close()
        assert proxy.proc.wait(10) == 0  # exits as soon as the last connection is gone
    finally:
        proxy.stop()
