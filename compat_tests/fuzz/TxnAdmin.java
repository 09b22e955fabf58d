import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.common.TopicPartition;

/**
 * The Java admin client's transaction operations, for the fuzz corpus (compat_tests/fuzz/capture.py), as
 * {@code kafka-transactions.sh} runs them: list (all, then with filters), describe, describe-producers,
 * and abort of the transaction a producer left open on partition 0 of the topic (Admin.abortTransaction
 * sends WriteTxnMarkers to the partition's leader).
 *
 * <p>Run from source: {@code java -cp 'compat_tests/java/lib/*' compat_tests/fuzz/TxnAdmin.java BOOTSTRAP TOPIC
 * TRANSACTIONAL_ID}. Prints one line per operation; exits non-zero when one fails.
 */
public final class TxnAdmin {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String transactionalId = args[2];
        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        config.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        TopicPartition partition = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(config)) {
            System.out.println("list: " + admin.listTransactions().all().get());
            System.out.println("list by state and producer id: " + admin.listTransactions(
                    new ListTransactionsOptions().filterStates(List.of(TransactionState.ONGOING))
                            .filterProducerIds(List.of(0L, 5L))).all().get());
            System.out.println("list by duration and id pattern: " + admin.listTransactions(
                    new ListTransactionsOptions().filterOnDuration(1L).filterOnTransactionalIdPattern("golden-.*"))
                    .all().get());
            System.out.println("describe: " + admin.describeTransactions(List.of(transactionalId)).all().get());
            Map<TopicPartition, PartitionProducerState> producers =
                    admin.describeProducers(List.of(partition, new TopicPartition(topic, 1))).all().get();
            System.out.println("describe producers: " + producers);
            for (ProducerState state : producers.get(partition).activeProducers()) {
                if (state.currentTransactionStartOffset().isEmpty()) continue;
                admin.abortTransaction(new AbortTransactionSpec(partition, state.producerId(),
                        (short) state.producerEpoch(), state.coordinatorEpoch().orElse(-1))).all().get();
                System.out.println("aborted: " + state);
            }
        }
    }
}
