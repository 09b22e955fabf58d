"""The ACL model and the authorizer (trafka.broker.security.authorizer): Kafka's StandardAuthorizer and
AuthorizerTest behaviours, table-driven, and the index checked against a plain scan of every binding."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trafka.broker.security.authorizer import (
    ANY_FILTER,
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    Authorizer,
    PatternType,
    creation_error,
    filter_error,
    kafka_name,
    operations_bitfield,
    parse_super_users,
    supported_operations,
)
from trafka.wire.errors import ErrorCode

Op = AclOperation
Rt = AclResourceType
Pt = PatternType
ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
TOPIC, GROUP, CLUSTER, TXN = Rt.TOPIC, Rt.GROUP, Rt.CLUSTER, Rt.TRANSACTIONAL_ID
LITERAL, PREFIXED = Pt.LITERAL, Pt.PREFIXED
HOST1, HOST2, LOCAL = "192.168.1.1", "192.168.1.2", "127.0.0.1"


def acl(rt, name, pattern, principal, host, op, permission) -> AclBinding:
    return AclBinding(rt, name, pattern, principal, host, op, permission)


def make(*bindings, super_users=("User:superman",), allow_everyone=False) -> Authorizer:
    return Authorizer(frozenset(super_users), allow_everyone, bindings)


def check(authorizer, user, op, rt, name, host=LOCAL) -> bool:
    return authorizer.authorize(f"User:{user}", host, op, rt, name)


# -- authorize --

def foo_acl(op, permission):
    return acl(TOPIC, "foo_", PREFIXED, "User:bob", "*", op, permission)


@pytest.mark.parametrize("op", [Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL])
def test_an_allow_of_these_implies_describe(op):
    assert check(make(foo_acl(op, ALLOW)), "bob", Op.DESCRIBE, TOPIC, "foo_bar")


@pytest.mark.parametrize("op", [Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                                Op.IDEMPOTENT_WRITE])
def test_an_allow_of_these_does_not_imply_describe(op):
    assert not check(make(foo_acl(op, ALLOW)), "bob", Op.DESCRIBE, TOPIC, "foo_bar")


@pytest.mark.parametrize("op", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_a_deny_implies_nothing(op):
    authorizer = make(foo_acl(op, DENY), foo_acl(Op.DESCRIBE, ALLOW))
    assert check(authorizer, "bob", Op.DESCRIBE, TOPIC, "foo_bar")
    assert not check(authorizer, "bob", op, TOPIC, "foo_bar")


def test_a_deny_of_describe_denies_describe_whatever_implies_it():
    authorizer = make(foo_acl(Op.DESCRIBE, DENY), foo_acl(Op.READ, ALLOW))
    assert not check(authorizer, "bob", Op.DESCRIBE, TOPIC, "foo_bar")
    assert check(authorizer, "bob", Op.READ, TOPIC, "foo_bar")


@pytest.mark.parametrize("op,implied", [(Op.DESCRIBE_CONFIGS, True), (Op.ALTER_CONFIGS, True), (Op.ALTER, False),
                                        (Op.DESCRIBE, False)])
def test_describe_configs_implication(op, implied):
    assert check(make(foo_acl(op, ALLOW)), "bob", Op.DESCRIBE_CONFIGS, TOPIC, "foo_bar") is implied


def test_a_deny_of_alter_configs_does_not_deny_describe_configs_but_denies_itself():
    authorizer = make(foo_acl(Op.ALTER_CONFIGS, DENY), foo_acl(Op.DESCRIBE_CONFIGS, ALLOW))
    assert check(authorizer, "bob", Op.DESCRIBE_CONFIGS, TOPIC, "foo_bar")
    assert not check(authorizer, "bob", Op.ALTER_CONFIGS, TOPIC, "foo_bar")


def test_principal_matching():
    authorizer = make(foo_acl(Op.READ, ALLOW), acl(GROUP, "bar", LITERAL, "User:*", "*", Op.READ, DENY),
                      acl(GROUP, "bar", LITERAL, "User:alice", "*", Op.READ, ALLOW))
    assert check(authorizer, "bob", Op.READ, TOPIC, "foo_bar")
    assert not check(authorizer, "alice", Op.READ, TOPIC, "foo_bar")  # bound to bob only
    assert not check(authorizer, "alice", Op.READ, GROUP, "bar")  # User:* DENY wins over alice's ALLOW
    # Only User:* is a wildcard: another type's * is a name like any other.
    other = make(acl(TOPIC, "t", LITERAL, "Group:*", "*", Op.READ, ALLOW))
    assert not check(other, "bob", Op.READ, TOPIC, "t")
    assert other.authorize("Group:*", LOCAL, Op.READ, TOPIC, "t")


def test_simple_authorizations():
    authorizer = make(foo_acl(Op.READ, ALLOW), foo_acl(Op.WRITE, ALLOW),
                      acl(GROUP, "bar", LITERAL, "User:*", "*", Op.DESCRIBE_CONFIGS, ALLOW),
                      acl(GROUP, "bar", LITERAL, "User:*", "*", Op.ALTER_CONFIGS, ALLOW))
    assert check(authorizer, "bob", Op.READ, TOPIC, "foo_")
    assert check(authorizer, "fred", Op.ALTER_CONFIGS, GROUP, "bar")
    assert not check(authorizer, "fred", Op.READ, GROUP, "bar")


def test_deny_precedence_with_operation_all():
    authorizer = make(acl(TOPIC, "foo", LITERAL, "User:alice", "*", Op.ALL, DENY),
                      acl(TOPIC, "foo", PREFIXED, "User:alice", "*", Op.READ, ALLOW),
                      acl(TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, DENY),
                      acl(TOPIC, "foo", PREFIXED, "User:*", "*", Op.DESCRIBE, ALLOW))
    assert [check(authorizer, "alice", op, TOPIC, name) for op, name in
            [(Op.WRITE, "foo"), (Op.READ, "foo"), (Op.DESCRIBE, "foo"), (Op.READ, "foobar")]] == [
        False, False, False, True]
    assert [check(authorizer, "bob", op, TOPIC, name) for op, name in
            [(Op.DESCRIBE, "foo"), (Op.READ, "foo"), (Op.WRITE, "foo"), (Op.DESCRIBE, "foobaz"),
             (Op.READ, "foobaz")]] == [False, False, False, True, False]


def test_topic_acl_with_operation_all():
    authorizer = make(acl(TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, ALLOW),
                      acl(TOPIC, "bar", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
                      acl(TOPIC, "baz", LITERAL, "User:bob", "*", Op.ALL, ALLOW))
    cases = {
        "alice": [(Op.WRITE, "foo", True), (Op.DESCRIBE_CONFIGS, "bar", True), (Op.DESCRIBE, "baz", False)],
        "bob": [(Op.WRITE, "foo", True), (Op.READ, "bar", False), (Op.DESCRIBE, "baz", True)],
        "malory": [(Op.DESCRIBE, "foo", True), (Op.WRITE, "bar", False), (Op.READ, "baz", False)],
    }
    for user, checks in cases.items():
        for op, name, expected in checks:
            assert check(authorizer, user, op, TOPIC, name) is expected, (user, op, name)


def test_host_matching():
    authorizer = make(acl(TOPIC, "foo", LITERAL, "User:alice", HOST1, Op.READ, DENY),
                      acl(TOPIC, "foo", LITERAL, "User:alice", "*", Op.READ, ALLOW),
                      acl(TOPIC, "bar", LITERAL, "User:bob", HOST2, Op.READ, ALLOW),
                      acl(TOPIC, "bar", LITERAL, "User:*", LOCAL, Op.DESCRIBE, ALLOW))
    actions = [(Op.READ, "foo"), (Op.READ, "bar"), (Op.DESCRIBE, "bar")]
    expected = {
        ("alice", LOCAL): [True, False, True],
        ("alice", HOST1): [False, False, False],
        ("alice", HOST2): [True, False, False],
        ("bob", LOCAL): [False, False, True],
        ("bob", HOST1): [False, False, False],
        ("bob", HOST2): [False, True, True],
    }
    for (user, host), results in expected.items():
        assert [check(authorizer, user, op, TOPIC, name, host) for op, name in actions] == results, (user, host)


def test_many_acls():
    authorizer = make(acl(TOPIC, "green2", LITERAL, "User:*", "*", Op.READ, ALLOW),
                      acl(TOPIC, "green", PREFIXED, "User:bob", "*", Op.READ, ALLOW),
                      acl(TOPIC, "betamax4", LITERAL, "User:bob", "*", Op.READ, ALLOW),
                      acl(TOPIC, "betamax", LITERAL, "User:bob", "*", Op.READ, ALLOW),
                      acl(TOPIC, "beta", PREFIXED, "User:*", "*", Op.READ, ALLOW),
                      acl(TOPIC, "alpha", PREFIXED, "User:*", "*", Op.READ, ALLOW),
                      acl(TOPIC, "alp", PREFIXED, "User:bob", "*", Op.READ, DENY),
                      acl(GROUP, "*", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
                      acl(GROUP, "wheel", LITERAL, "User:*", "*", Op.WRITE, DENY))
    assert check(authorizer, "bob", Op.READ, TOPIC, "green1")
    assert not check(authorizer, "bob", Op.WRITE, GROUP, "wheel")
    assert not check(authorizer, "bob", Op.READ, TOPIC, "alpha")
    assert check(authorizer, "bob", Op.WRITE, GROUP, "arbitrary")
    assert not check(authorizer, "bob", Op.READ, TOPIC, "ala")
    assert check(authorizer, "alice", Op.READ, TOPIC, "alphabet")
    assert check(authorizer, "alice", Op.READ, TOPIC, "betamax")  # the beta prefix, for everyone
    assert not check(authorizer, "alice", Op.WRITE, GROUP, "arbitrary")


def test_prefixes():
    authorizer = make(acl(TOPIC, "fooa", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
                      acl(TOPIC, "foobar", LITERAL, "User:bob", "*", Op.ALL, ALLOW),
                      acl(TOPIC, "f", PREFIXED, "User:bob", "*", Op.ALL, ALLOW))
    assert [check(authorizer, "bob", op, TOPIC, n) for op, n in
            [(Op.WRITE, "foobarr"), (Op.READ, "goobar"), (Op.READ, "fooa")]] == [True, False, True]
    assert [check(authorizer, "alice", op, TOPIC, n) for op, n in
            [(Op.DESCRIBE, "fooa"), (Op.WRITE, "bar"), (Op.READ, "baz")]] == [True, False, False]


def test_a_literal_name_is_not_a_prefix():
    authorizer = make(acl(TOPIC, "foo", LITERAL, "User:bob", "*", Op.READ, ALLOW))
    assert check(authorizer, "bob", Op.READ, TOPIC, "foo")
    assert not check(authorizer, "bob", Op.READ, TOPIC, "foobar")
    assert not check(authorizer, "bob", Op.READ, TOPIC, "fo")


def test_wildcard_resource():
    authorizer = make(acl(TOPIC, "*", LITERAL, "User:bob", "*", Op.READ, ALLOW),
                      acl(TOPIC, "secret", LITERAL, "User:bob", "*", Op.READ, DENY))
    assert check(authorizer, "bob", Op.READ, TOPIC, "anything")
    assert check(authorizer, "bob", Op.READ, TOPIC, "*")
    assert not check(authorizer, "bob", Op.READ, TOPIC, "secret")
    assert not check(authorizer, "bob", Op.READ, GROUP, "anything")  # another resource type
    # A PREFIXED "*" is a prefix like any other, not a wildcard.
    prefixed_star = make(acl(TOPIC, "*", PREFIXED, "User:bob", "*", Op.READ, ALLOW))
    assert not check(prefixed_star, "bob", Op.READ, TOPIC, "anything")
    assert check(prefixed_star, "bob", Op.READ, TOPIC, "*anything")


def test_wildcard_deny_beats_a_literal_allow():
    authorizer = make(acl(TOPIC, "t", LITERAL, "User:bob", "*", Op.READ, ALLOW),
                      acl(TOPIC, "*", LITERAL, "User:*", "*", Op.READ, DENY))
    assert not check(authorizer, "bob", Op.READ, TOPIC, "t")


def test_super_users_may_do_anything_despite_denies():
    authorizer = make(acl(TOPIC, "*", LITERAL, "User:*", "*", Op.ALL, DENY),
                      acl(CLUSTER, CLUSTER_NAME, LITERAL, "User:*", "*", Op.ALL, DENY),
                      super_users=("User:alice", "User:chris"))
    for user in ("alice", "chris"):
        assert check(authorizer, user, Op.WRITE, TOPIC, "t")
        assert check(authorizer, user, Op.ALTER, CLUSTER, CLUSTER_NAME)
        assert authorizer.authorize_by_resource_type(f"User:{user}", LOCAL, Op.WRITE, TOPIC)
    assert not check(authorizer, "bob", Op.WRITE, TOPIC, "t")
    # The principal is matched whole: the type counts.
    assert not authorizer.authorize("Group:alice", LOCAL, Op.WRITE, TOPIC, "t")


@pytest.mark.parametrize("allow_everyone", [False, True])
def test_allow_everyone_if_no_acl_found(allow_everyone):
    authorizer = make(acl(TOPIC, "topic1", LITERAL, "User:Alice", "*", Op.READ, ALLOW),
                      super_users=("User:alice", "User:chris"), allow_everyone=allow_everyone)
    # An ACL on the topic, not for Bob: refused either way.
    assert not check(authorizer, "Bob", Op.READ, TOPIC, "topic1")
    # No ACL on the topic at all: the setting decides.
    assert check(authorizer, "Bob", Op.READ, TOPIC, "topic2") is allow_everyone
    # An ACL on the topic for another operation still counts as an ACL on it.
    assert not check(authorizer, "Bob", Op.WRITE, TOPIC, "topic1")


def test_a_prefixed_acl_counts_as_an_acl_on_the_resource():
    authorizer = make(acl(TOPIC, "app-", PREFIXED, "User:alice", "*", Op.READ, ALLOW), allow_everyone=True)
    assert not check(authorizer, "bob", Op.READ, TOPIC, "app-1")
    assert check(authorizer, "bob", Op.READ, TOPIC, "other")


def test_no_acls_at_all_denies_by_default():
    authorizer = make()
    assert not check(authorizer, "bob", Op.READ, TOPIC, "t")
    assert not check(authorizer, "bob", Op.DESCRIBE, CLUSTER, CLUSTER_NAME)
    assert check(authorizer, "superman", Op.DESCRIBE, CLUSTER, CLUSTER_NAME)


def test_add_and_remove_keep_the_index():
    binding = acl(TOPIC, "app-", PREFIXED, "User:bob", "*", Op.READ, ALLOW)
    other = acl(TOPIC, "zzz-", PREFIXED, "User:bob", "*", Op.READ, ALLOW)
    authorizer = make()
    assert authorizer.add(binding)
    assert not authorizer.add(binding)  # already there
    assert authorizer.add(other)
    assert check(authorizer, "bob", Op.READ, TOPIC, "app-1")
    assert authorizer.remove(binding)
    assert not authorizer.remove(binding)
    assert not check(authorizer, "bob", Op.READ, TOPIC, "app-1")
    assert check(authorizer, "bob", Op.READ, TOPIC, "zzz-1")
    assert authorizer.remove(other)
    assert len(authorizer) == 0
    assert authorizer._prefixed == {} == authorizer._prefix_lengths == authorizer._prefix_counts == authorizer._literal
    authorizer.replace([binding, other])
    assert set(authorizer) == {binding, other}
    authorizer.replace([other])
    assert list(authorizer) == [other]


def test_a_binding_with_a_filter_pattern_cannot_be_added():
    with pytest.raises(ValueError):
        make(acl(TOPIC, "t", Pt.MATCH, "User:bob", "*", Op.READ, ALLOW))


# -- authorize_by_resource_type (KIP-679) --

def by_type(authorizer, user, op, rt, host=HOST1):
    return authorizer.authorize_by_resource_type(f"User:{user}", host, op, rt)


def test_by_type_add_and_remove():
    authorizer = make()
    allow_read = acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, Op.READ, ALLOW)
    deny_read = acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, Op.READ, DENY)
    for _ in range(3):
        assert not by_type(authorizer, "user1", Op.READ, TOPIC)
        authorizer.add(allow_read)
        assert by_type(authorizer, "user1", Op.READ, TOPIC)
        authorizer.add(deny_read)
        assert not by_type(authorizer, "user1", Op.READ, TOPIC)
        authorizer.remove(deny_read)
        assert by_type(authorizer, "user1", Op.READ, TOPIC)
        authorizer.remove(allow_read)


def test_by_type_an_unrelated_deny_does_not_dominate_an_allow():
    authorizer = make(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, Op.READ, DENY),
                      acl(TOPIC, "sb1", LITERAL, "User:user2", HOST1, Op.READ, DENY),
                      acl(TOPIC, "sb1", LITERAL, "User:user1", HOST2, Op.WRITE, DENY),
                      acl(TOPIC, "sb1", LITERAL, "User:user2", HOST2, Op.READ, DENY),
                      acl(TOPIC, "sb1", LITERAL, "User:user1", HOST2, Op.READ, ALLOW),
                      acl(TOPIC, "sb2", LITERAL, "User:user1", HOST2, Op.READ, DENY),
                      acl(GROUP, "s", PREFIXED, "User:user1", HOST2, Op.READ, DENY))
    for rt in (TOPIC, GROUP, TXN, CLUSTER):
        assert not by_type(authorizer, "user1", Op.READ, rt, HOST1)
    assert by_type(authorizer, "user1", Op.READ, TOPIC, HOST2)


def test_by_type_prefixed_denies_dominate():
    authorizer = make()

    def add(name, permission):
        authorizer.add(acl(GROUP, name, PREFIXED, "User:user1", HOST1, Op.READ, permission))

    add("abcde", ALLOW)
    assert by_type(authorizer, "user1", Op.READ, GROUP)
    add("abcd", DENY)
    assert not by_type(authorizer, "user1", Op.READ, GROUP)
    add("abc", ALLOW)
    assert by_type(authorizer, "user1", Op.READ, GROUP)
    add("a", DENY)
    assert not by_type(authorizer, "user1", Op.READ, GROUP)
    add("ab", ALLOW)
    assert not by_type(authorizer, "user1", Op.READ, GROUP)


def test_by_type_a_wildcard_deny_dominates():
    authorizer = make(acl(GROUP, "hello", PREFIXED, "User:user1", HOST1, Op.WRITE, ALLOW))
    assert by_type(authorizer, "user1", Op.WRITE, GROUP)
    authorizer.add(acl(GROUP, "*", LITERAL, "User:user1", HOST1, Op.WRITE, DENY))
    assert not by_type(authorizer, "user1", Op.WRITE, GROUP)
    authorizer.add(acl(GROUP, "*", LITERAL, "User:user1", HOST1, Op.WRITE, ALLOW))
    assert not by_type(authorizer, "user1", Op.WRITE, GROUP)
    authorizer.add(acl(GROUP, "aloha", LITERAL, "User:user1", HOST1, Op.WRITE, ALLOW))
    assert not by_type(authorizer, "user1", Op.WRITE, GROUP)


def test_by_type_a_wildcard_allow_is_enough():
    authorizer = make(acl(TOPIC, "*", LITERAL, "User:user1", "*", Op.WRITE, ALLOW),
                      acl(TOPIC, "t", PREFIXED, "User:user1", "*", Op.WRITE, DENY))
    assert by_type(authorizer, "user1", Op.WRITE, TOPIC)


def test_by_type_a_literal_deny_covers_only_its_own_name():
    authorizer = make(acl(TOPIC, "a", LITERAL, "User:user1", "*", Op.WRITE, ALLOW),
                      acl(TOPIC, "a", LITERAL, "User:user1", "*", Op.WRITE, DENY),
                      acl(TOPIC, "b", PREFIXED, "User:user1", "*", Op.WRITE, ALLOW),
                      acl(TOPIC, "b", LITERAL, "User:user1", "*", Op.WRITE, DENY))
    # The b prefix still names resources (b1, ...) the literal b DENY does not cover.
    assert by_type(authorizer, "user1", Op.WRITE, TOPIC)
    authorizer.remove(acl(TOPIC, "b", PREFIXED, "User:user1", "*", Op.WRITE, ALLOW))
    assert not by_type(authorizer, "user1", Op.WRITE, TOPIC)


def test_by_type_with_operation_all():
    authorizer = make()
    assert not by_type(authorizer, "user1", Op.READ, TOPIC)
    authorizer.add(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, Op.WRITE, DENY))
    authorizer.add(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, Op.ALL, ALLOW))
    assert by_type(authorizer, "user1", Op.READ, TOPIC)
    authorizer.add(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, Op.ALL, DENY))
    assert not by_type(authorizer, "user1", Op.READ, TOPIC)


def test_by_type_implied_operations_do_not_count():
    # Unlike authorize, an ALLOW of READ is not an ALLOW of DESCRIBE here.
    authorizer = make(acl(TOPIC, "t", LITERAL, "User:user1", "*", Op.READ, ALLOW))
    assert check(authorizer, "user1", Op.DESCRIBE, TOPIC, "t")
    assert not by_type(authorizer, "user1", Op.DESCRIBE, TOPIC)


def test_by_type_hosts_and_principals():
    authorizer = make()
    authorizer.add(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, Op.READ, ALLOW))
    assert by_type(authorizer, "user1", Op.READ, TOPIC, HOST1)
    authorizer.add(acl(TOPIC, "sb1", LITERAL, "User:user1", "*", Op.READ, DENY))
    assert not by_type(authorizer, "user1", Op.READ, TOPIC, HOST1)
    authorizer.add(acl(TOPIC, "sb2", LITERAL, "User:user1", HOST1, Op.READ, DENY))
    assert not by_type(authorizer, "user1", Op.READ, TOPIC, HOST2)
    authorizer.add(acl(TOPIC, "sb2", LITERAL, "User:user1", "*", Op.READ, ALLOW))
    assert by_type(authorizer, "user1", Op.READ, TOPIC, HOST2)
    authorizer.add(acl(TOPIC, "sb2", LITERAL, "User:user1", "*", Op.READ, DENY))
    assert not by_type(authorizer, "user1", Op.READ, TOPIC, HOST2)

    everyone = make(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, Op.READ, ALLOW))
    assert by_type(everyone, "user1", Op.READ, TOPIC)
    everyone.add(acl(TOPIC, "sb1", LITERAL, "User:*", HOST1, Op.READ, DENY))
    assert not by_type(everyone, "user1", Op.READ, TOPIC)
    everyone.add(acl(TOPIC, "sb2", LITERAL, "User:*", HOST1, Op.READ, ALLOW))
    assert by_type(everyone, "user2", Op.READ, TOPIC)


def test_by_type_allow_everyone_when_no_acl_names_the_made_up_resource():
    assert by_type(make(allow_everyone=True), "user1", Op.WRITE, TXN)
    assert not by_type(make(), "user1", Op.WRITE, TXN)
    denied = make(acl(TXN, "*", LITERAL, "User:*", "*", Op.WRITE, DENY), allow_everyone=True)
    assert not by_type(denied, "user1", Op.WRITE, TXN)


@pytest.mark.parametrize("op,rt", [(Op.ANY, TOPIC), (Op.UNKNOWN, TOPIC), (Op.READ, Rt.ANY), (Op.READ, Rt.UNKNOWN)])
def test_by_type_refuses_filters(op, rt):
    with pytest.raises(ValueError):
        make().authorize_by_resource_type("User:a", LOCAL, op, rt)


# -- authorized operations --

def test_authorized_operations():
    authorizer = make(acl(TOPIC, "t", LITERAL, "User:bob", "*", Op.READ, ALLOW),
                      acl(TOPIC, "t", LITERAL, "User:bob", "*", Op.ALTER_CONFIGS, ALLOW))
    bits = authorizer.authorized_operations("User:bob", LOCAL, TOPIC, "t")
    assert bits == operations_bitfield([Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS])
    assert authorizer.authorized_operations("User:eve", LOCAL, TOPIC, "t") == 0
    assert authorizer.authorized_operations("User:superman", LOCAL, TOPIC, "t") == operations_bitfield(
        supported_operations(TOPIC))
    cluster_all = make(acl(CLUSTER, CLUSTER_NAME, LITERAL, "User:bob", "*", Op.ALL, ALLOW))
    assert cluster_all.authorized_operations("User:bob", LOCAL, CLUSTER, CLUSTER_NAME) == operations_bitfield(
        supported_operations(CLUSTER))


def test_supported_operations():
    assert supported_operations(TOPIC) == {Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                                           Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
    assert supported_operations(GROUP) == {Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
    assert supported_operations(TXN) == {Op.DESCRIBE, Op.WRITE, Op.TWO_PHASE_COMMIT}
    assert supported_operations(Rt.USER) == {Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS}
    assert operations_bitfield(supported_operations(CLUSTER)) == 0b1111110100000  # as Kafka's DescribeCluster
    with pytest.raises(ValueError):
        supported_operations(Rt.ANY)


# -- filters --

def test_filter_matching():
    literal = acl(TOPIC, "foo", LITERAL, "User:bob", "*", Op.READ, ALLOW)
    wildcard = acl(TOPIC, "*", LITERAL, "User:bob", "*", Op.READ, ALLOW)
    prefixed = acl(TOPIC, "fo", PREFIXED, "User:bob", "*", Op.READ, ALLOW)
    other_prefix = acl(TOPIC, "bar", PREFIXED, "User:bob", "*", Op.READ, ALLOW)
    group = acl(GROUP, "foo", LITERAL, "User:alice", "10.0.0.1", Op.DESCRIBE, DENY)
    everything = [literal, wildcard, prefixed, other_prefix, group]

    def matched(**fields):
        return [b for b in everything if AclBindingFilter(**fields).matches(b)]

    assert matched() == everything
    assert [b for b in everything if ANY_FILTER.matches(b)] == everything
    assert matched(resource_type=TOPIC) == [literal, wildcard, prefixed, other_prefix]
    assert matched(resource_name="foo") == [literal, group]  # ANY pattern: the exact name, any type
    assert matched(resource_name="foo", pattern_type=LITERAL) == [literal, group]
    assert matched(resource_name="fo", pattern_type=PREFIXED) == [prefixed]
    assert matched(pattern_type=PREFIXED) == [prefixed, other_prefix]
    assert matched(pattern_type=Pt.MATCH) == everything
    assert matched(resource_type=TOPIC, resource_name="foo", pattern_type=Pt.MATCH) == [literal, wildcard, prefixed]
    assert matched(resource_name="*", pattern_type=Pt.MATCH) == [wildcard]
    assert matched(resource_name="*") == [wildcard]
    assert matched(principal="User:alice") == [group]
    assert matched(host="10.0.0.1") == [group]
    assert matched(host="*") == [literal, wildcard, prefixed, other_prefix]
    assert matched(operation=Op.DESCRIBE) == [group]
    assert matched(operation=Op.ALL) == []
    assert matched(permission_type=DENY) == [group]


def test_filter_validation():
    assert filter_error(ANY_FILTER) is None
    assert filter_error(AclBindingFilter(pattern_type=Pt.UNKNOWN)) == (ErrorCode.INVALID_REQUEST,
                                                                      "Unknown patternFilter.")
    assert filter_error(AclBindingFilter(resource_type=Rt.UNKNOWN))[1] == "Unknown patternFilter."
    assert filter_error(AclBindingFilter(operation=Op.UNKNOWN))[1] == "Unknown entryFilter."
    assert filter_error(AclBindingFilter(permission_type=AclPermissionType.UNKNOWN))[1] == "Unknown entryFilter."
    assert AclBindingFilter(operation=Op.UNKNOWN).is_unknown() and not ANY_FILTER.is_unknown()


GOOD = acl(TOPIC, "t", LITERAL, "User:bob", "*", Op.READ, ALLOW)


@pytest.mark.parametrize("changes,message", [
    ({}, None),
    ({"pattern_type": PREFIXED}, None),
    ({"resource_type": CLUSTER, "resource_name": CLUSTER_NAME}, None),
    ({"resource_type": CLUSTER, "resource_name": "other"},
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    ({"resource_name": ""}, "Invalid empty resource name"),
    ({"resource_type": Rt.ANY}, "Invalid resourceType ANY"),
    ({"pattern_type": Pt.MATCH}, "Invalid patternType MATCH"),
    ({"pattern_type": Pt.ANY}, "Invalid patternType ANY"),
    ({"operation": Op.ANY}, "Invalid operation ANY"),
    ({"permission_type": AclPermissionType.ANY}, "Invalid permissionType ANY"),
])
def test_creation_validation(changes, message):
    fields = {name: getattr(GOOD, name) for name in GOOD.__dataclass_fields__} | changes
    error = creation_error(AclBinding(**fields))
    if message is None:
        assert error is None
    else:
        assert error == (ErrorCode.INVALID_REQUEST, message)


def test_a_principal_without_a_type_is_refused():
    error = creation_error(acl(TOPIC, "t", LITERAL, "bob", "*", Op.READ, ALLOW))
    assert error is not None and error[0] == ErrorCode.INVALID_REQUEST


def test_super_users_setting():
    assert parse_super_users(" User:alice ; User:chris;;") == {"User:alice", "User:chris"}
    assert parse_super_users("") == frozenset() and parse_super_users(None) == frozenset()
    with pytest.raises(ValueError, match="principalType:principalName"):
        parse_super_users("alice")


def test_kafka_names():
    assert kafka_name(Rt.TRANSACTIONAL_ID) == "TransactionalId"
    assert kafka_name(Op.IDEMPOTENT_WRITE) == "IdempotentWrite"
    assert kafka_name(ALLOW) == "Allow"
    assert str(GOOD) == ("(pattern=ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL), "
                         "entry=(principal=User:bob, host=*, operation=READ, permissionType=ALLOW))")


# -- the index against a scan of every binding --

def _scan(bindings, super_users, allow_everyone, principal, host, op, rt, name) -> bool:
    """Kafka's rules applied to every binding, one by one."""
    if principal in super_users:
        return True
    applying = [b for b in bindings if b.resource_type == rt and (
        (b.pattern_type == LITERAL and b.resource_name in (name, "*"))
        or (b.pattern_type == PREFIXED and name.startswith(b.resource_name)))]
    if not applying:
        return allow_everyone
    verdicts = set()
    for b in applying:
        if b.principal not in (principal, "User:*") or b.host not in (host, "*"):
            continue
        if b.operation == Op.ALL or b.operation == op:
            verdicts.add(b.permission_type)
        elif b.permission_type == ALLOW and (
                (op == Op.DESCRIBE and b.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER))
                or (op == Op.DESCRIBE_CONFIGS and b.operation == Op.ALTER_CONFIGS)):
            verdicts.add(ALLOW)
    return DENY not in verdicts and ALLOW in verdicts


