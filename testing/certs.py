"""Certificates for TLS tests, made on the spot with ``cryptography``.

    certs = make_certs(tmp_dir)
    certs.ca                 # PEM file of the CA that signs the broker and "alice"
    certs.server             # PEM file: the broker's private key + certificate chain
    certs.client_cert, certs.client_key     # alice's certificate and key (separate files)
    certs.client_keystore    # alice's key + certificate in one PEM (Java's ssl.keystore.location)
    certs.rogue_cert, certs.rogue_key       # a client signed by another CA
    certs.rogue_ca           # that other CA (a trust store that does not know the broker)

The broker's certificate names 127.0.0.1 and localhost, so clients that
check host names (Java's default https identification) accept it. Keys are
unencrypted PKCS#8, which every client here reads.
"""
from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import NamedTuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLIENT_SUBJECT = "CN=alice,OU=eng,O=acme,C=US"  # as Kafka writes it (RFC 2253)


class Certs(NamedTuple):
    ca: Path
    server: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    client_keystore: Path
    rogue_ca: Path
    rogue_cert: Path
    rogue_key: Path


def _name(**attrs: str) -> x509.Name:
    oids = {"C": NameOID.COUNTRY_NAME, "O": NameOID.ORGANIZATION_NAME,
            "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "CN": NameOID.COMMON_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in attrs.items()])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject: x509.Name, key, issuer: x509.Name, issuer_key, *, ca: bool = False,
          sans: list | None = None, usage=None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(hours=1))
         .not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                          content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False,
                                          encipher_only=False, decipher_only=False), critical=True)
        b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            issuer_key.public_key()), critical=False)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if usage:
        b = b.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_certs(directory: Path) -> Certs:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)

    def write(name: str, *parts: bytes) -> Path:
        path = d / name
        path.write_bytes(b"".join(parts))
        return path

    ca_key, rogue_ca_key = _key(), _key()
    ca_name, rogue_ca_name = _name(O="samsa tests", CN="samsa test CA"), _name(CN="rogue CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    rogue_ca = _cert(rogue_ca_name, rogue_ca_key, rogue_ca_name, rogue_ca_key, ca=True)

    server_key = _key()
    server = _cert(_name(CN="localhost"), server_key, ca_name, ca_key,
                   sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
                   usage=[ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
    client_key = _key()
    client = _cert(_name(C="US", O="acme", OU="eng", CN="alice"), client_key, ca_name, ca_key,
                   usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    rogue_key = _key()
    rogue = _cert(_name(CN="mallory"), rogue_key, rogue_ca_name, rogue_ca_key,
                  usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    return Certs(
        ca=write("ca.pem", _pem_cert(ca)),
        server=write("server.pem", _pem_key(server_key), _pem_cert(server), _pem_cert(ca)),
        server_cert=write("server-cert.pem", _pem_cert(server), _pem_cert(ca)),
        server_key=write("server-key.pem", _pem_key(server_key)),
        client_cert=write("client-cert.pem", _pem_cert(client)),
        client_key=write("client-key.pem", _pem_key(client_key)),
        client_keystore=write("client.pem", _pem_key(client_key), _pem_cert(client)),
        rogue_ca=write("rogue-ca.pem", _pem_cert(rogue_ca)),
        rogue_cert=write("rogue-cert.pem", _pem_cert(rogue)),
        rogue_key=write("rogue-key.pem", _pem_key(rogue_key)),
    )
