"""One copy of each short string the store's objects repeat.

The watcher's objects arrive decoded from msgpack, which shares the keys of their maps but makes a new string of
every value: "default", "Prefix", "TCP", "http", a Service's name (in the Service, its EndpointSlice's label and the
Ingress's backend) are each a string of 50-70 bytes, object after object. At 100,000 Ingresses with their Services
and EndpointSlices, one copy of each took the objects from 545 to 429 MiB (BENCHMARKS.md, "memory at 100,000
Ingresses"), for about 4 us an object. sys.intern's table lets go of a string once nothing else holds it.
"""
from __future__ import annotations

import sys
from typing import Any

# Longer values (certificates, snippets, annotations' JSON) are rarely repeated.
MAX_SHARED_LENGTH = 64
# Values that differ in every object: interned, they would only fill the table.
_UNIQUE_VALUES = frozenset({"uid", "resourceVersion"})


def share_strings(obj: Any) -> None:
    """Replace, in place, the short string values of a decoded object (dicts and lists of any depth) with the
    one copy of each that the process shares; equal values stay equal, so nothing reading them sees a change."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            kind = type(value)
            if kind is str:
                if len(value) <= MAX_SHARED_LENGTH and key not in _UNIQUE_VALUES:
                    obj[key] = sys.intern(value)
            elif kind is dict or kind is list:
                share_strings(value)
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            kind = type(value)
            if kind is str:
                if len(value) <= MAX_SHARED_LENGTH:
                    obj[index] = sys.intern(value)
            elif kind is dict or kind is list:
                share_strings(value)
