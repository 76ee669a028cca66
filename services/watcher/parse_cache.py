"""What each manifest file held when it was last read, kept under `<state-dir>/watcher/` so that a restarted
watcher reads again only the files that changed since: by (inode, size, mtime), as during a run.

Only files read whole and settled are kept (not one modified within the racy window, nor one that failed
to parse). A cache that cannot be read is ignored with a warning: every file is then read again. Its
objects are checked again as a manifest's would be (the file may have been damaged or edited by hand).
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

import msgpack

from services.common.files import atomic_write
from services.common.logs import kv
from services.watcher.manifest_objects import Problem, objects_of
from services.watcher.manifest_parser import Document

log = logging.getLogger(__name__)

CACHE_FILE = "parsed.msgpack"
_VERSION = 1

Signature = tuple[int, int, int]


@dataclass(frozen=True, kw_only=True)
class ParsedFile:
    signature: Signature
    digest: bytes
    objects: list[dict[str, Any]]
    problems: list[Problem]


def load_parse_cache(path: Path) -> dict[str, ParsedFile]:
    try:
        saved = msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, msgpack.UnpackException) as err:
        log.warning("cannot read the saved parse cache; reading every manifest again", extra=kv(path=path, error=err))
        return {}
    try:
        if saved["version"] != _VERSION:
            return {}
        return {name: _parsed(entry, str(path)) for name, entry in saved["files"].items()}
    except (KeyError, TypeError, ValueError) as err:
        log.warning("the saved parse cache is damaged; reading every manifest again", extra=kv(path=path, error=err))
        return {}


def save_parse_cache(path: Path, files: Mapping[str, ParsedFile]) -> None:
    entries = {name: {"signature": list(f.signature), "digest": f.digest, "objects": f.objects,
                      "problems": [asdict(p) for p in f.problems]} for name, f in files.items()}
    atomic_write(path, msgpack.packb({"version": _VERSION, "files": entries}, use_bin_type=True), mode=0o600)


def _parsed(entry: dict[str, Any], where: str) -> ParsedFile:
    inode, size, mtime = entry["signature"]
    objects, rejected = objects_of(Document(index=0, line=0, data={"kind": "List", "items": entry["objects"]}), where)
    if rejected:
        raise ValueError(f"{len(rejected)} saved objects are not valid objects")
    return ParsedFile(signature=(int(inode), int(size), int(mtime)), digest=bytes(entry["digest"]), objects=objects,
                      problems=[Problem(**problem) for problem in entry["problems"]])
