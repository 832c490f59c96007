"""TLS configuration and principals, without a broker process: Kafka's
ssl.principal.mapping.rules examples, the RFC 2253 subject, and the ssl.*
keys that refuse start-up naming themselves."""
from __future__ import annotations

import ssl

import pytest

from samsa.broker.security.ssl_principal import NoMatchingRule, SslPrincipalMapper, subject_dn
from samsa.broker.security.tls_config import check_tls_config, inter_broker_tls, listener_tls
from samsa.config import ConfigError
from samsa.config.broker import BrokerConfig
from tests.support.tls_certs import make_certs

# Kafka's documentation (security.html, "Customizing SSL User Name").
DOC_RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
             "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
             "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
             "DEFAULT")


@pytest.mark.parametrize("dn, name", [
    ("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser"),
    ("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"),
    ("OU=x,cn=Joe.Smith,O=y", "joe.smith"),
    ("OU=nobody", "OU=nobody"),  # DEFAULT: the DN itself
])
def test_documented_rules(dn, name):
    assert SslPrincipalMapper(DOC_RULES).name(dn) == name


def test_rules_across_lines_upper_case_and_escaped_slash():
    mapper = SslPrincipalMapper("RULE:^CN=([^,]*),.*$/$1\\/svc/U,\n  DEFAULT")
    assert mapper.name("CN=kafka,O=acme") == "KAFKA/SVC"


def test_back_reference_beyond_the_groups_is_literal():
    # One group: $12 is group 1 followed by "2"; $3 stays "$3" (as Kafka does).
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$12-$3/").name("CN=a") == "a2-$3"


def test_no_rule_applies_is_refused():
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x")


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*)$/$1", "RULE:^CN=((.*$/$1/", "NOPE"])
def test_bad_rules_name_the_key(rules):
    with pytest.raises(ConfigError) as e:
        SslPrincipalMapper(rules)
    assert "ssl.principal.mapping.rules" in str(e.value)


def test_subject_dn_is_rfc2253_last_rdn_first_with_escapes():
    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc"),),
               (("commonName", "al+ice"), ("userId", "7")), (("emailAddress", "a@b.c"),))
    # emailAddress has no RFC 2253 keyword: Java writes its DER (IA5String "a@b.c")
    assert subject_dn(subject) == ("1.2.840.113549.1.9.1=#16056140622e63,"
                                   "CN=al\\+ice+UID=7,O=Acme\\, Inc,C=US")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def _cfg(**props) -> BrokerConfig:
    base = {"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"}
    return BrokerConfig.from_dict({**base, **props})


def _ssl(certs, **props):
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca), **props}


def test_pem_files_make_a_server_context_with_client_auth(certs):
    tls = listener_tls(_cfg(**_ssl(certs, **{"ssl.client.auth": "required"})), "SSL")
    assert tls.context.verify_mode == ssl.CERT_REQUIRED
    assert list(check_tls_config(_cfg(**_ssl(certs)))) == ["SSL"]


def test_inline_pem_and_per_listener_override(certs):
    cfg = _cfg(**{"listener.name.ssl.ssl.keystore.type": "PEM",
                  "listener.name.ssl.ssl.keystore.certificate.chain": certs.server_cert.read_text(),
                  "listener.name.ssl.ssl.keystore.key": certs.server_key.read_text(),
                  "listener.name.ssl.ssl.client.auth": "requested",
                  "ssl.truststore.type": "PEM",
                  "ssl.truststore.certificates": certs.ca.read_text()})
    assert listener_tls(cfg, "SSL").context.verify_mode == ssl.CERT_OPTIONAL