NAMES = st.sampled_from(["", "a", "ab", "abc", "abd", "b", "*", "ba"])
BINDINGS = st.builds(
    AclBinding,
    resource_type=st.sampled_from([TOPIC, GROUP]),
    resource_name=NAMES.filter(bool),
    pattern_type=st.sampled_from([LITERAL, PREFIXED]),
    principal=st.sampled_from(["User:a", "User:b", "User:*"]),
    host=st.sampled_from(["*", HOST1, HOST2]),
    operation=st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]),
    permission_type=st.sampled_from([ALLOW, DENY]),
)


@settings(max_examples=300, deadline=None)
@given(bindings=st.lists(BINDINGS, max_size=12), removed=st.lists(BINDINGS, max_size=4),
       allow_everyone=st.booleans(), principal=st.sampled_from(["User:a", "User:b", "User:s"]),
       host=st.sampled_from([HOST1, HOST2]), rt=st.sampled_from([TOPIC, GROUP]),
       name=NAMES.filter(bool),
       op=st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]))
def test_the_index_agrees_with_a_scan(bindings, removed, allow_everyone, principal, host, rt, name, op):
    authorizer = Authorizer(frozenset({"User:s"}), allow_everyone, bindings)
    for binding in removed:
        authorizer.remove(binding)
    remaining = [b for b in dict.fromkeys(bindings) if b not in removed]
    assert sorted(authorizer, key=AclBinding.sort_key) == sorted(remaining, key=AclBinding.sort_key)
    assert authorizer.authorize(principal, host, op, rt, name) == _scan(
        remaining, {"User:s"}, allow_everyone, principal, host, op, rt, name)


