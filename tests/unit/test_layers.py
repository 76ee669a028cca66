"""The import direction between packages, read from the source (ast):

- a process package (one per supervised program) imports no other process package;
- `proto/` and the libraries under services/ (every package that is not a process or tools) import no
  process package and no tools;
- only services/tools (commands such as `pyngress render`) and services/cli.py may import several processes;
- the syncer's model (services/syncer/model/, and annotations/ that it parses with) does no I/O: see
  MODEL_PACKAGES below for what that means here;
- a private name (one leading underscore) is imported only from a module of the same package (directory),
  and read as `module._name` only there too: another package uses what a module makes public.
"""
import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVICES = REPO / "services"
PROCESSES = {"watcher", "syncer", "nginx", "proxy", "cniserver", "cniworker", "cni_plugin", "crashmon", "supervisor",
             "tracer"}
TOOLS = {"tools"}


def _package_of(module: str) -> str | None:
    """"services.syncer.model" → "syncer"; "proto.codec" → "proto"; other modules → None."""
    parts = module.split(".")
    if parts[0] == "proto":
        return "proto"
    if parts[0] == "services" and len(parts) > 1:
        return parts[1]
    return None


def _module_of(path: Path) -> str:
    module = ".".join(path.relative_to(REPO).with_suffix("").parts)
    return module.removesuffix(".__init__")


def _import_froms(path: Path) -> list[tuple[str, list[str], str | None]]:
    """Each import of `path` as (module, names taken from it, the name it binds to a module of the repository):
    `import a.b as c` gives ("a.b", [], "c"); `from a import b`, b a module, gives ("a.b", [], "b")."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, [], alias.asname) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{module}" if module else base
            where = REPO / module.replace(".", "/")
            names = []
            for alias in node.names:
                if (where / f"{alias.name}.py").exists() or (where / alias.name / "__init__.py").exists():
                    found.append((f"{module}.{alias.name}", [], alias.asname or alias.name))
                else:
                    names.append(alias.name)
            if names:
                found.append((module, names, None))
    return found


def _imports(path: Path) -> set[str]:
    return {module for module, _, _ in _import_froms(path)}


def _sources() -> list[Path]:
    return sorted([*SERVICES.rglob("*.py"), *(REPO / "proto").rglob("*.py")])


def _violations(path: Path) -> list[str]:
    own = _package_of(".".join(path.relative_to(REPO).with_suffix("").parts))
    if own in TOOLS or own is None or own == "cli":
        return []
    bad = []
    for module in _imports(path):
        target = _package_of(module)
        if target is None or target == own or target == "cli":
            continue
        if own in PROCESSES and target in PROCESSES:
            bad.append(f"process {own} imports process {target} ({module})")
        elif own not in PROCESSES and (target in PROCESSES or target in TOOLS):
            bad.append(f"library {own} imports {'process' if target in PROCESSES else 'tools'} {target} ({module})")
    return bad


def test_every_process_package_is_known():
    packages = {p.name for p in SERVICES.iterdir() if (p / "__init__.py").exists()}
    assert PROCESSES <= packages | {"supervisor"}


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_imports_follow_the_layers(path):
    assert _violations(path) == []


def test_the_check_catches_a_process_importing_another(tmp_path):
    assert _package_of("services.syncer.model") == "syncer" and _package_of("proto.codec") == "proto"
    fake = SERVICES / "syncer" / "_layers_probe.py"
    fake.write_text("from services.watcher.manifests import ManifestsSource\nfrom . import model\n")
    try:
        assert _violations(fake) == ["process syncer imports process watcher (services.watcher.manifests)"]
    finally:
        fake.unlink()


# The model: store objects in, Model out. Its modules (and the annotations they parse with) do no I/O: they
# import none of IO_MODULES (network, processes, threads, the Kubernetes API, logging, temporary files), call
# none of WRITES (files written, processes started or signalled, output printed), import nothing of the
# syncer but themselves, and of the libraries only PURE_LIBRARIES, which pass the same check.
MODEL_PACKAGES = ("services.syncer.model", "services.syncer.annotations")
IO_MODULES = {"aiohttp", "asyncio", "concurrent", "fcntl", "grp", "http", "kubernetes", "logging", "mmap",
              "multiprocessing", "pwd", "requests", "select", "selectors", "shutil", "signal", "socket", "sqlite3",
              "subprocess", "tempfile", "threading", "urllib", "zmq"}
# What an I/O module also offers that is a computation: IP addresses between text and bytes.
PURE_NAMES = {"socket": {"AF_INET", "AF_INET6", "inet_aton", "inet_ntop", "inet_pton"}}
WRITES = {"open", "print", "input",  # builtins
          "os.write", "os.open", "os.remove", "os.unlink", "os.rename", "os.replace", "os.mkdir", "os.makedirs",
          "os.rmdir", "os.chmod", "os.chown", "os.link", "os.symlink", "os.truncate", "os.memfd_create",
          "os.system", "os.popen", "os.kill", "os.fork", "os.execv", "os.execvp",
          ".write_text", ".write_bytes", ".mkdir", ".unlink", ".rmdir", ".rename", ".touch", ".chmod",
          ".symlink_to"}  # pathlib.Path's writes, on any object
# The one door to OpenSSL (its docstring says why): PEM through memfd and `openssl dhparam`'s stdin.
ALLOWED_IO = {"services.syncer.model.openssl": {"subprocess", "os.write", "os.memfd_create"}}
PURE_LIBRARIES = {"services.common.changed_keys", "services.common.gc_pause", "services.common.settings",
                  "services.nginxconf.config", "services.nginxconf.geoip2", "services.nginxconf.pcre",
                  "services.nginxconf.render", "services.nginxconf.request_metrics", "services.nginxconf.snippet_blocks",
                  "services.nginxconf.table_schema", "services.nginxconf.tracing", "services.nginxconf.modsecurity",
                  "services.nginxconf.modsecurity_rules", "services.nginxconf.variables"}


def _calls(tree: ast.AST) -> set[str]:
    """Calls as WRITES spells them: "open", "os.write", ".write_text"."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            function = node.func
            if isinstance(function, ast.Name):
                found.add(function.id)
            elif isinstance(function, ast.Attribute):
                found.add(f".{function.attr}")
                if isinstance(function.value, ast.Name):
                    found.add(f"{function.value.id}.{function.attr}")
    return found


