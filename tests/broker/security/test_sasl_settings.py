"""SASL settings from Kafka's keys: what a broker accepts and what refuses to
start (naming the key), and the SCRAM exchange against RFC 7677's example."""
from __future__ import annotations

import asyncio
import base64

import pytest

from samsa.client.jaas import JaasSyntaxError, parse_jaas_file, parse_jaas_property
from samsa.broker.security.sasl.mechanism import SaslError
from samsa.broker.security.sasl.scram import ScramServer
from samsa.client.scram_credential import credential_from_password
from samsa.broker.security.sasl.settings import SaslSettings
from samsa.config import ConfigError
from samsa.config.broker import BrokerConfig

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
JAAS = f'{PLAIN} required username="admin" password="a;b" user_admin="a;b" user_bob=bob-pw;'


def settings(**keys) -> SaslSettings:
    base = {"listeners": "SASL_PLAINTEXT://:9092"}
    return SaslSettings.from_config(BrokerConfig.from_dict({**base, **keys}))


def test_jaas_property_with_quoted_semicolons_and_bare_values():
    [entry] = parse_jaas_property(JAAS)
    assert entry.login_module == PLAIN and entry.flag == "required"
    assert entry.options == {"username": "admin", "password": "a;b", "user_admin": "a;b",
                             "user_bob": "bob-pw"}


@pytest.mark.parametrize("text", [
    f'{PLAIN} required user_a="x"',          # no ';'
    f'{PLAIN} mandatory user_a="x";',        # not a flag
    f'{PLAIN} required user_a="x;',          # open quote
    f'{PLAIN} required user_a=;',            # no value
    "",
])
def test_jaas_property_is_parsed_strictly(text):
    with pytest.raises(JaasSyntaxError):
        parse_jaas_property(text)


def test_jaas_file_sections_and_comments():
    sections = parse_jaas_file(f"""
        // the broker
        KafkaServer {{ /* PLAIN users */
            {PLAIN} required user_x="1";
        }};
        sasl_plaintext.KafkaServer {{ {PLAIN} required user_y="2"; }};
    """)
    assert sections["KafkaServer"][0].options == {"user_x": "1"}
    assert sections["sasl_plaintext.KafkaServer"][0].options == {"user_y": "2"}


def test_plain_is_the_default_and_users_come_from_the_listener_key():
    s = settings(**{"listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    lst = s.for_listener("SASL_PLAINTEXT")
    assert lst.mechanisms == ("PLAIN",)
    assert dict(lst.plain_users) == {"admin": "a;b", "bob": "bob-pw"}


def test_jaas_file_listener_section_wins(tmp_path):
    path = tmp_path / "jaas.conf"
    path.write_text(f'KafkaServer {{ {PLAIN} required user_x="1"; }};\n'
                    f'sasl_plaintext.KafkaServer {{ {PLAIN} required user_y="2"; }};\n')
    s = settings(**{"java.security.auth.login.config": str(path)})
    assert dict(s.for_listener("SASL_PLAINTEXT").plain_users) == {"y": "2"}


@pytest.mark.parametrize("keys,named", [
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
    ({"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS},
     "listener.name.sasl_plaintext.sasl.enabled.mechanisms"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{PLAIN} required user_a="x"'},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({}, "listener.name.sasl_plaintext.plain.sasl.jaas.config"),  # PLAIN without users
    ({"java.security.auth.login.config": "/nonexistent/jaas.conf"},
     "java.security.auth.login.config"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256",
      "listener.name.sasl_plaintext.connections.max.reauth.ms": "-5"},
     "listener.name.sasl_plaintext.connections.max.reauth.ms"),
])
def test_bad_sasl_settings_refuse_to_start_naming_the_key(keys, named):
    with pytest.raises(ConfigError) as e:
        settings(**keys)
    assert e.value.key == named
    assert "a;b" not in str(e.value)  # passwords stay out of the message


def test_scram_only_needs_no_jaas():
    s = settings(**{"sasl.enabled.mechanisms": "SCRAM-SHA-512",
                    "connections.max.reauth.ms": "60000"})
    lst = s.for_listener("SASL_PLAINTEXT")
    assert lst.mechanisms == ("SCRAM-SHA-512",) and lst.max_reauth_ms == 60000


def test_scram_sha_256_against_rfc_7677_example():
    """RFC 7677 section 3: user "user", password "pencil", 4096 iterations."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = credential_from_password("SCRAM-SHA-256", "pencil", 4096, salt)

    def lookup(user, mechanism):
        return credential if (user, mechanism) == ("user", "SCRAM-SHA-256") else None

    server = ScramServer("SCRAM-SHA-256", lookup)
    server_first = asyncio.run(server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")).decode()
    assert server_first.startswith("r=rOprNGfwEbeRWgbNEkqO")
    assert server_first.endswith(",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    # The RFC's client final message only fits the RFC's server nonce; with
    # ours, a proof computed the same way (as a client does) must pass.
    import hashlib
    import hmac
    nonce = server_first.split(",")[0][2:]
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    without_proof = f"c=biws,r={nonce}"
    auth = f"n=user,r=rOprNGfwEbeRWgbNEkqO,{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    final = asyncio.run(server.evaluate(f"{without_proof},p={proof}".encode()))
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    assert final == b"v=" + base64.b64encode(hmac.new(server_key, auth, "sha256").digest())
    assert server.complete and server.authorization_id == "user"

    # The RFC's own stored credential values for this password and salt.
    assert base64.b64encode(credential.stored_key) == \
        b"WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY="
    assert base64.b64encode(credential.server_key) == \
        b"wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="

    wrong = ScramServer("SCRAM-SHA-256", lookup)
    asyncio.run(wrong.evaluate(b"n,,n=user,r=abc"))
    with pytest.raises(SaslError):
        asyncio.run(wrong.evaluate(b"c=biws,r=abcdef,p=" + base64.b64encode(b"x" * 32)))


def test_scram_refuses_token_authentication_and_few_iterations():
    weak = credential_from_password("SCRAM-SHA-256", "pw", 1000)

    def lookup(user, mechanism):
        return weak

    with pytest.raises(SaslError, match="Token"):
        asyncio.run(ScramServer("SCRAM-SHA-256", lookup).evaluate(
            b"n,,n=user,r=abc,tokenauth=true"))
    with pytest.raises(SaslError, match="Iterations 1000 is less than the minimum 4096"):
        asyncio.run(ScramServer("SCRAM-SHA-256", lookup).evaluate(b"n,,n=user,r=abc"))


def test_brokers_of_a_cluster_log_in_to_each_other():
    zk = {"zookeeper.connect": "127.0.0.1:2181", "inter.broker.listener.name": "SASL_PLAINTEXT"}
    s = settings(**zk, **{"listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    assert tuple(s.inter_broker) == ("PLAIN", "admin", "a;b")
    # One broker logs in to itself too (transaction markers go over the wire).
    assert tuple(settings(**{"inter.broker.listener.name": "SASL_PLAINTEXT",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}
                          ).inter_broker) == ("PLAIN", "admin", "a;b")
    scram_jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                  'username="broker" password="b";')
    s = settings(**zk, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512",
                          "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                          "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
                              scram_jaas})
    assert tuple(s.inter_broker) == ("SCRAM-SHA-512", "broker", "b")
    with pytest.raises(ConfigError) as e:
        settings(**zk, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512",
                          "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})
    assert e.value.key == "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"
    with pytest.raises(ConfigError) as e:
        settings(**zk, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512"})  # PLAIN not enabled
    assert e.value.key == "sasl.mechanism.inter.broker.protocol"
