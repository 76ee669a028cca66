"""Thousands of TLS certificates in seconds, for the scale bench: one CA, one EC P-256 leaf key shared by every
certificate (what costs is the key, not the signature), a certificate per host naming it.

With the `cryptography` library this takes about 0.3 ms a certificate. The venv may lack it while the system's
`python3` has it: then this file runs there as a script. Without either, the openssl command makes each one
(about 15 ms apiece, two at a time).

    python3 bench/scale_certificates.py OUT_JSON < hosts   # {"key": PEM, "ca": PEM, "certs": {host: PEM}}
"""
from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DAYS = 30


def _has_cryptography(python: str) -> bool:
    return subprocess.run([python, "-c", "import cryptography.x509"], capture_output=True).returncode == 0


def make(hosts: list[str]) -> dict:
    """{"key": the leaf key (PEM), "ca": the CA certificate (PEM), "certs": {host: its certificate (PEM)}}."""
    try:
        return _with_cryptography(hosts)
    except ImportError:
        pass
    python = shutil.which("python3")
    if python and _has_cryptography(python):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            subprocess.run([python, __file__, out.name], input="\n".join(hosts), text=True, check=True)
            return json.loads(Path(out.name).read_text())
    return _with_openssl(hosts)


def _with_cryptography(hosts: list[str]) -> dict:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "scale bench CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=DAYS))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(ca_key, hashes.SHA256()))
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    certs = {}
    for serial, host in enumerate(hosts, start=2):
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])).issuer_name(ca_name)
                .public_key(leaf_key.public_key()).serial_number(serial).not_valid_before(now)
                .not_valid_after(now + datetime.timedelta(days=DAYS))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        certs[host] = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()).decode()
    return {"key": key_pem, "ca": ca.public_bytes(serialization.Encoding.PEM).decode(), "certs": certs}


def _with_openssl(hosts: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)

        def openssl(*args: str) -> None:
            subprocess.run(["openssl", *args], cwd=work, check=True, capture_output=True)
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
                "-out", "ca.crt", "-subj", "/CN=scale bench CA", "-days", str(DAYS))
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "leaf.key")

        def one(host: str) -> tuple[str, str]:
            openssl("req", "-new", "-x509", "-key", "leaf.key", "-CA", "ca.crt", "-CAkey", "ca.key", "-subj",
                    f"/CN={host}", "-addext", f"subjectAltName=DNS:{host}", "-days", str(DAYS), "-out", f"{host}.crt")
            return host, (work / f"{host}.crt").read_text()
        with ThreadPoolExecutor(2) as pool:
            certs = dict(pool.map(one, hosts))
        return {"key": (work / "leaf.key").read_text(), "ca": (work / "ca.crt").read_text(), "certs": certs}


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(_with_cryptography(sys.stdin.read().split())))
