"""Certificates made in the test (cryptography): a CA, a server certificate for 127.0.0.1 and
client certificates, all PEM text."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from clusters.simulator.core import Simulator
from clusters.simulator.fleet import parse_fleet
from clusters.simulator.server import RunningSimulator, SimulatorHTTPServer


@dataclass(frozen=True)
class Issued:
    cert: str
    key: str


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


class CertificateAuthority:
    def __init__(self, name: str = "rlark-test-ca") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = self._build(self._name, self._key.public_key(), ca=True).public_bytes(
            serialization.Encoding.PEM).decode()

    def _build(self, subject: x509.Name, public_key: ec.EllipticCurvePublicKey, *, ca: bool,
               server: bool = False) -> x509.Certificate:
        now = dt.datetime.now(dt.UTC)
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(self._name)
                   .public_key(public_key).serial_number(x509.random_serial_number())
                   .not_valid_before(now - dt.timedelta(minutes=5))
                   .not_valid_after(now + dt.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        elif not ca:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        return builder.sign(self._key, hashes.SHA256())

    def issue(self, common_name: str, *, server: bool = False) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        cert = self._build(subject, key.public_key(), ca=False, server=server)
        return Issued(cert=cert.public_bytes(serialization.Encoding.PEM).decode(),
                      key=_key_pem(key))


@contextmanager
def mtls_simulator(authority: CertificateAuthority, fleet: dict[str, Any]) -> Iterator[str]:
    """The fleet simulator behind TLS that refuses any client without a certificate issued by
    `authority`; yields its base URL (https://127.0.0.1:PORT)."""
    server_cert = authority.issue("127.0.0.1", server=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=authority.cert)
    with tempfile.TemporaryDirectory() as scratch:
        chain = Path(scratch) / "server.pem"
        chain.write_text(server_cert.cert + server_cert.key)
        context.load_cert_chain(chain)
    server = SimulatorHTTPServer(("127.0.0.1", 0), Simulator(parse_fleet(fleet)))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    running = RunningSimulator(server, None).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        running.stop()
