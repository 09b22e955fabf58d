"""The principal of a mutual-TLS client (broker/security/principal.py): ssl.principal.mapping.rules parsed
and applied as Kafka's SslPrincipalMapper does (its own test tables), and the subject distinguished name
written as Java's X500Principal.getName() writes it (the expected strings were printed by Java 17 for
certificates with the same subjects)."""
from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID, ObjectIdentifier

from trafka.broker.security.principal import (
    ANONYMOUS,
    NoMatchingRule,
    SslPrincipalMapper,
    distinguished_name,
    principal_name,
)
from trafka.broker.security.tls import TlsConfigError

# -- the rules: Kafka's own examples ----------------------------------------------------------------------

VALID_RULES = [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
]


@pytest.mark.parametrize("rules", VALID_RULES)
def test_valid_rules(rules: str) -> None:
    SslPrincipalMapper.from_rules(rules)


@pytest.mark.parametrize(("rules", "message"), [
    ("default", "Invalid rule: `default`, unmatched substring: `default`"),
    ("DEFAUL", "Invalid rule: `DEFAUL`, unmatched substring: `DEFAUL`"),
    ("DEFAULT/L", "Invalid rule: `DEFAULT/L`, unmatched substring: `/L`"),
    ("DEFAULT/U", "Invalid rule: `DEFAULT/U`, unmatched substring: `/U`"),
    ("RULE:CN=(.*?),OU=ServiceUsers.*/$1", "Invalid rule: `RULE:CN=(.*?)`"),
    ("rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "Invalid rule: `rule:^CN=(.*?)`"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U", "unmatched substring: `/U`"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "Invalid rule: `RULE:^CN=(.*?)`"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/U", "Invalid rule: `RULE:^CN=(.*?)`"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/LU", "Invalid rule: `RULE:^CN=(.*?)`"),
])
def test_invalid_rules(rules: str, message: str) -> None:
    with pytest.raises(TlsConfigError) as caught:
        SslPrincipalMapper.from_rules(rules)
    assert str(caught.value).startswith("ssl.principal.mapping.rules: ")
    assert message in str(caught.value)


MAPPER = SslPrincipalMapper.from_rules(", ".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
]))