@pytest.mark.parametrize("props, key", [
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
    ({"listener.name.ssl.ssl.keystore.type": "PKCS12"}, "listener.name.ssl.ssl.keystore.type"),
    ({"ssl.keystore.location": "/no/such/file.pem"}, "ssl.keystore.location"),
    ({"ssl.keystore.location": "CA"}, "ssl.keystore.location"),          # no private key in it
    ({"ssl.client.auth": "required", "ssl.truststore.location": "/nope"}, "ssl.truststore.location"),
    ({"ssl.enabled.protocols": "SSLv2"}, "ssl.enabled.protocols"),
    ({"ssl.cipher.suites": "NOT-A-CIPHER"}, "ssl.cipher.suites"),
])
def test_unusable_settings_refuse_naming_the_key(certs, props, key):
    props = {k: (str(certs.ca) if v == "CA" else v) for k, v in props.items()}
    with pytest.raises(ConfigError) as e:
        check_tls_config(_cfg(**_ssl(certs, **props)))
    assert key in str(e.value)


def test_ssl_listener_without_key_store_refuses():
    with pytest.raises(ConfigError) as e:
        check_tls_config(_cfg())
    assert "ssl.keystore.location" in str(e.value)


def test_inter_broker_client_context_only_for_tls_listeners(certs):
    assert inter_broker_tls(_cfg(**_ssl(certs))) is None
    ctx = inter_broker_tls(_cfg(**_ssl(certs, **{"inter.broker.listener.name": "SSL"})))
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_describe_configs_never_shows_tls_secrets(certs):
    from samsa.config.describe import describe_broker_config
    cfg = _cfg(**_ssl(certs, **{"ssl.key.password": "s3cret",
                                "ssl.keystore.key": certs.server_key.read_text()}))
    entries = {e.name: e for e in describe_broker_config(cfg)}
    for key in ("ssl.key.password", "ssl.keystore.key"):
        assert entries[key].is_sensitive and entries[key].value is None
        assert all(s.value is None for s in entries[key].synonyms)
    assert entries["ssl.keystore.location"].value == str(certs.server)


def test_inline_pem_joined_into_one_line_as_a_properties_file_continues_it(certs, tmp_path):
    from samsa.config.broker import load_broker_config

    def continued(pem: str) -> str:  # "key=line1 \\\n    line2 ..." as Kafka's docs write it
        return " \\\n    ".join(pem.strip().splitlines())
    props = tmp_path / "server.properties"
    props.write_text("listeners=SSL://127.0.0.1:9093\n"
                     "ssl.keystore.type=PEM\n"
                     f"ssl.keystore.certificate.chain={continued(certs.server_cert.read_text())}\n"
                     f"ssl.keystore.key={continued(certs.server_key.read_text())}\n")
    cfg = load_broker_config(props, environ={})
    assert "\n" not in cfg.ssl_keystore_key
    assert list(check_tls_config(cfg)) == ["SSL"]


def test_encrypted_private_key_needs_the_right_ssl_key_password(certs, tmp_path):
    from cryptography.hazmat.primitives import serialization
    key = serialization.load_pem_private_key(certs.server_key.read_bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"pw"))
    store = tmp_path / "encrypted.pem"
    store.write_bytes(encrypted + certs.server_cert.read_bytes())
    ok = _cfg(**_ssl(certs, **{"ssl.keystore.location": str(store), "ssl.key.password": "pw"}))
    assert list(check_tls_config(ok)) == ["SSL"]
    with pytest.raises(ConfigError) as e:
        check_tls_config(_cfg(**_ssl(certs, **{"ssl.keystore.location": str(store),
                                               "ssl.key.password": "wrong"})))
    assert "ssl.keystore.location" in str(e.value) and "ssl.key.password" in str(e.value)


@pytest.mark.integration
def test_server_with_a_missing_key_store_refuses_to_start_naming_it(tmp_path):
    import subprocess
    import sys
    from tests.support.broker_process import REPO_ROOT
    data = tmp_path / "data"
    p = subprocess.run([sys.executable, "-m", "samsa", "server", str(REPO_ROOT / "server.properties"),
                        "--override", "listeners=SSL://127.0.0.1:0",
                        "--override", "listener.name.ssl.ssl.keystore.type=PEM",
                        "--override", "listener.name.ssl.ssl.keystore.location=/no/such.pem",
                        "--override", f"log.dirs={data}"],
                       capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert p.returncode == 2
    assert "refusing to start" in p.stderr and "listener.name.ssl.ssl.keystore.location" in p.stderr
    assert "Traceback" not in p.stderr and not data.exists()
