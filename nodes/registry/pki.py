"""A small, real PKI for the ANS baseline: a run CA, a registry certificate, signatures.

Everything is derived from a seed so that a simulated run is reproducible byte for byte:
Ed25519 keys come from ``sha256(seed, name)`` and Ed25519 signatures are deterministic
(RFC 8032), so certificates and signed responses have the same bytes every run. The
certificates are ordinary X.509 v3 (``cryptography``), readable by OpenSSL; the live
engine also uses them for TLS 1.3.

Validity is checked against *simulated* time: node time ``now`` (seconds) is mapped onto
the calendar from :data:`EPOCH`, never the wall clock.
"""

from __future__ import annotations

import base64
import copyreg
import datetime as dt
import hashlib
import json
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)  # node time 0 on the certificates' calendar
VALIDITY = dt.timedelta(days=3650)


class TrustError(ValueError):
    """A signature, certificate or chain did not verify."""


def _key(seed: int, name: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(f"{seed}/{name}".encode()).digest())


def _key_from_raw(raw: bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(raw)


def _reduce_key(key: Ed25519PrivateKey) -> tuple:
    return _key_from_raw, (key.private_bytes(serialization.Encoding.Raw,
                                             serialization.PrivateFormat.Raw,
                                             serialization.NoEncryption()),)


def _cert_from_der(der: bytes) -> x509.Certificate:
    return x509.load_der_x509_certificate(der)


def _reduce_cert(cert: x509.Certificate) -> tuple:
    return _cert_from_der, (cert.public_bytes(serialization.Encoding.DER),)


def _public_from_raw(raw: bytes) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(raw)


def _reduce_public(key: Ed25519PublicKey) -> tuple:
    return _public_from_raw, (key.public_bytes(serialization.Encoding.Raw,
                                               serialization.PublicFormat.Raw),)


# The Ray and Mininet engines pickle a run's nodes into other processes; the keys and
# certificates of ``cryptography`` (Rust objects) do not pickle by themselves, so they go
# as their DER/raw bytes (the same key and certificate come out).
_SAMPLE = _key(0, "pickle")
copyreg.pickle(type(_SAMPLE), _reduce_key)
copyreg.pickle(type(_SAMPLE.public_key()), _reduce_public)


def _serial(seed: int, name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"serial/{seed}/{name}".encode()).digest()[:15], "big")


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ToolDNS testbed"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


@dataclass(frozen=True)
class Identity:
    """A key with its certificate (PEM) and issuer."""

    key: Ed25519PrivateKey
    cert: x509.Certificate

    @property
    def cert_pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())

    def sign(self, data: bytes) -> str:
        return base64.b64encode(self.key.sign(data)).decode()


def make_ca(seed: int, name: str = "ToolDNS testbed run CA") -> Identity:
    key = _key(seed, "ca")
    subject = _name(name)
    cert = (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(_serial(seed, "ca"))
            .not_valid_before(EPOCH - dt.timedelta(days=1))
            .not_valid_after(EPOCH + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                         False), critical=True)
            .sign(key, None))
    return Identity(key, cert)


def issue(ca: Identity, seed: int, host: str, addresses: tuple[str, ...] = ()) -> Identity:
    """A server certificate for ``host`` (and IP addresses) signed by ``ca``."""
    import ipaddress

    key = _key(seed, f"leaf/{host}")
    san: list[x509.GeneralName] = [x509.DNSName(host)]
    san += [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
    cert = (x509.CertificateBuilder()
            .subject_name(_name(host)).issuer_name(ca.cert.subject)
            .public_key(key.public_key())
            .serial_number(_serial(seed, host))
            .not_valid_before(EPOCH - dt.timedelta(days=1))
            .not_valid_after(EPOCH + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(san), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca.key, None))
    return Identity(key, cert)


def canonical(obj: object) -> bytes:
    """The bytes a signature covers: compact JSON with sorted keys."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def verify_chain(cert_pem: str, ca: x509.Certificate, now: float) -> x509.Certificate:
    """Check that ``cert_pem`` was issued and signed by ``ca`` and is valid at ``now``."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
    except ValueError as exc:
        raise TrustError(f"unreadable certificate: {exc}") from None
    if cert.issuer != ca.subject:
        raise TrustError("certificate not issued by the trusted CA")
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as exc:
        raise TrustError(f"certificate signature does not verify: {exc}") from None
    when = EPOCH + dt.timedelta(seconds=now)
    if not cert.not_valid_before_utc <= when <= cert.not_valid_after_utc:
        raise TrustError("certificate not valid at this time")
    return cert


def verify_signature(cert: x509.Certificate, data: bytes, signature_b64: str) -> None:
    key = cert.public_key()
    if not isinstance(key, Ed25519PublicKey):
        raise TrustError("unexpected key type")
    try:
        key.verify(base64.b64decode(signature_b64, validate=True), data)
    except (InvalidSignature, ValueError) as exc:
        raise TrustError("signature does not verify") from exc


def serial_hex(cert: x509.Certificate) -> str:
    return f"{cert.serial_number:x}"


copyreg.pickle(type(make_ca(0, "pickle").cert), _reduce_cert)  # see _SAMPLE above