@pytest.mark.parametrize(("distinguished", "name"), [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_mapping(distinguished: str, name: str) -> None:
    assert MAPPER.name(distinguished) == name


@pytest.mark.parametrize(("rules", "shown"), [
    ("", "[]"),
    ("DEFAULT", "[DEFAULT]"),
    ("RULE://", "[RULE:/]"),
    ("RULE:/.*/", "[RULE:/.*]"),
    ("RULE:/.*/L", "[RULE:/.*/L]"),
    ("RULE://,DEFAULT", "[RULE:/, DEFAULT]"),
    ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
    ("  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"),
    ("  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"),
    ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"),
    # empty rules are ignored
    (",   , , ,      , , ,   ", "[]"),
    (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
    (",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"),
    ("     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"),
    # escape sequences
    ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]"),
    ("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/", "[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]"),
    # rules rule
    ("RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
     "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]"),
    # here, unlike Kafka, a line break separates rules too
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/\nRULE:^CN=([^,]*),.*$/$1/U\n\n  DEFAULT\n",
     "[RULE:^CN=(.*?),OU=ServiceUsers.*$/$1, RULE:^CN=([^,]*),.*$/$1/U, DEFAULT]"),
    ("RULE:a/b/,\nRULE:c/d/L,\n DEFAULT", "[RULE:a/b, RULE:c/d/L, DEFAULT]"),
])
def test_rules_splitting(rules: str, shown: str) -> None:
    assert str(SslPrincipalMapper.from_rules(rules)) == shown


def test_comma_with_whitespace() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_rules_separated_by_line_breaks_apply_in_order() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/\nRULE:^CN=([^,]*),.*$/$1/U\nDEFAULT")
    assert mapper.name("CN=svc,OU=ServiceUsers,O=x") == "svc"
    assert mapper.name("CN=ann,O=x") == "ANN"
    assert mapper.name("O=x") == "O=x"


# -- replacements, as Java's String.replaceAll makes them (expected values printed by Java) ---------------

@pytest.mark.parametrize(("rule", "distinguished", "name"), [
    ("RULE:(.*)/$1x/", "abc", "abcxx"),  # every match is replaced, the empty one at the end too
    ("RULE:^CN=(.*?),OU=(.*?)$/$1@$4/", "CN=a,OU=b", "a@$4"),  # Kafka leaves a $n beyond the groups literal
    ("RULE:^CN=(a)(b)$/$12/", "CN=ab", "a2"),  # the longest number naming a group
    ("RULE:^CN=(?<first>a)(b)$/${first}-$2-$0/", "CN=ab", "a-b-CN=ab"),  # Java's named groups, $0
    ("RULE:^CN=(a)|(z)$/[$2]/", "CN=a", "[]"),  # a group that took no part is empty
    ("RULE:^CN=(.*)$/\\$1 costs \\\\1/", "CN=a", "$1 costs \\1"),
    ("RULE:^CN=(.*?),.*$/$1/L", "CN=ÅSA,O=x", "åsa"),
    ("RULE:^CN=(.*?),.*$/$1/U", "CN=straße,O=x", "STRASSE"),
])
def test_replacements(rule: str, distinguished: str, name: str) -> None:
    assert SslPrincipalMapper.from_rules(rule).name(distinguished) == name


@pytest.mark.parametrize(("rules", "message"), [
    ("RULE:^CN=.*$/$1/", "the replacement refers to group 1, but the pattern has 0"),
    ("RULE:^CN=(.*)$/$x/", "the replacement has '$' before 'x'"),
    ("RULE:^CN=(.*)$/$/", "the replacement ends with '$'"),
    ("RULE:^CN=(.*)$/${nope}/", "the replacement names a group the pattern does not have: nope"),
    ("RULE:^CN=(.*)$/${/", "the replacement has a '${' without a group name"),
    ("RULE:^CN=(.*$/$1/", "the pattern is not a regular expression trafka reads"),
    ("RULE:^CN=(\\p{L}+)$/$1/", "the pattern is not a regular expression trafka reads"),
])
def test_wrong_rules_are_refused_when_read(rules: str, message: str) -> None:
    """Kafka finds these only when a client connects; here they stop the start."""
    with pytest.raises(TlsConfigError, match="^ssl.principal.mapping.rules: Invalid rule: ") as caught:
        SslPrincipalMapper.from_rules(rules)
    assert message in str(caught.value)


def test_no_matching_rule() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*)$/$1/")
    with pytest.raises(NoMatchingRule, match=r"^No rules apply to O=x, rules \[RULE:\^CN=\(\.\*\)\$/\$1\]$"):
        mapper.name("O=x")
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper.from_rules("").name("CN=a")  # no rules at all, as in Kafka


# -- the distinguished name, as Java writes it -----------------------------------------------------------

A = x509.NameAttribute
R = x509.RelativeDistinguishedName


def _name(*parts: x509.NameAttribute | x509.RelativeDistinguishedName) -> x509.Name:
    """A Name from its relative names in encoded order (the reverse of how RFC 2253 writes them)."""
    return x509.Name([part if isinstance(part, R) else R([part]) for part in parts])


