import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * An exactly-once consume-transform-produce loop, as Kafka Streams and every
 * "EOS" application run it with the plain clients (KIP-98, KIP-447):
 * read_committed consumer, transactional producer, offsets committed with
 * sendOffsetsToTransaction in the same transaction as the output.
 *
 *   --bootstrap-server H:P --input T --output T --group G --transactional-id ID
 *   [--abort-every N]   abort every Nth transaction on purpose (its output must
 *                       never reach a read_committed reader) and re-read its input
 *   [--idle-ms MS]      stop after this long without input (default 5000)
 *   [--max-poll-records N]  records per transaction at most (default 20)
 *
 * Each output record is the input's value prefixed with "out:", same key.
 * Prints "progress N" after each commit, "committed N" (transactions) and
 * "aborted M" at the end; meant to be killed with SIGKILL at any point and
 * restarted.
 */
public final class Eos {
    public static void main(String[] argv) { ToolArgs.main(Eos::run, argv); }

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv, Set.of(), Set.of("--bootstrap-server", "--input", "--output",
                "--group", "--transactional-id", "--abort-every", "--idle-ms", "--max-poll-records"));
        String bootstrap = a.require("--bootstrap-server");
        String output = a.require("--output");
        long abortEvery = a.getLong("--abort-every", 0);
        long idleMs = a.getLong("--idle-ms", 5000);

        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, a.require("--group"));
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, a.get("--max-poll-records", "20"));
        c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        c.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.require("--transactional-id"));
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "10000");

        long committed = 0, aborted = 0, transactions = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            producer.initTransactions();
            consumer.subscribe(List.of(a.require("--input")));
            long lastInput = System.currentTimeMillis();
            while (System.currentTimeMillis() - lastInput < idleMs) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                lastInput = System.currentTimeMillis();
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    byte[] v = r.value();
                    byte[] out = new byte[v.length + 4];
                    System.arraycopy("out:".getBytes(), 0, out, 0, 4);
                    System.arraycopy(v, 0, out, 4, v.length);
                    producer.send(new ProducerRecord<>(output, r.key(), out));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                transactions++;
                if (abortEvery > 0 && transactions % abortEvery == 0) {
                    producer.flush();  // the aborted records do reach the log
                    producer.abortTransaction();
                    aborted++;
                    // read the aborted input again: back to the committed offsets
                    for (TopicPartition tp : next.keySet()) {
                        OffsetAndMetadata at = consumer.committed(Set.of(tp)).get(tp);
                        consumer.seek(tp, at == null ? 0 : at.offset());
                    }
                } else {
                    producer.commitTransaction();
                    committed++;
                    System.out.println("progress " + committed);
                    System.out.flush();
                }
            }
        }
        System.out.println("committed " + committed);
        System.out.println("aborted " + aborted);
        return 0;
    }
}
