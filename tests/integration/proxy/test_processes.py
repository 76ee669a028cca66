"""Several `pyngress proxy` processes share the HTTPS port (SO_REUSEPORT): losing one loses nothing new."""
import os
import signal

from tests.integration.proxy.harness import PASS_HOST, TlsClient, free_port


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
