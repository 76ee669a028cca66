"""The `gw` fixture: a model Cluster with our GatewayClass, a Service "web" with an endpoint, and Gateway helpers."""
import base64
import functools
from typing import Any

import pytest

from services.nginxconf.prefix import make_self_signed

from services.syncer.model.types import Model
from tests.support import gateway_objects as objects
from tests.support.model_cluster import Cluster


class GatewayCluster(Cluster):
    objects = objects

    def gateway(self, *listeners: dict[str, Any], name: str = "gw", ns: str = "default") -> dict:
        return self.add(objects.gateway(name, ns=ns, listeners=listeners))

    def route(self, name: str, *, created: str | None = None, **spec: Any) -> dict:
        return self.add(objects.http_route(name, created=created or self.timestamp(), **spec))

    def app_service(self, name: str, *, ns: str = "default", address: str = "10.0.0.1") -> None:
        self.service(name, ns=ns, ports=(("http", 80),))
        self.endpoint_slice(name, ns=ns, addresses=(address,))

    def certificate(self, name: str, *, ns: str = "default", host: str = "app.example.com") -> dict:
        """A kubernetes.io/tls Secret with a real certificate for `host`."""
        cert, key = _pems(host)
        return self.tls_secret(name, ns=ns, data={"tls.crt": base64.b64encode(cert).decode(),
                                                  "tls.key": base64.b64encode(key).decode()})

    @staticmethod
    def gateway_of(model: Model, host: str) -> dict[str, Any]:
        table = model.routes[host].gateway
        assert table is not None, f"{host} has no Gateway rules"
        return table


@functools.lru_cache(maxsize=None)
def _pems(host: str) -> tuple[bytes, bytes]:
    pem = make_self_signed(f"/CN={host}", (host,))
    end = pem.index(b"-----END CERTIFICATE-----\n") + len(b"-----END CERTIFICATE-----\n")
    return pem[:end], pem[end:]


@pytest.fixture
def gw() -> GatewayCluster:
    c = GatewayCluster()
    c.add(objects.gateway_class())
    c.app_service("web")
    return c
