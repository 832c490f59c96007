import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Like kafka-console-consumer: prints one record value per line on stdout.
 *
 * Without --group it does NOT join a group (unlike the real tool): it assign()s every
 * partition of the topic (or just --partition) and seeks, so it works against a broker
 * that has no group APIs yet. With --group it subscribe()s (or assigns --partition with
 * that group.id) and commits exactly the offsets it printed, so lag checks are exact.
 * Exits 0 after --max-messages, or after --timeout-ms without a new record, printing
 * "Processed a total of N messages" on stderr like the real tool.
 *
 *   --bootstrap-server H:P --topic T [--from-beginning] [--group G] [--partition N]
 *   [--offset earliest|latest|N] [--max-messages N] [--timeout-ms N]
 *   [--consumer-property k=v]... [--property print.key|print.partition|print.offset|print.timestamp=true]
 *   [--property key.separator=SEP (default TAB)]
 */
public final class ConsoleConsumer {
    public static void main(String[] argv) { ToolArgs.main(ConsoleConsumer::run, argv); }

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv, Set.of("--from-beginning"), Set.of("--bootstrap-server", "--topic",
                "--group", "--partition", "--offset", "--max-messages", "--timeout-ms", "--consumer-property",
                "--property"));
        String topic = a.require("--topic");
        String group = a.get("--group");
        Integer partition = a.has("--partition") ? (int) a.getLong("--partition", 0) : null;
        long maxMessages = a.getLong("--max-messages", Long.MAX_VALUE);
        long timeoutMs = a.getLong("--timeout-ms", Long.MAX_VALUE);
        String offset = a.get("--offset", a.has("--from-beginning") ? "earliest" : "latest");
        boolean explicitOffset = !offset.equals("earliest") && !offset.equals("latest");
        if (group != null && partition == null && explicitOffset) {
            throw new ToolArgs.UsageException("--offset N with --group needs --partition");
        }

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("--bootstrap-server"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "console-consumer");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, offset.equals("earliest") ? "earliest" : "latest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.putAll(a.keyValues("--consumer-property"));
        Formatter formatter = new Formatter(a.keyValues("--property"));

        PrintStream out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out)),
                false, StandardCharsets.UTF_8);
        long count = 0;
        try (KafkaConsumer<byte[], byte[]> consumer =
                     new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            if (group != null && partition == null) {
                consumer.subscribe(List.of(topic));
            } else {
                List<TopicPartition> tps = partition != null
                        ? List.of(new TopicPartition(topic, partition))
                        : partitionsOf(consumer, topic, Math.min(timeoutMs, 30_000));
                consumer.assign(tps);
                if (offset.equals("earliest")) consumer.seekToBeginning(tps);
                else if (offset.equals("latest")) consumer.seekToEnd(tps);
                else for (TopicPartition tp : tps) consumer.seek(tp, Long.parseLong(offset));
            }

            Map<TopicPartition, OffsetAndMetadata> printed = new HashMap<>();
            long idleSince = System.currentTimeMillis();
            while (count < maxMessages) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                if (records.isEmpty()) {
                    if (System.currentTimeMillis() - idleSince >= timeoutMs) break;
                    continue;
                }
                idleSince = System.currentTimeMillis();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    out.println(formatter.format(r));
                    printed.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    if (++count >= maxMessages) break;
                }
                out.flush();
                if (group != null && !printed.isEmpty()) {
                    consumer.commitSync(printed);
                    printed.clear();
                }
            }
        } finally {
            out.flush();
            System.err.println("Processed a total of " + count + " messages");
        }
        return 0;
    }

    /** All partitions of the topic; the metadata may lag a fresh CreateTopics, so retry briefly. */
    static List<TopicPartition> partitionsOf(KafkaConsumer<?, ?> consumer, String topic, long waitMs)
            throws InterruptedException {
        long deadline = System.currentTimeMillis() + waitMs;
        while (true) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic);
            if (infos != null && !infos.isEmpty()) {
                List<TopicPartition> tps = new ArrayList<>();
                for (PartitionInfo info : infos) tps.add(new TopicPartition(topic, info.partition()));
                tps.sort((x, y) -> Integer.compare(x.partition(), y.partition()));
                return tps;
            }
            if (System.currentTimeMillis() >= deadline) {
                throw new IllegalStateException("topic " + topic + " not found (no partitions in metadata)");
            }
            Thread.sleep(100);
        }
    }

    /** Kafka's DefaultMessageFormatter order: timestamp, partition, offset, key, value. */
    static final class Formatter {
        final boolean timestamp, partition, offset, key;
        final String separator;

        Formatter(Map<String, String> props) {
            timestamp = Boolean.parseBoolean(props.getOrDefault("print.timestamp", "false"));
            partition = Boolean.parseBoolean(props.getOrDefault("print.partition", "false"));
            offset = Boolean.parseBoolean(props.getOrDefault("print.offset", "false"));
            key = Boolean.parseBoolean(props.getOrDefault("print.key", "false"));
            separator = props.getOrDefault("key.separator", "\t");
        }

        String format(ConsumerRecord<byte[], byte[]> r) {
            StringBuilder sb = new StringBuilder();
            if (timestamp) sb.append(r.timestampType()).append(':').append(r.timestamp()).append(separator);
            if (partition) sb.append("Partition:").append(r.partition()).append(separator);
            if (offset) sb.append("Offset:").append(r.offset()).append(separator);
            if (key) sb.append(text(r.key())).append(separator);
            return sb.append(text(r.value())).toString();
        }

        static String text(byte[] b) { return b == null ? "null" : new String(b, StandardCharsets.UTF_8); }
    }
}
