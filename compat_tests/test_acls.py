"""ACLs through unmodified clients: confluent-kafka's AdminClient, kafka-python's KafkaAdminClient and the Java
admin client create, describe and delete ACLs on a trafka broker with the StandardAuthorizer, authenticated
with SASL/PLAIN as a super user; a user without rights on the cluster is refused; the ACLs are there again
after a restart; and ``trafka acls`` manages them on trafka and on Apache Kafka 4.4 alike."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.ports import free_port
from compat_tests.security import PLAIN_JAAS

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SETTINGS = {
    "authorizer.class.name": AUTHORIZER,
    "super.users": "User:admin",
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    """A trafka broker with the authorizer and a SASL_PLAINTEXT listener (admin, a super user, and alice), and
    that listener's address."""
    data_dir = Path(tmp_path_factory.mktemp("acls"))
    port = free_port()
    process = BrokerProcess(data_dir, name="trafka", overrides={
        **SETTINGS, "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}"})
    process.start()
    try:
        yield process, f"127.0.0.1:{port}"
    finally:
        process.close()


def confluent_admin(bootstrap: str, user: str = "admin"):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"})


def confluent_binding(name: str, principal: str = "User:alice", pattern: str = "LITERAL", operation: str = "READ",
                      permission: str = "ALLOW", resource: str = "TOPIC"):
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(ResourceType[resource], name, ResourcePatternType[pattern], principal, "*",
                      AclOperation[operation], AclPermissionType[permission])


def confluent_filter(**fields):
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBindingFilter(ResourceType[fields.get("resource", "ANY")], fields.get("name"),
                            ResourcePatternType[fields.get("pattern", "ANY")], fields.get("principal"),
                            fields.get("host"), AclOperation[fields.get("operation", "ANY")],
                            AclPermissionType[fields.get("permission", "ANY")])


def confluent_describe(admin, **fields) -> list[tuple]:
    found = admin.describe_acls(confluent_filter(**fields), request_timeout=10).result(timeout=15)
    return sorted((b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
                   b.permission_type.name) for b in found)


def test_confluent_kafka_admin(broker):
    _, bootstrap = broker
    admin = confluent_admin(bootstrap)
    bindings = [confluent_binding("ck-orders"), confluent_binding("ck-", pattern="PREFIXED", operation="WRITE"),
                confluent_binding("ck-group", resource="GROUP", permission="DENY", principal="User:*")]
    for future in admin.create_acls(bindings, request_timeout=10).values():
        assert future.result(timeout=15) is None
    assert confluent_describe(admin, principal="User:alice") == [
        ("TOPIC", "ck-", "PREFIXED", "User:alice", "*", "WRITE", "ALLOW"),
        ("TOPIC", "ck-orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")]
    # MATCH: every binding that applies to the topic ck-orders.
    assert [b[1] for b in confluent_describe(admin, resource="TOPIC", name="ck-orders", pattern="MATCH")] == [
        "ck-", "ck-orders"]
    deleted = admin.delete_acls([confluent_filter(name="ck-group"), confluent_filter(name="nothing")],
                                request_timeout=10)
    results = [future.result(timeout=15) for future in deleted.values()]
    assert sorted(len(r) for r in results) == [0, 1]
    assert confluent_describe(admin, name="ck-group") == []
    cleaned = admin.delete_acls([confluent_filter(name="ck-orders"), confluent_filter(name="ck-")],
                                request_timeout=10)
    for future in cleaned.values():  # leave it clean for the tests after this one
        future.result(timeout=15)


def test_confluent_kafka_invalid_binding_and_refusal(broker):
    from confluent_kafka import KafkaException

    _, bootstrap = broker
    admin = confluent_admin(bootstrap)
    future = admin.create_acls([confluent_binding("other", resource="BROKER")], request_timeout=10)
    with pytest.raises(KafkaException) as refused:
        next(iter(future.values())).result(timeout=15)
    assert refused.value.args[0].name() == "INVALID_REQUEST"
    assert "The only valid name for the CLUSTER resource is kafka-cluster" in refused.value.args[0].str()
    alice = confluent_admin(bootstrap, "alice")
    created = alice.create_acls([confluent_binding("alice-own")], request_timeout=10)
    with pytest.raises(KafkaException) as denied:
        next(iter(created.values())).result(timeout=15)
    assert denied.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"


