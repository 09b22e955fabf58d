import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.ToNumberPolicy;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * Drives Apache Kafka's Java client (kafka-clients) for trafka's compatibility tests.
 *
 * <p>Reads one JSON command per line on stdin, {"id", "op", "bootstrap", ...}, runs it and writes one
 * JSON line on stdout: {"id", "ok": true, "result"} or {"id", "ok": false, "error": {"types", "codes",
 * "names", "message"}}, where types, codes and names follow the exception's cause chain (codes and names
 * are Kafka's, for the exceptions that carry a Kafka error). The first line written is
 * {"ready": true, "version"}. Commands run one at a time; group members ({@link Member}) run on their own
 * threads between commands. Keys, values and header values travel base64-encoded (null stays null).
 * Everything else the JVM prints goes to stderr.
 */
public final class Driver {
    /**
     * Commands parse into maps, lists, strings, booleans, nulls and numbers (Long, or Double when they have a
     * fraction or an exponent); answers are written on one line, nulls included, without HTML escapes.
     */
    static final Gson JSON = new GsonBuilder().setObjectToNumberStrategy(ToNumberPolicy.LONG_OR_DOUBLE)
            .serializeNulls().disableHtmlEscaping().create();

    private final PrintStream out;
    private final Map<String, Member> members = new ConcurrentHashMap<>();
    /** Share consumers by name, kept between commands (share_* commands). */
    private final Map<String, KafkaShareConsumer<byte[], byte[]>> shareConsumers = new ConcurrentHashMap<>();
    /** Transactional producers by name, kept between commands (txn_* commands). */
    private final Map<String, KafkaProducer<byte[], byte[]>> txnProducers = new ConcurrentHashMap<>();

    private Driver(PrintStream out) {
        this.out = out;
    }