SUBJECTS = [
    (_name(A(NameOID.COUNTRY_NAME, "US"), A(NameOID.ORGANIZATION_NAME, "Sun Microsystems"),
           A(NameOID.ORGANIZATIONAL_UNIT_NAME, "JavaSoft"), A(NameOID.COMMON_NAME, "Duke")),
     "CN=Duke,OU=JavaSoft,O=Sun Microsystems,C=US"),
    (_name(A(NameOID.ORGANIZATION_NAME, "Org"), A(NameOID.COMMON_NAME, "Duke"),
           A(NameOID.EMAIL_ADDRESS, "duke@example.com")),
     "1.2.840.113549.1.9.1=#161064756b65406578616d706c652e636f6d,CN=Duke,O=Org"),
    (_name(A(NameOID.ORGANIZATION_NAME, 'a,b+c=d<e>f;g"h\\i#j'), A(NameOID.COMMON_NAME, "#lead")),
     'CN=\\#lead,O=a\\,b\\+c\\=d\\<e\\>f\\;g\\"h\\\\i\\#j'),
    (_name(A(NameOID.ORGANIZATION_NAME, "  two lead"), A(NameOID.ORGANIZATIONAL_UNIT_NAME, "trail  "),
           A(NameOID.COMMON_NAME, " ")),
     "CN=\\ ,OU=trail\\ \\ ,O=\\ \\ two lead"),
    (_name(A(NameOID.ORGANIZATION_NAME, "Org"), R([A(NameOID.COMMON_NAME, "alice"), A(NameOID.USER_ID, "a1")])),
     "CN=alice+UID=a1,O=Org"),
    (_name(R([A(NameOID.ORGANIZATIONAL_UNIT_NAME, "x"), A(NameOID.COMMON_NAME, "b"),
              A(NameOID.EMAIL_ADDRESS, "e@x")])),
     "CN=b+OU=x+1.2.840.113549.1.9.1=#1603654078"),
    (_name(A(NameOID.DOMAIN_COMPONENT, "com"), A(NameOID.DOMAIN_COMPONENT, "example"),
           A(NameOID.STREET_ADDRESS, "Main St 1"), A(NameOID.LOCALITY_NAME, "Fulton"),
           A(NameOID.STATE_OR_PROVINCE_NAME, "MD"), A(NameOID.USER_ID, "u")),
     "UID=u,ST=MD,L=Fulton,STREET=Main St 1,DC=example,DC=com"),
    (_name(A(NameOID.SERIAL_NUMBER, "1234"), A(NameOID.TITLE, "Dr"), A(NameOID.GIVEN_NAME, "Jo"),
           A(NameOID.SURNAME, "Doe"), A(NameOID.PSEUDONYM, "jd"), A(ObjectIdentifier("1.2.3.4.5"), "x"),
           A(NameOID.COMMON_NAME, "z")),
     "CN=z,1.2.3.4.5=#0c0178,2.5.4.65=#0c026a64,2.5.4.4=#0c03446f65,2.5.4.42=#0c024a6f,2.5.4.12=#0c024472,"
     "2.5.4.5=#130431323334"),
    (_name(A(NameOID.ORGANIZATION_NAME, "Müller & Söhne"), A(NameOID.COMMON_NAME, "日本語 テスト")),
     "CN=日本語 テスト,O=Müller & Söhne"),
    (_name(A(NameOID.ORGANIZATION_NAME, "t61", _type=_ASN1Type.T61String),
           A(NameOID.COMMON_NAME, "ia5", _type=_ASN1Type.IA5String)),
     "CN=ia5,O=t61"),
    # Java reads a BMPString's bytes as UTF-8, and writes a UniversalString as hex.
    (_name(A(NameOID.ORGANIZATION_NAME, "bmp\u00e9", _type=_ASN1Type.BMPString),
           A(NameOID.COMMON_NAME, "printable", _type=_ASN1Type.PrintableString)),
     "CN=printable,O=\\00b\\00m\\00p\\00\ufffd"),
    (_name(A(NameOID.COMMON_NAME, "univ", _type=_ASN1Type.UniversalString)),
     "CN=#1c10000000750000006e0000006900000076"),
    (_name(A(NameOID.COMMON_NAME, "a\0b\rc\r")), "CN=a\\00b\rc\\\r"),
    (_name(A(NameOID.DOMAIN_COMPONENT, "cz"), A(NameOID.DOMAIN_COMPONENT, "geodis"),
           A(NameOID.ORGANIZATIONAL_UNIT_NAME, "ITZ"), A(NameOID.COMMON_NAME, "Tkac, Adam")),
     "CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz"),
    (x509.Name([]), ""),
]

_KEY = ec.generate_private_key(ec.SECP256R1())


def _certificate(subject: x509.Name) -> bytes:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(x509.Name([A(NameOID.COMMON_NAME, "issuer")]))
            .public_key(_KEY.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(_KEY, hashes.SHA256())
            .public_bytes(serialization.Encoding.DER))


@pytest.mark.parametrize(("subject", "expected"), SUBJECTS, ids=[expected[:40] for _, expected in SUBJECTS])
def test_distinguished_name_as_java_writes_it(subject: x509.Name, expected: str) -> None:
    assert distinguished_name(_certificate(subject)) == expected


def test_principal_name() -> None:
    alice = _certificate(x509.Name.from_rfc4514_string("CN=alice,OU=ServiceUsers,O=trafka"))
    assert principal_name(None) == ANONYMOUS == "User:ANONYMOUS"
    assert principal_name(None, "RULE:^CN=(.*?),.*$/$1/") == ANONYMOUS
    assert principal_name(alice) == "User:CN=alice,OU=ServiceUsers,O=trafka"
    assert principal_name(alice, "DEFAULT") == "User:CN=alice,OU=ServiceUsers,O=trafka"
    assert principal_name(alice, "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT") == "User:alice"
    assert principal_name(alice, SslPrincipalMapper.from_rules("RULE:^CN=(.*?),.*$/$1/U")) == "User:ALICE"
    with pytest.raises(NoMatchingRule):
        principal_name(alice, "RULE:^CN=bob,.*$/bob/")