def test_kafka_python_admin(broker):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafka.errors import ClusterAuthorizationFailedError

    _, bootstrap = broker
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username="admin", sasl_plain_password="admin-secret")
    try:
        acl = ACL(principal="User:bob", host="*", operation=ACLOperation.READ,
                  permission_type=ACLPermissionType.ALLOW,
                  resource_pattern=ResourcePattern(ResourceType.TOPIC, "kp-topic", ACLResourcePatternType.LITERAL))
        prefixed = ACL(principal="User:bob", host="10.0.0.1", operation=ACLOperation.WRITE,
                       permission_type=ACLPermissionType.DENY,
                       resource_pattern=ResourcePattern(ResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED))
        created = admin.create_acls([acl, prefixed])
        assert len(created["succeeded"]) == 2 and not created["failed"]
        wanted = ACLFilter(principal="User:bob", host=None, operation=ACLOperation.ANY,
                           permission_type=ACLPermissionType.ANY,
                           resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, "kp-topic",
                                                                  ACLResourcePatternType.MATCH))
        found, error = admin.describe_acls(wanted)
        assert error.errno == 0
        assert sorted((a.resource_pattern.resource_name, a.host, a.operation.name, a.permission_type.name)
                      for a in found) == [("kp-", "10.0.0.1", "WRITE", "DENY"), ("kp-topic", "*", "READ", "ALLOW")]
        everything_of_bob = ACLFilter(principal="User:bob", host=None, operation=ACLOperation.ANY,
                                      permission_type=ACLPermissionType.ANY,
                                      resource_pattern=ResourcePatternFilter(ResourceType.ANY, None,
                                                                             ACLResourcePatternType.ANY))
        [(_, matched, error)] = admin.delete_acls([everything_of_bob])
        assert error.errno == 0 and len(matched) == 2
        found, _ = admin.describe_acls(everything_of_bob)
        assert found == []
    finally:
        admin.close()
    alice = KafkaAdminClient(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username="alice", sasl_plain_password="alice-secret")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            alice.describe_acls(everything_of_bob)
    finally:
        alice.close()


JAVA_PROGRAM = textwrap.dedent("""
    import java.util.*;
    import org.apache.kafka.clients.admin.*;
    import org.apache.kafka.common.acl.*;
    import org.apache.kafka.common.resource.*;

    public class AclProgram {
        public static void main(String[] args) throws Exception {
            Properties props = new Properties();
            props.put("bootstrap.servers", args[0]);
            props.put("security.protocol", "SASL_PLAINTEXT");
            props.put("sasl.mechanism", "PLAIN");
            props.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required "
                + "username=\\"admin\\" password=\\"admin-secret\\";");
            try (Admin admin = Admin.create(props)) {
                AclBinding read = new AclBinding(new ResourcePattern(ResourceType.TOPIC, "java-topic", PatternType.LITERAL),
                    new AccessControlEntry("User:carol", "*", AclOperation.READ, AclPermissionType.ALLOW));
                AclBinding group = new AclBinding(new ResourcePattern(ResourceType.GROUP, "java-", PatternType.PREFIXED),
                    new AccessControlEntry("User:carol", "*", AclOperation.READ, AclPermissionType.ALLOW));
                AclBinding txn = new AclBinding(new ResourcePattern(ResourceType.TRANSACTIONAL_ID, "java-tx", PatternType.LITERAL),
                    new AccessControlEntry("User:carol", "*", AclOperation.WRITE, AclPermissionType.ALLOW));
                admin.createAcls(List.of(read, group, txn)).all().get();
                AclBindingFilter carol = new AclBindingFilter(ResourcePatternFilter.ANY,
                    new AccessControlEntryFilter("User:carol", null, AclOperation.ANY, AclPermissionType.ANY));
                List<String> described = new ArrayList<>();
                for (AclBinding b : admin.describeAcls(carol).values().get()) described.add(b.toString());
                Collections.sort(described);
                System.out.println("described " + described.size());
                for (String line : described) System.out.println(line);
                AclBindingFilter groups = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.GROUP, "java-app", PatternType.MATCH), AccessControlEntryFilter.ANY);
                Collection<AclBinding> deleted = admin.deleteAcls(List.of(groups)).all().get();
                System.out.println("deleted " + deleted.size());
                System.out.println("left " + admin.describeAcls(carol).values().get().size());
                try {
                    admin.createAcls(List.of(new AclBinding(new ResourcePattern(ResourceType.TOPIC, "", PatternType.LITERAL),
                        new AccessControlEntry("User:carol", "*", AclOperation.READ, AclPermissionType.ALLOW)))).all().get();
                    System.out.println("created an empty name");
                } catch (Exception e) {
                    System.out.println("refused " + e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
                }
                admin.deleteAcls(List.of(carol)).all().get();
            }
        }
    }
""")


