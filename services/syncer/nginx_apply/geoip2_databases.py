"""The MaxMind databases ConfigMap use-geoip2 loads: `<edition>.mmdb` in --maxmind-mmdb-dir for each edition of
--maxmind-edition-ids, found here because the model does no I/O, and watched.

nginx reads a copy of each file, made once it ends in the MaxMind DB metadata marker (a download still being
written, or cut short, does not): a file that appears or is replaced is copied within about a second, and the copy's
new name makes a new nginx.conf, which nginx -t opens and a reload serves. A file that is not a database is
reported and the last good copy keeps serving; nginx never maps a file that someone rewrites in place. So the
module's own auto_reload (ConfigMap geoip2-autoreload-in-minutes) has nothing to do. A database that is gone is
no longer loaded (its variables are not defined, as in ingress-nginx when a file is missing).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

from services.common.settings import GeoIP2Settings
from services.nginxconf.config import NginxConfig
from services.nginxconf.variables import VARIABLE
from services.nginxconf.geoip2 import EDITION_VARIABLES, VARIABLES, defined_variables, edition_ids, loaded
from services.syncer.model.problems import Problem
from services.syncer.model.types import Model

# The spec's marker before the metadata, which sits in the file's last 128 KiB.
METADATA_MARKER = b"\xab\xcd\xefMaxMind.com"
_METADATA_MAX_BYTES = 128 * 1024
_HOW_TO_PROVIDE = "mount the file there from a volume, or run a sidecar such as geoipupdate that writes it"


def _version(path: Path) -> str | None:
    """What changes when the file is replaced or rewritten; None when there is no file."""
    try:
        stat = path.stat()  # follows symbolic links, as a ConfigMap or Secret volume's files are
    except OSError:
        return None
    return f"{stat.st_mtime_ns}-{stat.st_size}-{stat.st_ino}"


def _is_maxmind_db(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - _METADATA_MAX_BYTES))
            return METADATA_MARKER in file.read()
    except OSError:
        return False


class GeoIP2Databases:
    """The databases on disk, looked at again by poll(); with `copies` (a directory of the syncer's state), nginx
    reads copies kept there (the one in use and the one before, which a restarted nginx may still name)."""

    def __init__(self, settings: GeoIP2Settings, copies: Path | None = None) -> None:
        self.directory = Path(settings.mmdb_dir)
        self.editions = edition_ids(settings.edition_ids)
        self.copies = copies
        self._versions: tuple[str | None, ...] | None = None
        self._found: dict[str, tuple[str, str]] = {}  # edition → (the file nginx reads, its version)
        self._problems: list[str] = []
        # Files are read and copied only once a configuration has use-geoip2 on: a node may hold databases that an
        # ingress-nginx volume left for a ConfigMap that does not use them.
        self._wanted = False

    def poll(self) -> bool:
        """Look at the files again; True when one appeared, changed or went (and use-geoip2 is on)."""
        if not self._wanted:
            return False
        versions = tuple(_version(self._path(edition)) for edition in self.editions)
        if versions == self._versions:
            return False
        self._versions = versions
        found, problems = {}, []
        for edition, version in zip(self.editions, versions):
            path = self._path(edition)
            if version is None:
                names = ", ".join(f"${name}" for name, _ in EDITION_VARIABLES[edition])
                problems.append(f"{path} not found: {names or 'its variables'} are not defined until it is there; "
                                f"{_HOW_TO_PROVIDE}")
            elif not _is_maxmind_db(path):
                kept = "the last good copy keeps serving" if edition in self._found else "left out"
                problems.append(f"{path} is not a MaxMind DB file (no metadata marker: cut short, or still being "
                                f"written?); {kept} until it is one")
                if edition in self._found:
                    found[edition] = self._found[edition]
            else:
                try:
                    found[edition] = (self._copy(edition, path, version), version)
                except OSError as err:
                    problems.append(f"{path} could not be copied for nginx ({err}); it is left out")
        # Replaced whole: the sync reads them from another thread.
        self._found, self._problems = found, problems
        return True

    def complete(self, config: NginxConfig) -> tuple[NginxConfig, list[str]]:
        """`config` with the databases found (when use-geoip2 is on), and the problems to report."""
        if config.geoip2.enabled and not self._wanted:
            self._wanted = True
            self.poll()  # once, when use-geoip2 is first turned on: the files are read now, not a second later
        problems = list(self._problems) if config.geoip2.enabled else []
        found = [(edition, *self._found[edition]) for edition in self.editions if edition in self._found]
        geoip2 = replace(config.geoip2, databases=loaded(found) if config.geoip2.enabled else ())
        defined = defined_variables(geoip2)
        texts = (config.access_log.format,
                 *(value for _, value in (*config.server.add_headers, *config.server.proxy_set_headers)))
        named = {braced or plain for text in texts for braced, plain in VARIABLE.findall(text)} & VARIABLES
        empty = tuple(sorted(named - defined))
        if empty:
            why = "no database of --maxmind-edition-ids defines them" if config.geoip2.enabled \
                else 'use-geoip2 is not "true"'
            problems.append(f"log-format-upstream, add-headers or proxy-set-headers name "
                            f"{', '.join('$' + name for name in empty)}, which are empty: {why}")
        return replace(config, geoip2=replace(geoip2, empty_variables=empty)), problems

    def _path(self, edition: str) -> Path:
        return self.directory / f"{edition}.mmdb"

    def _copy(self, edition: str, path: Path, version: str) -> str:
        """The file nginx reads for `path`: a copy named by its version, the copies before the last removed."""
        if self.copies is None:
            return str(path)
        self.copies.mkdir(mode=0o700, parents=True, exist_ok=True)
        copy = self.copies / f"{edition}-{version}.mmdb"
        if not copy.exists():
            partial = copy.with_suffix(".partial")
            shutil.copyfile(path, partial)
            partial.replace(copy)
        previous = self._found.get(edition, ("", ""))[0]
        for other in self.copies.glob(f"{edition}-*.mmdb"):
            if str(other) not in (str(copy), previous):
                other.unlink(missing_ok=True)
        return str(copy)


def with_geoip2_databases(model: Model, databases: GeoIP2Databases, configmap: str | None) -> Model:
    """`model` with the GeoIP2 databases on disk, and warnings for those missing or unusable."""
    config, problems = databases.complete(model.config)
    source = f"ConfigMap {configmap}" if configmap else "use-geoip2"
    return replace(model, config=config, problems=[*model.problems, *(Problem.warning(source, p) for p in problems)])