    public static void main(String[] args) throws Exception {
        PrintStream protocol = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        new Driver(protocol).serve(new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)));
        System.exit(0);
    }

    private void serve(BufferedReader in) throws Exception {
        respond(map("ready", true, "version", AppInfoParser.getVersion()));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            Object id = null;
            try {
                Command command = new Command(JSON.fromJson(line, Map.class));
                id = command.get("id");
                respond(map("id", id, "ok", true, "result", run(command)));
            } catch (Throwable failure) {
                respond(map("id", id, "ok", false, "error", describe(failure)));
            }
        }
        for (Member member : members.values()) member.stop("default", Duration.ofSeconds(5));
        for (KafkaProducer<byte[], byte[]> producer : txnProducers.values()) producer.close(Duration.ofSeconds(2));
        for (KafkaShareConsumer<byte[], byte[]> consumer : shareConsumers.values()) consumer.close();
    }

    private synchronized void respond(Map<String, Object> message) {
        out.println(JSON.toJson(message));
    }

    private Object run(Command c) throws Exception {
        switch (c.string("op")) {
            case "produce": return produce(c);
            case "consume": return consume(c);
            case "group_consume": return groupConsume(c);
            case "watermarks": return watermarks(c);
            case "offsets_for_time": return offsetsForTime(c);
            case "create_topic": return createTopic(c);
            case "delete_topic": return withAdmin(c, a -> a.deleteTopics(List.of(c.string("topic"))).all().get());
            case "create_partitions": return withAdmin(c, a -> a.createPartitions(
                    Map.of(c.string("topic"), NewPartitions.increaseTo(c.integer("count")))).all().get());
            case "list_topics": return withAdmin(c, a -> new ArrayList<>(a.listTopics().names().get()));
            case "describe_topic": return describeTopic(c);
            case "describe_configs": return describeConfigs(c);
            case "describe_cluster": return describeCluster(c);
            case "list_groups": return listGroups(c);
            case "describe_groups": return describeGroups(c);
            case "delete_groups": return withAdmin(c, a -> a.deleteConsumerGroups(c.strings("groups")).all().get());
            case "list_group_offsets": return listGroupOffsets(c);
            case "alter_group_offsets": return alterGroupOffsets(c);
            case "delete_group_offsets": return deleteGroupOffsets(c);
            case "member_start": return memberStart(c);
            case "member_state": return member(c).state(false);
            case "member_stop": return memberStop(c);
            case "txn_open": return txnOpen(c);
            case "txn_begin": txnProducer(c).beginTransaction(); return null;
            case "txn_send": return txnSend(c);
            case "txn_send_offsets": return txnSendOffsets(c);
            case "txn_commit": txnProducer(c).commitTransaction(); return null;
            case "txn_abort": txnProducer(c).abortTransaction(); return null;
            case "txn_close": return txnClose(c);
            case "isolated_consume": return isolatedConsume(c);
            case "produce_consume_for": return produceConsumeFor(c);
            case "produce_for": return produceFor(c);
            case "consume_for": return consumeFor(c);
            case "describe_client_quotas": return describeClientQuotas(c);
            case "alter_client_quotas": return alterClientQuotas(c);
            case "share_open": return shareOpen(c);
            case "share_poll": return sharePoll(c);
            case "share_close": return shareClose(c);
            case "list_share_group_offsets": return listShareGroupOffsets(c);
            case "alter_share_group_offsets": return alterShareGroupOffsets(c);
            case "describe_share_groups": return describeShareGroups(c);
            case "delete_share_group_offsets": return withAdmin(c, a -> a.deleteShareGroupOffsets(
                    c.string("group_id"), new HashSet<>(c.strings("topics"))).all().get());
            default: throw new IllegalArgumentException("unknown op " + c.string("op"));
        }
    }

    // ------------------------------------------------------------------------------------------ produce

    private Object produce(Command c) throws Exception {
        Properties config = c.clientConfig();
        config.put("key.serializer", ByteArraySerializer.class.getName());
        config.put("value.serializer", ByteArraySerializer.class.getName());
        config.put("compression.type", c.string("compression", "none"));
        config.put("max.block.ms", "15000");
        config.put("request.timeout.ms", "10000");
        config.put("delivery.timeout.ms", "20000");
        config.putAll(c.settings());
        String topic = c.string("topic");
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config);
        try {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (Object item : c.list("messages")) {
                Command m = new Command(item);
                List<Header> headers = new ArrayList<>();
                for (Object header : m.list("headers")) {
                    List<?> pair = (List<?>) header;
                    headers.add(new RecordHeader((String) pair.get(0), unb64(pair.get(1))));
                }
                Integer partition = m.has("partition") ? m.integer("partition") : null;
                Long timestamp = m.has("timestamp") ? m.longValue("timestamp") : null;
                sent.add(producer.send(new ProducerRecord<>(topic, partition, timestamp, unb64(m.get("key")),
                        unb64(m.get("value")), headers)));
            }
            producer.flush();
            List<Object> deliveries = new ArrayList<>();
            for (Future<RecordMetadata> future : sent) {
                RecordMetadata metadata = future.get();
                deliveries.add(map("partition", metadata.partition(),
                        "offset", metadata.hasOffset() ? metadata.offset() : null));
            }
            return deliveries;
        } finally {
            producer.close(Duration.ofSeconds(5));
        }
    }

    // ------------------------------------------------------------------------------------------ consume

    static Properties consumerConfig(Command c) {
        Properties config = c.clientConfig();
        config.put("key.deserializer", ByteArrayDeserializer.class.getName());
        config.put("value.deserializer", ByteArrayDeserializer.class.getName());
        config.put("enable.auto.commit", "false");
        config.put("auto.offset.reset", "earliest");
        config.put("request.timeout.ms", "10000");
        config.put("default.api.timeout.ms", "15000");
        return config;
    }

    static Map<String, Object> record(ConsumerRecord<byte[], byte[]> r) {
        List<Object> headers = new ArrayList<>();
        for (Header header : r.headers()) headers.add(Arrays.asList(header.key(), b64(header.value())));
        return map("topic", r.topic(), "partition", r.partition(), "offset", r.offset(), "key", b64(r.key()),
                "value", b64(r.value()), "headers", headers, "timestamp", r.timestamp(),
                "timestamp_type", r.timestampType().name);
    }

    private static List<TopicPartition> partitionsOf(KafkaConsumer<?, ?> consumer, String topic, long deadline) {
        while (true) {
            List<PartitionInfo> found = consumer.partitionsFor(topic, Duration.ofSeconds(5));
            if (found != null && !found.isEmpty()) {
                List<TopicPartition> partitions = new ArrayList<>();
                for (PartitionInfo info : found) partitions.add(new TopicPartition(topic, info.partition()));
                partitions.sort(Comparator.comparingInt(TopicPartition::partition));
                return partitions;
            }
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no metadata for " + topic);
            sleep(50);
        }
    }

    private Object consume(Command c) {
        String topic = c.string("topic");
        int count = c.integer("count");
        long timeoutMs = c.longValue("timeout_ms", 20000);
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerConfig(c))) {
            List<TopicPartition> assignment = new ArrayList<>();
            if (c.has("partitions")) {
                for (Object p : c.list("partitions")) assignment.add(new TopicPartition(topic, ((Number) p).intValue()));
            } else {
                assignment = partitionsOf(consumer, topic, deadline);
            }
            consumer.assign(assignment);
            if (c.has("offset")) {
                for (TopicPartition tp : assignment) consumer.seek(tp, c.longValue("offset"));
            } else {
                consumer.seekToBeginning(assignment);
            }
            List<Map<String, Object>> records = new ArrayList<>();
            while (records.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) records.add(record(r));
            }
            if (records.size() < count) {
                throw new IllegalStateException("consumed " + records.size() + " of " + count + " records within "
                        + timeoutMs + " ms");
            }
            return records;
        }
    }

    // ------------------------------------------------------------------------------------------ client quotas

    /** Produce records of `record_size` bytes as fast as the producer takes them for `duration_ms`: the bytes
     * acknowledged by each `tick_ms` since the start, one entry per tick. */
    private Object produceFor(Command c) throws Exception {
        Properties config = c.clientConfig();
        config.put("key.serializer", ByteArraySerializer.class.getName());
        config.put("value.serializer", ByteArraySerializer.class.getName());
        config.putAll(c.settings());
        long durationMs = c.longValue("duration_ms");
        long tickMs = c.longValue("tick_ms", 1000);
        byte[] value = new byte[c.integer("record_size", 1000)];
        long[] acknowledged = new long[(int) (durationMs / tickMs) + 1];
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config);
        try {
            long start = System.currentTimeMillis();
            while (System.currentTimeMillis() - start < durationMs) {
                producer.send(new ProducerRecord<>(c.string("topic"), value), (metadata, error) -> {
                    long tick = (System.currentTimeMillis() - start) / tickMs;
                    if (error == null && tick < acknowledged.length) {
                        synchronized (acknowledged) { acknowledged[(int) tick] += value.length; }
                    }
                });
            }
        } finally {
            producer.close(Duration.ZERO);  // what is still buffered is dropped, not waited for
        }
        List<Object> ticks = new ArrayList<>();
        synchronized (acknowledged) { for (long bytes : acknowledged) ticks.add(bytes); }
        return ticks;
    }

    /** Read a topic from its beginning as fast as the consumer gets it for `duration_ms`: the record value bytes
     * received in each `tick_ms` since the start. */
    private Object consumeFor(Command c) {
        long durationMs = c.longValue("duration_ms");
        long tickMs = c.longValue("tick_ms", 1000);
        long[] received = new long[(int) (durationMs / tickMs) + 1];
        Properties config = consumerConfig(c);
        config.putAll(c.settings());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config)) {
            List<TopicPartition> assignment = partitionsOf(consumer, c.string("topic"),
                    System.currentTimeMillis() + 20000);
            consumer.assign(assignment);
            consumer.seekToBeginning(assignment);
            long start = System.currentTimeMillis();
            while (System.currentTimeMillis() - start < durationMs) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                    long tick = (System.currentTimeMillis() - start) / tickMs;
                    if (tick < received.length) received[(int) tick] += r.value() == null ? 0 : r.value().length;
                }
            }
        }
        List<Object> ticks = new ArrayList<>();
        for (long bytes : received) ticks.add(bytes);
        return ticks;
    }

    private static org.apache.kafka.common.quota.ClientQuotaEntity quotaEntity(Object item) {
        Map<String, String> entries = new HashMap<>();
        for (Object pair : (List<?>) item) entries.put((String) ((List<?>) pair).get(0), (String) ((List<?>) pair).get(1));
        return new org.apache.kafka.common.quota.ClientQuotaEntity(entries);
    }

    /** Admin.describeClientQuotas: `components` are [entity type, "exact"|"default"|"specified", name]. */
    private Object describeClientQuotas(Command c) throws Exception {
        List<org.apache.kafka.common.quota.ClientQuotaFilterComponent> components = new ArrayList<>();
        for (Object item : c.list("components")) {
            List<?> parts = (List<?>) item;
            String type = (String) parts.get(0);
            switch ((String) parts.get(1)) {
                case "exact": components.add(org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntity(
                        type, (String) parts.get(2))); break;
                case "default": components.add(org.apache.kafka.common.quota.ClientQuotaFilterComponent
                        .ofDefaultEntity(type)); break;
                default: components.add(org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntityType(type));
            }
        }
        org.apache.kafka.common.quota.ClientQuotaFilter filter = c.bool("strict", false)
                ? org.apache.kafka.common.quota.ClientQuotaFilter.containsOnly(components)
                : org.apache.kafka.common.quota.ClientQuotaFilter.contains(components);
        return withAdmin(c, a -> {
            List<Object> found = new ArrayList<>();
            a.describeClientQuotas(filter).entities().get().forEach((entity, values) -> found.add(map(
                    "entity", new TreeMap<>(entity.entries()), "values", new TreeMap<>(values))));
            found.sort(Comparator.comparing(Object::toString));
            return found;
        });
    }

    /** Admin.alterClientQuotas: `entries` are {entity: [[type, name], ...], ops: [[key, value or null], ...]};
     * the outcome of each entry: "ok" or its error's class and message. */
    private Object alterClientQuotas(Command c) throws Exception {
        List<org.apache.kafka.common.quota.ClientQuotaAlteration> alterations = new ArrayList<>();
        for (Object item : c.list("entries")) {
            Command entry = new Command(item);
            List<org.apache.kafka.common.quota.ClientQuotaAlteration.Op> ops = new ArrayList<>();
            for (Object op : entry.list("ops")) {
                List<?> parts = (List<?>) op;
                Object value = parts.get(1);
                ops.add(new org.apache.kafka.common.quota.ClientQuotaAlteration.Op((String) parts.get(0),
                        value == null ? null : ((Number) value).doubleValue()));
            }
            alterations.add(new org.apache.kafka.common.quota.ClientQuotaAlteration(quotaEntity(entry.get("entity")), ops));
        }
        org.apache.kafka.clients.admin.AlterClientQuotasOptions options =
                new org.apache.kafka.clients.admin.AlterClientQuotasOptions().validateOnly(c.bool("validate_only", false));
        return withAdmin(c, a -> {
            Map<String, Object> outcomes = new TreeMap<>();
            a.alterClientQuotas(alterations, options).values().forEach((entity, future) -> {
                String key = new TreeMap<>(entity.entries()).toString();
                try {
                    future.get();
                    outcomes.put(key, "ok");
                } catch (Exception e) {
                    Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
                    outcomes.put(key, cause.getClass().getSimpleName() + ": " + cause.getMessage());
                }
            });
            return outcomes;
        });
    }

    /** Subscribe in a group, read `count` records, commit exactly past them (synchronously) and leave. */
    private Object groupConsume(Command c) {
        int count = c.integer("count");
        long timeoutMs = c.longValue("timeout_ms", 30000);
        long deadline = System.currentTimeMillis() + timeoutMs;
        Properties config = consumerConfig(c);
        config.put("group.id", c.string("group_id"));
        config.put("group.protocol", c.string("protocol", "classic"));
        config.putAll(c.settings());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config)) {
            consumer.subscribe(c.strings("topics"));
            List<Map<String, Object>> records = new ArrayList<>();
            Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
            while (records.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    if (records.size() == count) break;
                    records.add(record(r));
                    positions.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1, c.string("metadata", "")));
                }
            }
            if (records.size() < count) {
                throw new IllegalStateException("consumed " + records.size() + " of " + count + " records within "
                        + timeoutMs + " ms");
            }
            if (c.bool("commit", true) && !positions.isEmpty()) consumer.commitSync(positions);
            return records;
        }
    }

    private Object watermarks(Command c) {
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerConfig(c))) {
            List<TopicPartition> partitions = partitionsOf(consumer, c.string("topic"),
                    System.currentTimeMillis() + 20000);
            Map<TopicPartition, Long> earliest = consumer.beginningOffsets(partitions);
            Map<TopicPartition, Long> latest = consumer.endOffsets(partitions);
            List<Object> result = new ArrayList<>();
            for (TopicPartition tp : partitions) {
                result.add(List.of(tp.partition(), earliest.get(tp), latest.get(tp)));
            }
            return result;
        }
    }

    private Object offsetsForTime(Command c) {
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerConfig(c))) {
            List<TopicPartition> partitions = partitionsOf(consumer, c.string("topic"),
                    System.currentTimeMillis() + 20000);
            Map<TopicPartition, Long> query = new HashMap<>();
            for (TopicPartition tp : partitions) query.put(tp, c.longValue("timestamp"));
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(query);
            List<Object> result = new ArrayList<>();
            for (TopicPartition tp : partitions) {
                OffsetAndTimestamp hit = found.get(tp);
                result.add(Arrays.asList(tp.partition(), hit == null ? null : hit.offset()));
            }
            return result;
        }
    }

    // ------------------------------------------------------------------------------------------ admin

    interface AdminAction {
        Object apply(Admin admin) throws Exception;
    }

    private static Object withAdmin(Command c, AdminAction action) throws Exception {
        Properties config = c.clientConfig();
        config.put("request.timeout.ms", "10000");
        config.put("default.api.timeout.ms", "20000");
        config.putAll(c.settings());
        try (Admin admin = Admin.create(config)) {
            return action.apply(admin);
        }
    }

    private Object createTopic(Command c) throws Exception {
        NewTopic topic = new NewTopic(c.string("topic"), c.integer("partitions"), (short) c.integer("replication_factor", 1));
        Map<String, String> configs = new HashMap<>();
        if (c.has("configs")) new Command(c.get("configs")).raw().forEach((k, v) -> configs.put(k, String.valueOf(v)));
        topic.configs(configs);
        return withAdmin(c, a -> a.createTopics(List.of(topic)).all().get());
    }

    private Object describeTopic(Command c) throws Exception {
        String name = c.string("topic");
        return withAdmin(c, a -> {
            TopicDescription description = a.describeTopics(List.of(name)).allTopicNames().get().get(name);
            List<Object> partitions = new ArrayList<>();
            for (TopicPartitionInfo p : description.partitions()) {
                partitions.add(map("partition", p.partition(), "leader", p.leader() == null ? null : p.leader().id(),
                        "replicas", nodeIds(p.replicas()), "isr", nodeIds(p.isr())));
            }
            return map("name", description.name(), "internal", description.isInternal(),
                    "topic_id", String.valueOf(description.topicId()), "partitions", partitions);
        });
    }

    private static List<Integer> nodeIds(List<Node> nodes) {
        List<Integer> ids = new ArrayList<>();
        for (Node node : nodes) ids.add(node.id());
        return ids;
    }

    private Object describeConfigs(Command c) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.valueOf(c.string("type", "TOPIC")),
                c.string("name"));
        return withAdmin(c, a -> {
            Config config = a.describeConfigs(List.of(resource)).all().get().get(resource);
            Map<String, Object> entries = new TreeMap<>();
            for (ConfigEntry entry : config.entries()) {
                entries.put(entry.name(), map("value", entry.value(), "source", entry.source().name(),
                        "read_only", entry.isReadOnly(), "sensitive", entry.isSensitive()));
            }
            return entries;
        });
    }

    private Object describeCluster(Command c) throws Exception {
        return withAdmin(c, a -> {
            DescribeClusterResult cluster = a.describeCluster();
            List<Object> nodes = new ArrayList<>();
            for (Node node : cluster.nodes().get()) {
                nodes.add(map("id", node.id(), "host", node.host(), "port", node.port(), "rack", node.rack()));
            }
            Node controller = cluster.controller().get();
            return map("cluster_id", cluster.clusterId().get(), "controller", controller == null ? null : controller.id(),
                    "nodes", nodes);
        });
    }

    private Object listGroups(Command c) throws Exception {
        return withAdmin(c, a -> {
            List<Object> groups = new ArrayList<>();
            for (GroupListing g : a.listGroups(ListGroupsOptions.forConsumerGroups()).all().get()) {
                groups.add(map("group_id", g.groupId(), "type", g.type().map(Enum::name).orElse(null),
                        "protocol", g.protocol(), "state", g.groupState().map(Enum::name).orElse(null),
                        "simple", g.isSimpleConsumerGroup()));
            }
            return groups;
        });
    }

    private Object describeGroups(Command c) throws Exception {
        return withAdmin(c, a -> {
            Map<String, Object> groups = new TreeMap<>();
            for (Map.Entry<String, ConsumerGroupDescription> entry :
                    a.describeConsumerGroups(c.strings("groups")).all().get().entrySet()) {
                ConsumerGroupDescription g = entry.getValue();
                List<Object> described = new ArrayList<>();
                for (MemberDescription m : g.members()) {
                    List<Object> assigned = new ArrayList<>();
                    for (TopicPartition tp : m.assignment().topicPartitions()) {
                        assigned.add(List.of(tp.topic(), tp.partition()));
                    }
                    described.add(map("member_id", m.consumerId(), "client_id", m.clientId(), "host", m.host(),
                            "group_instance_id", m.groupInstanceId().orElse(null), "assignment", assigned,
                            "member_epoch", m.memberEpoch().orElse(null)));
                }
                groups.put(entry.getKey(), map("state", g.groupState().name(), "type", g.type().name(),
                        "assignor", g.partitionAssignor(), "simple", g.isSimpleConsumerGroup(),
                        "coordinator", g.coordinator() == null ? null : g.coordinator().id(),
                        "group_epoch", g.groupEpoch().orElse(null), "members", described));
            }
            return groups;
        });
    }

    private Object listGroupOffsets(Command c) throws Exception {
        return withAdmin(c, a -> {
            List<Object> offsets = new ArrayList<>();
            Map<TopicPartition, OffsetAndMetadata> found =
                    a.listConsumerGroupOffsets(c.string("group_id")).partitionsToOffsetAndMetadata().get();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : found.entrySet()) {
                OffsetAndMetadata o = e.getValue();
                offsets.add(Arrays.asList(e.getKey().topic(), e.getKey().partition(),
                        o == null ? null : o.offset(), o == null ? null : o.metadata()));
            }
            return offsets;
        });
    }

    private Object alterGroupOffsets(Command c) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (Object item : c.list("offsets")) {
            List<?> entry = (List<?>) item;
            offsets.put(new TopicPartition((String) entry.get(0), ((Number) entry.get(1)).intValue()),
                    new OffsetAndMetadata(((Number) entry.get(2)).longValue()));
        }
        return withAdmin(c, a -> a.alterConsumerGroupOffsets(c.string("group_id"), offsets).all().get());
    }

    private Object deleteGroupOffsets(Command c) throws Exception {
        Set<TopicPartition> partitions = new HashSet<>();
        for (Object p : c.list("partitions")) partitions.add(new TopicPartition(c.string("topic"), ((Number) p).intValue()));
        return withAdmin(c, a -> a.deleteConsumerGroupOffsets(c.string("group_id"), partitions).all().get());
    }

    // ------------------------------------------------------------------------------------------ members

    private Object memberStart(Command c) {
        String name = c.string("name");
        if (members.containsKey(name)) throw new IllegalArgumentException("member " + name + " already exists");
        Properties config = consumerConfig(c);
        config.put("group.id", c.string("group_id"));
        config.put("group.protocol", c.string("protocol", "classic"));
        config.put("client.id", name);
        config.putAll(c.settings());
        Member member = new Member(name, config, c.strings("topics"));
        members.put(name, member);
        member.start();
        return member.state(false);
    }

    private Member member(Command c) {
        Member member = members.get(c.string("name"));
        if (member == null) throw new IllegalArgumentException("no member " + c.string("name"));
        return member;
    }

    private Object memberStop(Command c) throws InterruptedException {
        Member member = member(c);
        member.stop(c.string("leave", "default"), Duration.ofMillis(c.longValue("timeout_ms", 15000)));
        members.remove(member.name);
        return member.state(true);
    }


    // ------------------------------------------------------------------------------------------ transactions

    /** Create a transactional producer {name, transactional_id, settings} and run initTransactions. */
    private Object txnOpen(Command c) {
        String name = c.string("name");
        if (txnProducers.containsKey(name)) throw new IllegalArgumentException("producer " + name + " already exists");
        Properties config = c.clientConfig();
        config.put("key.serializer", ByteArraySerializer.class.getName());
        config.put("value.serializer", ByteArraySerializer.class.getName());
        config.put("transactional.id", c.string("transactional_id"));
        config.put("max.block.ms", "15000");
        config.put("request.timeout.ms", "10000");
        config.put("delivery.timeout.ms", "20000");
        config.putAll(c.settings());
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config);
        try {
            producer.initTransactions();
        } catch (RuntimeException failure) {
            producer.close(Duration.ZERO);
            throw failure;
        }
        txnProducers.put(name, producer);
        return null;
    }

    // ------------------------------------------------------------------------------------------ share consumers

    /** A KafkaShareConsumer {name, group_id, topics, settings} subscribed to its topics, kept for share_poll. */
    private Object shareOpen(Command c) {
        Properties config = c.clientConfig();
        config.put("group.id", c.string("group_id"));
        config.put("client.id", c.string("name"));
        config.put("key.deserializer", ByteArrayDeserializer.class.getName());
        config.put("value.deserializer", ByteArrayDeserializer.class.getName());
        config.putAll(c.settings());
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(config);
        consumer.subscribe(c.strings("topics"));
        KafkaShareConsumer<byte[], byte[]> previous = shareConsumers.put(c.string("name"), consumer);
        if (previous != null) previous.close();
        return null;
    }

    /**
     * Poll share consumer `name` for up to `timeout_ms` until it returns records (or the time is up); each
     * record is acknowledged with `ack` (accept, release, reject; none: left to the consumer's mode), then
     * acknowledgements are committed with commitSync when `commit`. Returns the records: partition, offset,
     * delivery count, value (base64).
     */
    private Object sharePoll(Command c) {
        KafkaShareConsumer<byte[], byte[]> consumer = shareConsumers.get(c.string("name"));
        if (consumer == null) throw new IllegalArgumentException("no share consumer " + c.string("name"));
        long deadline = System.currentTimeMillis() + c.longValue("timeout_ms", 10000);
        String ack = c.string("ack", null);
        List<Object> records = new ArrayList<>();
        do {
            ConsumerRecords<byte[], byte[]> polled = consumer.poll(Duration.ofMillis(
                    Math.max(1, Math.min(500, deadline - System.currentTimeMillis()))));
            for (ConsumerRecord<byte[], byte[]> r : polled) {
                records.add(map("partition", r.partition(), "offset", r.offset(),
                        "delivery_count", r.deliveryCount().map(Short::intValue).orElse(null), "value", b64(r.value())));
                if (ack != null) consumer.acknowledge(r, AcknowledgeType.valueOf(ack.toUpperCase()));
            }
            if (!records.isEmpty()) break;
        } while (System.currentTimeMillis() < deadline);
        if (c.bool("commit", false)) {
            Map<String, Object> errors = new TreeMap<>();
            consumer.commitSync().forEach((tip, error) -> error.ifPresent(e -> errors.put(tip.toString(), e.toString())));
            if (!errors.isEmpty()) throw new IllegalStateException("commitSync failed: " + errors);
        }
        return records;
    }

    private Object shareClose(Command c) {
        KafkaShareConsumer<byte[], byte[]> consumer = shareConsumers.remove(c.string("name"));
        if (consumer != null) consumer.close();
        return null;
    }

    /** Admin.listShareGroupOffsets of one share group: [topic, partition, start offset, leader epoch, lag]. */
    private Object listShareGroupOffsets(Command c) throws Exception {
        String groupId = c.string("group_id");
        return withAdmin(c, a -> {
            Map<TopicPartition, org.apache.kafka.clients.admin.SharePartitionOffsetInfo> found = a.listShareGroupOffsets(
                    Map.of(groupId, new org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec()))
                    .partitionsToOffsetInfo(groupId).get();
            List<List<Object>> offsets = new ArrayList<>();
            for (Map.Entry<TopicPartition, org.apache.kafka.clients.admin.SharePartitionOffsetInfo> e : found.entrySet()) {
                org.apache.kafka.clients.admin.SharePartitionOffsetInfo info = e.getValue();
                offsets.add(Arrays.asList(e.getKey().topic(), e.getKey().partition(),
                        info == null ? null : info.startOffset(),
                        info == null ? null : info.leaderEpoch().orElse(null),
                        info == null ? null : info.lag().orElse(null)));
            }
            offsets.sort(Comparator.comparing((List<Object> o) -> (String) o.get(0))
                    .thenComparing(o -> (Integer) o.get(1)));
            return offsets;
        });
    }

    /** Admin.describeShareGroups: {group id: [state, [[member client id, [[topic, partition], ...]], ...]]}. */
    private Object describeShareGroups(Command c) throws Exception {
        return withAdmin(c, a -> {
            Map<String, Object> out = new java.util.TreeMap<>();
            for (Map.Entry<String, org.apache.kafka.clients.admin.ShareGroupDescription> e : a.describeShareGroups(
                    c.strings("group_ids")).all().get().entrySet()) {
                List<Object> members = new ArrayList<>();
                for (org.apache.kafka.clients.admin.ShareMemberDescription m : e.getValue().members()) {
                    List<Object> assigned = new ArrayList<>();
                    for (TopicPartition tp : m.assignment().topicPartitions()) {
                        assigned.add(Arrays.asList(tp.topic(), tp.partition()));
                    }
                    members.add(Arrays.asList(m.clientId(), assigned));
                }
                out.put(e.getKey(), Arrays.asList(e.getValue().groupState().toString(), members));
            }
            return out;
        });
    }

    /** Admin.alterShareGroupOffsets: offsets [[topic, partition, start offset], ...]. */
    private Object alterShareGroupOffsets(Command c) throws Exception {
        Map<TopicPartition, Long> offsets = new HashMap<>();
        for (Object item : c.list("offsets")) {
            List<?> entry = (List<?>) item;
            offsets.put(new TopicPartition((String) entry.get(0), ((Number) entry.get(1)).intValue()),
                    ((Number) entry.get(2)).longValue());
        }
        return withAdmin(c, a -> a.alterShareGroupOffsets(c.string("group_id"), offsets).all().get());
    }

    private KafkaProducer<byte[], byte[]> txnProducer(Command c) {
        KafkaProducer<byte[], byte[]> producer = txnProducers.get(c.string("name"));
        if (producer == null) throw new IllegalArgumentException("no producer " + c.string("name"));
        return producer;
    }

    /** Send {topic, messages} in the open transaction, flush, and return where each record went. */
    private Object txnSend(Command c) throws Exception {
        KafkaProducer<byte[], byte[]> producer = txnProducer(c);
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (Object item : c.list("messages")) {
            Command m = new Command(item);
            Integer partition = m.has("partition") ? m.integer("partition") : null;
            sent.add(producer.send(new ProducerRecord<>(c.string("topic"), partition, unb64(m.get("key")),
                    unb64(m.get("value")))));
        }
        producer.flush();
        List<Object> deliveries = new ArrayList<>();
        for (Future<RecordMetadata> future : sent) {
            RecordMetadata metadata = future.get();
            deliveries.add(map("partition", metadata.partition(), "offset", metadata.hasOffset() ? metadata.offset() : null));
        }
        return deliveries;
    }

    /** sendOffsetsToTransaction {group_id, offsets: [[topic, partition, offset]]}. */
    private Object txnSendOffsets(Command c) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (Object item : c.list("offsets")) {
            List<?> entry = (List<?>) item;
            offsets.put(new TopicPartition((String) entry.get(0), ((Number) entry.get(1)).intValue()),
                    new OffsetAndMetadata(((Number) entry.get(2)).longValue()));
        }
        txnProducer(c).sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(c.string("group_id")));
        return null;
    }

    private Object txnClose(Command c) {
        KafkaProducer<byte[], byte[]> producer = txnProducers.remove(c.string("name"));
        if (producer != null) producer.close(Duration.ofMillis(c.longValue("timeout_ms", 5000)));
        return null;
    }

    /**
     * Read {topic, partitions} from the beginning by assignment with consumer `settings` (isolation.level)
     * until a record whose value is `until_value` (base64) has been read, or `count` records when given.
     */
    private Object isolatedConsume(Command c) {
        String topic = c.string("topic");
        long timeoutMs = c.longValue("timeout_ms", 20000);
        long deadline = System.currentTimeMillis() + timeoutMs;
        Properties config = consumerConfig(c);
        config.putAll(c.settings());
        String until = c.string("until_value", null);
        int count = c.integer("count", Integer.MAX_VALUE);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config)) {
            List<TopicPartition> assignment = new ArrayList<>();
            if (c.has("partitions")) {
                for (Object p : c.list("partitions")) assignment.add(new TopicPartition(topic, ((Number) p).intValue()));
            } else {
                assignment = partitionsOf(consumer, topic, deadline);
            }
            consumer.assign(assignment);
            consumer.seekToBeginning(assignment);
            List<Map<String, Object>> records = new ArrayList<>();
            boolean found = false;
            while (!found && records.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    records.add(record(r));
                    if (until != null && until.equals(b64(r.value()))) found = true;
                }
            }
            if (!found && records.size() < count) {
                throw new IllegalStateException("consumed " + records.size() + " records within " + timeoutMs
                        + " ms without the last one expected: " + JSON.toJson(records));
            }
            return records;
        }
    }

    // ------------------------------------------------------------------------------------------ streaming

    /** The connection and authentication counters of the Java client's selector (its `*-metrics` group). */
    static final Set<String> SESSION_METRICS = Set.of("connection-creation-total", "connection-close-total",
            "successful-authentication-total", "failed-authentication-total", "successful-reauthentication-total",
            "failed-reauthentication-total");

    static Map<String, Object> sessionMetrics(Map<MetricName, ? extends Metric> metrics) {
        Map<String, Object> found = new TreeMap<>();
        for (Map.Entry<MetricName, ? extends Metric> entry : metrics.entrySet()) {
            MetricName name = entry.getKey();
            if (SESSION_METRICS.contains(name.name()) && name.group().endsWith("-metrics")
                    && !name.group().contains("node")) {
                found.merge(name.name(), ((Number) entry.getValue().metricValue()).longValue(),
                        (a, b) -> (Long) a + (Long) b);
            }
        }
        return found;
    }

    /**
     * For {duration_ms}: a producer sends one record every {interval_ms} (values "0", "1", ...) to {topic} while a
     * consumer in group {group_id} reads it; then the consumer reads on until it has every record sent or
     * {drain_ms} passed. Returns what was sent and read (in order); the longest a record took from send to
     * receipt once the first record was read (the group had joined); the longest pause between two records read
     * while records were being sent; and both clients' connection and (re-)authentication counters. A failure
     * of either client fails the command.
     */
    private Object produceConsumeFor(Command c) throws Exception {
        String topic = c.string("topic");
        long durationMs = c.longValue("duration_ms");
        long intervalMs = c.longValue("interval_ms", 50);
        long drainMs = c.longValue("drain_ms", 20000);
        Properties producerConfig = c.clientConfig();
        producerConfig.put("key.serializer", ByteArraySerializer.class.getName());
        producerConfig.put("value.serializer", ByteArraySerializer.class.getName());
        producerConfig.put("linger.ms", "0");
        producerConfig.put("max.block.ms", "15000");
        producerConfig.put("delivery.timeout.ms", "20000");
        producerConfig.put("request.timeout.ms", "10000");
        Properties consumerConfig = consumerConfig(c);
        consumerConfig.put("group.id", c.string("group_id"));
        consumerConfig.put("fetch.max.wait.ms", "100");
        consumerConfig.putAll(c.settings());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerConfig);
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerConfig)) {
            consumer.subscribe(List.of(topic));
            Map<Long, Long> sentAt = new HashMap<>();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            List<Object> received = new ArrayList<>();
            long maxLatency = 0;
            long maxPause = 0;
            long lastReceipt = -1;
            long firstReceipt = -1;
            long start = System.currentTimeMillis();
            long nextSend = start;
            boolean sending = true;
            long drainDeadline = Long.MAX_VALUE;
            while (true) {
                long now = System.currentTimeMillis();
                if (sending && now - start >= durationMs) {
                    sending = false;
                    producer.flush();
                    for (Future<RecordMetadata> future : sent) future.get();
                    drainDeadline = System.currentTimeMillis() + drainMs;
                }
                if (!sending && (received.size() >= sent.size() || now > drainDeadline)) break;
                if (sending && now >= nextSend) {
                    long seq = sent.size();
                    sentAt.put(seq, now);
                    sent.add(producer.send(new ProducerRecord<>(topic, String.valueOf(seq).getBytes(StandardCharsets.UTF_8))));
                    nextSend += intervalMs;
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(Math.min(intervalMs, 20)))) {
                    long at = System.currentTimeMillis();
                    long seq = Long.parseLong(new String(r.value(), StandardCharsets.UTF_8));
                    received.add(seq);
                    Long when = sentAt.get(seq);
                    if (firstReceipt < 0) firstReceipt = at;
                    if (when != null && when >= firstReceipt) maxLatency = Math.max(maxLatency, at - when);
                    if (lastReceipt >= 0 && sending) maxPause = Math.max(maxPause, at - lastReceipt);
                    lastReceipt = at;
                }
            }
            if (!received.isEmpty()) consumer.commitSync();
            return map("sent", sent.size(), "received", received, "max_latency_ms", maxLatency,
                    "max_pause_ms", maxPause, "producer", sessionMetrics(producer.metrics()),
                    "consumer", sessionMetrics(consumer.metrics()));
        }
    }

    // ------------------------------------------------------------------------------------------ helpers

    static Map<String, Object> describe(Throwable failure) {
        List<Object> types = new ArrayList<>();
        List<Object> codes = new ArrayList<>();
        List<Object> names = new ArrayList<>();
        StringBuilder message = new StringBuilder();
        for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof ExecutionException && t.getCause() != null) continue;
            types.add(t.getClass().getName());
            if (t instanceof ApiException) {
                Errors error = Errors.forException(t);
                codes.add((int) error.code());
                names.add(error.name());
            }
            if (message.length() > 0) message.append(" <- ");
            message.append(t.getClass().getSimpleName()).append(": ").append(t.getMessage());
        }
        return map("types", types, "codes", codes, "names", names, "message", message.toString());
    }

    static String b64(byte[] data) {
        return data == null ? null : Base64.getEncoder().encodeToString(data);
    }

    static byte[] unb64(Object text) {
        return text == null ? null : Base64.getDecoder().decode((String) text);
    }

    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    /** An ordered map from alternating keys and values. */
    static Map<String, Object> map(Object... pairs) {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int i = 0; i < pairs.length; i += 2) map.put((String) pairs[i], pairs[i + 1]);
        return map;
    }

    /** A command's fields, with typed accessors; absent and null fields are the same. */
    static final class Command {
        private final Map<String, Object> fields;

        @SuppressWarnings("unchecked")
        Command(Object fields) {
            this.fields = (Map<String, Object>) fields;
        }

        Map<String, Object> raw() {
            return fields;
        }

        boolean has(String key) {
            return fields.get(key) != null;
        }

        Object get(String key) {
            return fields.get(key);
        }

        String string(String key) {
            Object value = fields.get(key);
            if (value == null) throw new IllegalArgumentException("missing " + key);
            return (String) value;
        }

        String string(String key, String otherwise) {
            return has(key) ? (String) fields.get(key) : otherwise;
        }

        int integer(String key) {
            return ((Number) fields.get(key)).intValue();
        }

        int integer(String key, int otherwise) {
            return has(key) ? integer(key) : otherwise;
        }

        long longValue(String key) {
            return ((Number) fields.get(key)).longValue();
        }

        long longValue(String key, long otherwise) {
            return has(key) ? longValue(key) : otherwise;
        }

        boolean bool(String key, boolean otherwise) {
            return has(key) ? (Boolean) fields.get(key) : otherwise;
        }

        List<?> list(String key) {
            return has(key) ? (List<?>) fields.get(key) : List.of();
        }

        List<String> strings(String key) {
            List<String> strings = new ArrayList<>();
            for (Object item : list(key)) strings.add((String) item);
            return strings;
        }

        /** The client settings a command passes through as Kafka properties, values as strings. */
        Properties settings() {
            Properties settings = new Properties();
            if (has("settings")) new Command(get("settings")).raw().forEach((k, v) -> settings.put(k, String.valueOf(v)));
            return settings;
        }

        /**
         * What every client a command makes starts from: its bootstrap servers, the driver's client id, and the
         * command's `properties` (Kafka client properties such as security.protocol, ssl.*, sasl.*), which the
         * settings a command sets for one kind of client may then override.
         */
        Properties clientConfig() {
            Properties config = new Properties();
            config.put("bootstrap.servers", string("bootstrap"));
            config.put("client.id", "trafka-compat-java");
            if (has("properties")) {
                new Command(get("properties")).raw().forEach((k, v) -> config.put(k, String.valueOf(v)));
            }
            return config;
        }
    }
}