def test_java_admin(broker, tmp_path):
    from compat_tests.clients import java_classpath

    _, bootstrap = broker
    source = tmp_path / "AclProgram.java"
    source.write_text(JAVA_PROGRAM)
    result = subprocess.run(["java", "-cp", java_classpath(), str(source), bootstrap], check=False,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "described 3"
    assert ("(pattern=ResourcePattern(resourceType=GROUP, name=java-, patternType=PREFIXED), "
            "entry=(principal=User:carol, host=*, operation=READ, permissionType=ALLOW))") in lines
    assert lines[4:] == ["deleted 1", "left 2",
                         "refused InvalidRequestException: Invalid empty resource name"]


def test_acls_are_kept_across_a_restart(broker):
    process, bootstrap = broker
    admin = confluent_admin(bootstrap)
    for future in admin.create_acls([confluent_binding("kept"), confluent_binding("kept-", pattern="PREFIXED")],
                                    request_timeout=10).values():
        future.result(timeout=15)
    before = confluent_describe(admin, name="kept")
    process.restart()
    admin = confluent_admin(bootstrap)
    assert confluent_describe(admin, name="kept") == before == [
        ("TOPIC", "kept", "LITERAL", "User:alice", "*", "READ", "ALLOW")]
    assert len(confluent_describe(admin, pattern="PREFIXED", name="kept-")) == 1
    for future in admin.delete_acls([confluent_filter(name="kept"), confluent_filter(name="kept-")]).values():
        future.result(timeout=15)
    process.restart(crash=True)  # the deletion was written before it was answered
    assert confluent_describe(confluent_admin(bootstrap), name="kept") == []


def test_an_unknown_authorizer_class_stops_the_start(tmp_path):
    result = subprocess.run([sys.executable, "-m", "trafka", "--data-dir", str(tmp_path), "--port", "0",
                             "--override", "authorizer.class.name=com.example.MyAuthorizer"],
                            check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "authorizer.class.name=com.example.MyAuthorizer" in result.stderr



# -- trafka acls, on trafka and on Kafka 4.4 -------------------------------------------------------------------


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory):
    """Apache Kafka 4.4 with the StandardAuthorizer, whose PLAINTEXT clients (ANONYMOUS) are super users."""
    from compat_tests.reference import KafkaBroker

    reference = KafkaBroker(Path(tmp_path_factory.mktemp("acls-kafka")) / "kafka", overrides={
        "authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    reference.start()
    try:
        yield reference
    finally:
        reference.close()


def acls_tool(bootstrap: str, *arguments: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "trafka", "acls", *arguments, "--bootstrap-server", bootstrap]
    if config is not None:
        command += ["--command-config", str(config)]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)


def _tool_session(bootstrap: str, config: Path | None) -> list[str]:
    """add, list (every way), remove: what the tool printed at each step (its exit codes checked)."""
    def run(*arguments: str) -> str:
        result = acls_tool(bootstrap, *arguments, config=config)
        assert result.returncode == 0, result.stderr
        return result.stdout

    outputs = [
        run("add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "describe",
            "--topic", "tool-orders", "--group", "tool-group"),
        run("add", "--deny-principal", "User:eve", "--allow-host", "10.0.0.1", "--deny-host", "10.0.0.2",
            "--topic", "tool-", "--resource-pattern-type", "prefixed"),
        run("add", "--allow-principal", "User:bob", "--producer", "--idempotent", "--topic", "tool-out",
            "--transactional-id", "tool-tx"),
        run("list"),
        run("list", "--topic", "tool-orders"),
        run("list", "--topic", "tool-orders-1", "--resource-pattern-type", "match"),
        run("list", "--principal", "User:bob"),
        run("remove", "--allow-principal", "User:alice", "--operation", "Describe", "--topic", "tool-orders"),
        run("remove", "--topic", "tool-", "--resource-pattern-type", "prefixed", "--force"),
        run("list", "--topic", "tool-orders", "--group", "tool-group", "--topic", "tool-"),
    ]
    for leftover in ("tool-orders", "tool-out", "tool-group", "tool-tx"):
        kind = "--group" if leftover == "tool-group" else "--transactional-id" if leftover == "tool-tx" else "--topic"
        run("remove", kind, leftover)
    run("remove", "--cluster")
    outputs.append(run("list"))
    return outputs


def test_the_tool_on_trafka_and_on_kafka(broker, kafka, tmp_path):
    _, bootstrap = broker
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                      'username="admin" password="admin-secret";\n')
    on_trafka = _tool_session(bootstrap, config)
    on_kafka = _tool_session(kafka.bootstrap, None)
    assert on_trafka == on_kafka
    assert on_trafka[4] == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=tool-orders, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n"
        " \t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n")
    matched = on_trafka[5]
    assert "name=tool-orders, patternType=LITERAL" not in matched  # another name
    assert "name=tool-, patternType=PREFIXED" in matched and "User:eve, host=10.0.0.2, operation=ALL, " \
        "permissionType=DENY" in matched
    assert "operation=IDEMPOTENT_WRITE" in on_trafka[6] and "name=tool-tx" in on_trafka[6]
    assert on_trafka[-1] == ""


def test_the_tool_refusals(broker, tmp_path):
    _, bootstrap = broker
    alice = tmp_path / "alice.properties"
    alice.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                     'username="alice" password="alice-secret";\n')
    refused = acls_tool(bootstrap, "list", config=alice)
    assert refused.returncode == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    unknown = acls_tool(bootstrap, "add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t",
                        config=alice)
    assert unknown.returncode == 1 and "--operation Fly" in unknown.stderr
