import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * One consumer-group member on its own thread: subscribe, poll, remember what it read, commit
 * synchronously after every non-empty poll, repeat until stopped. The driver's thread reads the member's
 * state (a snapshot the member thread publishes after every poll) and never touches the consumer.
 */
final class Member {
    final String name;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final List<String> topics;
    private final Thread thread;
    private final List<Object> consumed = new ArrayList<>();
    private final List<Object> assignments = new ArrayList<>();
    private final List<Object> revoked = new ArrayList<>();
    private final List<Object> lost = new ArrayList<>();
    private volatile List<Object> assignment = List.of();
    private volatile String memberId = null;
    private volatile int generation = -1;
    private volatile Throwable error;
    private volatile boolean stopping;
    private volatile String leave = "default";
    private volatile Duration closeTimeout = Duration.ofSeconds(15);
    private volatile boolean closed;

    Member(String name, Properties config, List<String> topics) {
        this.name = name;
        this.topics = topics;
        this.consumer = new KafkaConsumer<>(config);
        this.thread = new Thread(this::run, "member-" + name);
        this.thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    void stop(String leave, Duration timeout) throws InterruptedException {
        this.leave = leave;
        this.closeTimeout = timeout;
        stopping = true;
        thread.join(timeout.toMillis() + 5000);
        if (thread.isAlive()) throw new IllegalStateException("member " + name + " did not stop");
    }

    private static List<Object> partitions(Collection<TopicPartition> partitions) {
        List<TopicPartition> sorted = new ArrayList<>(partitions);
        sorted.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        List<Object> list = new ArrayList<>();
        for (TopicPartition tp : sorted) list.add(Arrays.asList(tp.topic(), tp.partition()));
        return list;
    }

    private void run() {
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                if (!partitions.isEmpty()) synchronized (Member.this) { revoked.add(partitions(partitions)); }
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                if (!partitions.isEmpty()) synchronized (Member.this) { lost.add(partitions(partitions)); }
            }
        };
        try {
            consumer.subscribe(topics, listener);
            while (!stopping) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                if (!records.isEmpty()) {
                    synchronized (this) {
                        for (ConsumerRecord<byte[], byte[]> r : records) {
                            consumed.add(Arrays.asList(r.topic(), r.partition(), r.offset(), Driver.b64(r.value())));
                        }
                    }
                    consumer.commitSync();
                }
                List<Object> now = partitions(consumer.assignment());
                synchronized (this) {
                    if (!now.equals(assignment)) {
                        assignment = now;
                        assignments.add(now);
                    }
                }
                memberId = consumer.groupMetadata().memberId();
                generation = consumer.groupMetadata().generationId();
            }
        } catch (Throwable failure) {
            error = failure;
        } finally {
            try {
                consumer.close(CloseOptions.groupMembershipOperation(
                        CloseOptions.GroupMembershipOperation.valueOf(leave.toUpperCase())).withTimeout(closeTimeout));
            } catch (Throwable failure) {
                if (error == null) error = failure;
            }
            closed = true;
        }
    }

    /** What the member has done so far; the records it read only when `withRecords`. */
    synchronized Map<String, Object> state(boolean withRecords) {
        Map<String, Object> state = Driver.map("name", name, "member_id", memberId, "generation", generation,
                "assignment", assignment, "assignments", new ArrayList<>(assignments),
                "revoked", new ArrayList<>(revoked), "lost", new ArrayList<>(lost),
                "consumed_count", consumed.size(), "closed", closed,
                "error", error == null ? null : Driver.describe(error));
        if (withRecords) state.put("consumed", new ArrayList<>(consumed));
        return state;
    }
}
