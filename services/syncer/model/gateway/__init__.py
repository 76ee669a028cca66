"""Gateway API on the same tables as Ingress: GatewayClass, Gateway, HTTPRoute and ReferenceGrant → route tables.

Start at build.py (`build_gateway`): the store's Gateway API objects → each host's Gateway rules (the
`gateway` field of the routes table, read by templates/lua/pyngress/gateway.lua), their backends, certificates and
problems. classes.py picks our GatewayClasses, listeners.py the Gateways' listeners we serve, httproutes.py reads
and validates an HTTPRoute, attachment.py attaches it to listeners (hostname intersection, allowedRoutes),
tables.py orders the rules by the spec's precedence, kept_routes.py keeps what a build made for the next (a changed
route costs its neighbours' work), reference_grants.py says which cross-namespace references are allowed, fields.py
validates every value that reaches nginx or Lua. docs/gateway-api.md says what is supported.
"""
from .build import GatewayModel, build_gateway, with_gateway_routes
from .kept_routes import GatewayKept
from .objects import GatewayObjects, is_gateway_input
from .route_plans import RoutePlans
from .tables import TablesKept

__all__ = ["GatewayKept", "GatewayModel", "GatewayObjects", "build_gateway", "RoutePlans", "TablesKept",
           "is_gateway_input", "with_gateway_routes"]
