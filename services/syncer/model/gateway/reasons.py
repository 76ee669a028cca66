"""The Gateway API's condition reasons that the model decides (apis/v1 *ConditionReason), as one type.

The model names the reason where it decides (RouteRejected.reason, a backendRef's, an attachment refusal's, a
listener conflict's) and status.py writes it as the condition's reason: the status never reads a reason back from a
message. The messages still say "(reason X)" for the people who read the log and the problems.
"""
from __future__ import annotations

import enum


class Reason(enum.StrEnum):
    # A listener not accepted (Accepted False)
    PORT_UNAVAILABLE = "PortUnavailable"
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
    UNSUPPORTED_VALUE = "UnsupportedValue"
    # A listener in conflict with another of its Gateway (Conflicted True, and not accepted); HostnameConflict also
    # for one whose hostname an older Gateway of another namespace has (Conflicted True, accepted, not programmed)
    HOSTNAME_CONFLICT = "HostnameConflict"
    PROTOCOL_CONFLICT = "ProtocolConflict"
    # A reference that does not resolve (a listener's or a route's ResolvedRefs False)
    INVALID_CERTIFICATE_REF = "InvalidCertificateRef"
    REF_NOT_PERMITTED = "RefNotPermitted"
    INVALID_ROUTE_KINDS = "InvalidRouteKinds"
    INVALID_KIND = "InvalidKind"
    BACKEND_NOT_FOUND = "BackendNotFound"
    # A route's parentRef not attached (Accepted False)
    NOT_ALLOWED_BY_LISTENERS = "NotAllowedByListeners"
    NO_MATCHING_LISTENER_HOSTNAME = "NoMatchingListenerHostname"
    NO_MATCHING_PARENT = "NoMatchingParent"
    # A GatewayClass or Gateway not accepted (Accepted False), or a Gateway not programmed (Programmed False)
    INVALID_PARAMETERS = "InvalidParameters"
    UNSUPPORTED_ADDRESS = "UnsupportedAddress"
    ADDRESS_NOT_USABLE = "AddressNotUsable"
    ADDRESS_NOT_ASSIGNED = "AddressNotAssigned"
    # An HTTPS listener whose client-certificate validation (spec.tls.frontend) does not resolve: Accepted False
    # NoValidCACertificate, and ResolvedRefs False with the reference's reason (client_validation.py)
    NO_VALID_CA_CERTIFICATE = "NoValidCACertificate"
    INVALID_CA_CERTIFICATE_REF = "InvalidCACertificateRef"
    INVALID_CA_CERTIFICATE_KIND = "InvalidCACertificateKind"
    # A Gateway's spec.tls.backend.clientCertificateRef that does not resolve (its ResolvedRefs False; also
    # RefNotPermitted), the Gateway still accepted (upstream_tls.py)
    INVALID_CLIENT_CERTIFICATE_REF = "InvalidClientCertificateRef"


# A listener whose references do not resolve is accepted and not programmed (the spec's split between Accepted and
# ResolvedRefs); any other reason a listener is refused for keeps it from being accepted.
UNRESOLVED_LISTENER_REFS = frozenset({Reason.INVALID_CERTIFICATE_REF, Reason.REF_NOT_PERMITTED,
                                      Reason.INVALID_ROUTE_KINDS})
# The certificate reasons: such a listener still takes routes (counted in attachedRoutes) but serves none.
UNRESOLVED_CERTIFICATE = frozenset({Reason.INVALID_CERTIFICATE_REF, Reason.REF_NOT_PERMITTED})
# Of the reasons a parentRef attached to none of a Gateway's listeners, the one the status names first: the spec's
# order.
NOT_ATTACHED_ORDER = (Reason.NOT_ALLOWED_BY_LISTENERS, Reason.NO_MATCHING_LISTENER_HOSTNAME,
                      Reason.NO_MATCHING_PARENT)
