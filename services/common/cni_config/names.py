"""The syntax of the names a CNI call carries: interface names, container IDs and network names."""
from __future__ import annotations

import re

# IFNAMSIZ is 16 bytes with the terminating NUL: an interface name holds at most 15.
IFNAMSIZ = 16
# The bytes the kernel's isspace() matches (lib/ctype.c): ASCII white space and 0xA0, the Latin-1
# no-break space. It tests the name's bytes, so a UTF-8 name with a 0xA0 byte ("à" is C3 A0) is refused.
_KERNEL_SPACE = frozenset(b"\t\n\v\f\r \xa0")

# The specification's rule for container IDs and network names; it also keeps them safe as path
# components (the IPAM store is a directory named after the network) and in nftables chain names.
_CNI_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
MAX_CONTAINER_ID = 255  # keeps a container ID usable in a file name


def is_valid_ifname(name: str) -> bool:
    """Linux's rule for interface names (net/core/dev.c, dev_valid_name) on the UTF-8 bytes the kernel
    sees: 1 to 15 bytes, not "." or "..", no '/', ':' or white space. Stricter than the kernel, it also
    refuses control characters and Unicode white space, which no tool prints legibly."""
    try:
        raw = name.encode()
    except UnicodeEncodeError:  # a lone surrogate: no byte string names it
        return False
    return (0 < len(raw) < IFNAMSIZ and name not in (".", "..")
            and not any(byte in b"/:" or byte in _KERNEL_SPACE for byte in raw)
            and not any(c < " " or c.isspace() for c in name))


def is_valid_cni_name(name: str) -> bool:
    """A container ID or network name: a letter or digit, then letters, digits, '_', '.' or '-'."""
    return bool(_CNI_NAME.fullmatch(name))
