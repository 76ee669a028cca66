"""Certificate authorities and client certificates for client-certificate (auth-tls-*) tests, made with the
openssl command."""
from __future__ import annotations

import subprocess
from pathlib import Path


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


class Pki:
    """Two CAs (A, and an attacker's B) and client certificates; one of A's is revoked in A's CRL."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        (directory / "index.txt").touch()
        (directory / "serial").write_text("1000\n")
        (directory / "ca.cnf").write_text(
            "[ca]\ndefault_ca = a\n[a]\ndatabase = index.txt\nnew_certs_dir = .\ncertificate = ca-a.crt\n"
            "private_key = ca-a.key\ndefault_md = sha256\ndefault_crl_days = 30\npolicy = any\nserial = serial\n"
            "[any]\ncommonName = supplied\n")
        (directory / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
        for ca in ("a", "b"):
            openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"ca-{ca}.key", "-out", f"ca-{ca}.crt",
                    "-days", "2", "-subj", f"/CN=CA {ca.upper()}", "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=keyCertSign,cRLSign", cwd=directory)
        for name, ca in (("good", "a"), ("revoked", "a"), ("intruder", "b")):
            openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                    "-subj", "/CN=client-good" if name == "intruder" else f"/CN=client-{name}", cwd=directory)
            openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"ca-{ca}.crt", "-CAkey", f"ca-{ca}.key",
                    "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", "-extfile", "client.ext", cwd=directory)
        openssl("ca", "-config", "ca.cnf", "-revoke", "revoked.crt", cwd=directory)
        openssl("ca", "-config", "ca.cnf", "-gencrl", "-out", "ca-a.crl", cwd=directory)

    def text(self, name: str) -> str:
        return (self.dir / name).read_text()
