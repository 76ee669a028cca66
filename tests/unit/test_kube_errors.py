"""What a failed Kubernetes API call says in logs and /healthz: the API's own message when it has one."""
import json

from kubernetes import client

from services.common.kube import api_error_text


def test_an_api_refusal_carries_the_servers_message():
    err = client.ApiException(status=403, reason="Forbidden")
    err.body = json.dumps({"kind": "Status", "message": 'leases.coordination.k8s.io "x" is forbidden: User "u" '
                                                       'cannot get resource "leases"'})
    assert api_error_text(err) == ('HTTP 403 Forbidden: leases.coordination.k8s.io "x" is forbidden: User "u" '
                                   'cannot get resource "leases"')


def test_without_a_status_body_the_code_and_reason_remain():
    err = client.ApiException(status=500, reason="Internal Server Error")
    err.body = "<html>oops</html>"
    assert api_error_text(err) == "HTTP 500 Internal Server Error"
    assert api_error_text(ConnectionRefusedError(111, "refused")) == "ConnectionRefusedError: [Errno 111] refused"