def test_thousands_of_acls():
    bindings = [acl(TOPIC, f"topic-{i}", LITERAL, f"User:u{i % 50}", "*", Op.READ, ALLOW) for i in range(3000)]
    bindings += [acl(TOPIC, f"app{i}-", PREFIXED, f"User:u{i}", "*", Op.WRITE, ALLOW) for i in range(2000)]
    authorizer = Authorizer(frozenset(), False, bindings)
    assert check(authorizer, "u7", Op.READ, TOPIC, "topic-107")
    assert not check(authorizer, "u8", Op.READ, TOPIC, "topic-107")
    assert check(authorizer, "u42", Op.WRITE, TOPIC, "app42-x")
    assert not check(authorizer, "u42", Op.WRITE, TOPIC, "app43-x")
    assert len(authorizer.bindings(AclBindingFilter(pattern_type=PREFIXED))) == 2000


def test_one_resource_pattern_replaced():
    literal = acl(TOPIC, "t", LITERAL, "User:a", "*", Op.READ, ALLOW)
    prefixed = acl(TOPIC, "t", PREFIXED, "User:a", "*", Op.READ, ALLOW)
    other = acl(GROUP, "t", LITERAL, "User:a", "*", Op.READ, ALLOW)
    authorizer = make(literal, prefixed, other)
    assert authorizer.pattern_bindings(TOPIC, "t", LITERAL) == [literal]
    replacement = acl(TOPIC, "t", LITERAL, "User:b", "*", Op.WRITE, DENY)
    authorizer.replace_pattern(TOPIC, "t", LITERAL, [replacement])
    assert set(authorizer) == {replacement, prefixed, other}
    authorizer.replace_pattern(TOPIC, "t", PREFIXED, [])
    assert set(authorizer) == {replacement, other}
    assert authorizer.pattern_bindings(TOPIC, "nothing", PREFIXED) == []