def _io_violations(path: Path) -> list[str]:
    """What makes a module of the model, or a library it imports, do I/O."""
    own = _module_of(path)
    allowed = ALLOWED_IO.get(own, set())
    tree = ast.parse(path.read_text(), str(path))
    used = {f"{node.value.id}.{node.attr}" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)}
    bad = []
    for module, names, _ in _import_froms(path):
        top = module.split(".")[0]
        if top in IO_MODULES and top not in allowed:
            pure = PURE_NAMES.get(top, set())
            taken = set(names) if names else {name.split(".", 1)[1] for name in used if name.startswith(f"{top}.")}
            if not taken or taken - pure:
                bad.append(f"{own} does I/O: imports {module} ({', '.join(sorted(taken - pure)) or 'whole'})")
        if own.startswith(MODEL_PACKAGES) and top in ("services", "proto"):
            if module.startswith("services.syncer"):
                if not (module.startswith(MODEL_PACKAGES) or module == "services.syncer.annotations"
                        or own.startswith("services.syncer.model") and module == "services.syncer.model"):
                    bad.append(f"{own} imports {module}: the model imports nothing of the syncer but itself "
                               "and annotations")
            elif module not in PURE_LIBRARIES:
                bad.append(f"{own} imports {module}, not one of the PURE_LIBRARIES")
    for call in sorted(_calls(tree) & WRITES - allowed):
        bad.append(f"{own} does I/O: calls {call}")
    return bad


def _model_sources() -> list[Path]:
    model = sorted(p for package in MODEL_PACKAGES for p in (REPO / package.replace(".", "/")).rglob("*.py"))
    return model + [REPO / f"{library.replace('.', '/')}.py" for library in sorted(PURE_LIBRARIES)]


@pytest.mark.parametrize("path", _model_sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_the_model_does_no_io(path):
    assert _io_violations(path) == []


def _private_violations(path: Path) -> list[str]:
    """Private names (and private modules) taken from a module of another package."""
    own_package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    bad = []
    module_aliases = {}  # local name → a module of another package, whose private names are read as name._x
    for module, names, bound in _import_froms(path):
        if module.split(".")[0] not in ("services", "proto"):
            continue
        package_of_target = module if (REPO / module.replace(".", "/")).is_dir() else module.rpartition(".")[0]
        if package_of_target == own_package:
            continue
        private = [name for name in (*module.split("."), *names) if name.startswith("_") and not name.startswith("__")]
        if private:
            bad.append(f"{_module_of(path)} takes private {', '.join(private)} from {module}")
        if bound:
            module_aliases[bound] = module
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in module_aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            bad.append(f"{_module_of(path)} reads private {module_aliases[node.value.id]}.{node.attr}")
    return bad


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_private_names_stay_in_their_package(path):
    assert _private_violations(path) == []


def test_the_check_catches_io_in_the_model():
    fake = SERVICES / "syncer" / "model" / "_layers_probe.py"
    fake.write_text("import socket\nimport asyncio\nfrom pathlib import Path\n"
                    "from services.syncer.nginx_apply.applier import NginxApplier\n"
                    "from services.common.kube import read_json\nfrom ..annotations import parse_annotations\n"
                    "from .types import Model\n"
                    "name = socket.gethostname()\naddress = socket.inet_aton('127.1')\n"
                    "Path('x').write_text('')\nopen('y', 'w')\n")
    try:
        assert _io_violations(fake) == [
            "services.syncer.model._layers_probe does I/O: imports socket (gethostname)",  # inet_aton is pure
            "services.syncer.model._layers_probe does I/O: imports asyncio (whole)",
            "services.syncer.model._layers_probe imports services.syncer.nginx_apply.applier: the model imports "
            "nothing of the syncer but itself and annotations",
            "services.syncer.model._layers_probe imports services.common.kube, not one of the PURE_LIBRARIES",
            "services.syncer.model._layers_probe does I/O: calls .write_text",
            "services.syncer.model._layers_probe does I/O: calls open",
        ]
    finally:
        fake.unlink()


def test_the_check_catches_a_private_name_taken_from_another_package():
    fake = SERVICES / "syncer" / "observability" / "_layers_probe.py"
    fake.write_text("from services.syncer.model.backends import _is_port\nfrom ..model import tls\n"
                    "from . import exposition\ntls._private(exposition._own_package_is_fine)\n")
    try:
        assert _private_violations(fake) == [
            "services.syncer.observability._layers_probe takes private _is_port from services.syncer.model.backends",
            "services.syncer.observability._layers_probe reads private services.syncer.model.tls._private",
        ]
    finally:
        fake.unlink()
