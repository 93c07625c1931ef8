"""A TLS-terminating gRPC proxy in front of the dev server, as a real cluster's front door
is: Debian's nginx (`.ci/run` installs it) with `grpc_pass`, a CA and X.509 v3
certificates made here, client certificates required (mTLS) or an API key checked."""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

API_KEY = "key-of-the-test-team-0123456789abcdef"


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here: a client trusting it refuses the proxy


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return path


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    *,
    usage: list[x509.ObjectIdentifier] | None = None,
) -> x509.Certificate:
    """An X.509 v3 certificate (the SDK's TLS stack refuses v1): a CA when `issuer` is None."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer[0].subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            True,
        )  # fmt: skip
        return builder.sign(key, hashes.SHA256())
    builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
    builder = builder.add_extension(x509.ExtendedKeyUsage(usage or []), False)
    if ExtendedKeyUsageOID.SERVER_AUTH in (usage or []):
        alt = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), False)
    return builder.sign(issuer[1], hashes.SHA256())


def _pem(cert: x509.Certificate, path: Path) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def make_pki(folder: Path) -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca = _certificate("durable-agents test CA", ca_key, None)
    server_key, client_key, other_key = _key(), _key(), _key()
    server = _certificate(
        "localhost", server_key, (ca, ca_key), usage=[ExtendedKeyUsageOID.SERVER_AUTH]
    )
    client = _certificate(
        "worker", client_key, (ca, ca_key), usage=[ExtendedKeyUsageOID.CLIENT_AUTH]
    )
    return Pki(
        ca=_pem(ca, folder / "ca.pem"),
        server_cert=_pem(server, folder / "server.pem"),
        server_key=_write_key(server_key, folder / "server.key"),
        client_cert=_pem(client, folder / "client.pem"),
        client_key=_write_key(client_key, folder / "client.key"),
        other_ca=_pem(_certificate("another CA", other_key, None), folder / "other-ca.pem"),
    )


def nginx_or_skip() -> str:
    """Debian's nginx: in CI it must be there (`.ci/run` installs it); elsewhere a missing
    one skips the connection tests with a clear message."""
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("nginx is missing: .ci/run installs it (apt-get install -y nginx)")
    pytest.skip("nginx is not installed (apt-get install -y nginx); CI runs these tests")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True)
class Proxy:
    address: str  # where clients connect (TLS)
    api_key_address: str  # the same, plus an API key checked (TLS, no client certificate)
    pki: Pki


@contextmanager
def tls_proxy(upstream: str, folder: Path) -> Iterator[Proxy]:
    """nginx terminating TLS in front of `upstream` (host:port, plaintext gRPC): one port
    that requires a client certificate signed by the test CA, one that requires the API
    key as a bearer token. Stopped on exit."""
    nginx = nginx_or_skip()
    pki = make_pki(folder / "pki")
    mtls, keyed = free_port(), free_port()
    user = "user root;" if os.geteuid() == 0 else ""  # workers must read the keys here
    config = folder / "nginx.conf"
    config.write_text(
        f"""
{user}
worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    grpc_read_timeout 300s;
    grpc_send_timeout 300s;
    client_max_body_size 0;
    ssl_certificate {pki.server_cert};
    ssl_certificate_key {pki.server_key};
    server {{
        listen 127.0.0.1:{mtls} ssl http2;
        ssl_client_certificate {pki.ca};
        ssl_verify_client on;
        location / {{ grpc_pass grpc://{upstream}; }}
    }}
    server {{
        listen 127.0.0.1:{keyed} ssl http2;
        location / {{
            if ($http_authorization != "Bearer {API_KEY}") {{ return 401; }}
            grpc_pass grpc://{upstream};
        }}
    }}
}}
"""
    )
    log = (folder / "nginx.out").open("wb")
    process = subprocess.Popen(
        [nginx, "-p", str(folder), "-c", str(config)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        _wait_listening(mtls, process, folder)
        _wait_listening(keyed, process, folder)
        yield Proxy(f"127.0.0.1:{mtls}", f"127.0.0.1:{keyed}", pki)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _wait_listening(port: int, process: subprocess.Popen[bytes], folder: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"nginx exited: {(folder / 'nginx.out').read_text()[-2000:]}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nginx did not listen on {port}: {(folder / 'error.log').read_text()}")
