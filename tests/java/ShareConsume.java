import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A KIP-932 share consumer (KafkaShareConsumer) in a share group. Prints one line per
 * record it is given, "value TAB offset TAB deliveryCount TAB action", flushed at once, where
 * action is how it acknowledged the record: accept, release or reject.
 *
 * --bootstrap-server H:P --group G --topic T
 *   [--release PREFIX]   explicitly release records whose value starts with PREFIX
 *   [--reject PREFIX]    explicitly reject them
 *   [--hold]             print the first records it gets and never acknowledge or poll
 *                        again (a member that hangs, to be killed, holding its records)
 *   [--idle-ms N]        exit (closing the consumer) after N ms with no record, counted from
 *                        the end of the last poll that gave records (its acknowledgement
 *                        committed: a slow commit does not eat into the wait for a
 *                        redelivery) (default 5000)
 *   [--first-record-ms N] before the first record, wait up to N ms (default 120000), then
 *                        exit 1 with "no record within N ms" on stderr: a test passes less
 *                        than its own limit, so it fails with that instead of a kill
 *   [--max-records N]    max.poll.records
 * Without --release/--reject, acknowledgement is implicit (each poll accepts the last
 * poll's records); with either, explicit (acknowledge each record, commitSync per poll, and
 * a line closing the poll: "committed" once the broker confirmed every acknowledgement of
 * the poll, else "not committed", so a reader can tell which records each answer covers).
 */
public final class ShareConsume {
    public static void main(String[] argv) { ToolArgs.main(ShareConsume::run, argv); }

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv, Set.of("--hold"), Set.of("--bootstrap-server", "--group",
                "--topic", "--release", "--reject", "--idle-ms", "--first-record-ms",
                "--max-records"));
        String release = a.get("--release");
        String reject = a.get("--reject");
        boolean explicit = release != null || reject != null;
        long idleMs = a.getLong("--idle-ms", 5000);
        long firstRecordMs = a.getLong("--first-record-ms", 120_000);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("--bootstrap-server"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.require("--group"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, explicit ? "explicit" : "implicit");
        if (a.has("--max-records")) p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, a.get("--max-records"));
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p)) {
            consumer.subscribe(List.of(a.require("--topic")));
            long lastRecord = System.currentTimeMillis();
            long wait = firstRecordMs;  // until the first record: the test produces once we joined
            boolean any = false;
            while (System.currentTimeMillis() - lastRecord < wait) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                any = true;
                for (ConsumerRecord<String, String> r : records) {
                    String value = r.value();
                    AcknowledgeType type = AcknowledgeType.ACCEPT;
                    if (release != null && value.startsWith(release)) type = AcknowledgeType.RELEASE;
                    if (reject != null && value.startsWith(reject)) type = AcknowledgeType.REJECT;
                    if (explicit) consumer.acknowledge(r, type);
                    out.println(value + "\t" + r.offset() + "\t" + r.deliveryCount().orElse((short) -1)
                            + "\t" + type.name().toLowerCase());
                }
                if (a.has("--hold")) {
                    out.println("holding");
                    Thread.sleep(Long.MAX_VALUE);
                }
                if (explicit) {
                    boolean confirmed;
                    try {
                        confirmed = consumer.commitSync().values().stream()
                                .allMatch(Optional::isEmpty);
                    } catch (KafkaException e) {
                        confirmed = false;
                    }
                    out.println(confirmed ? "committed" : "not committed");
                }
                // after the poll's processing and commit: the idle wait is for the
                // next record, not eaten by a slow commit on a loaded machine
                lastRecord = System.currentTimeMillis();
                wait = idleMs;
            }
            if (!any) {
                System.err.println("no record within " + firstRecordMs + " ms");
                return 1;
            }
        }
        return 0;
    }
}
