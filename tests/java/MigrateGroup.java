import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * An online migration (KIP-848): three members of one group start with
 * group.protocol=classic, are restarted one by one with group.protocol=consumer,
 * then one by one back to classic; each commits synchronously after every poll.
 *
 *   --bootstrap-server H:P --topic T --group G --partitions N --records R [--deadline-ms MS]
 *
 * After each step prints "STEP PROTOCOLS: p,p;p,p;p,p" once the members hold
 * disjoint partitions covering all N and have read more since the last step;
 * finally "read R twice D" (records read and committed, read and committed more
 * than once; a batch whose commit is refused counts as unread) and exits 0;
 * "timeout ..." / "failed ..." and exit 1.
 */
public final class MigrateGroup {
    public static void main(String[] argv) { ToolArgs.main(MigrateGroup::run, argv); }

    static final AtomicLong uncommitted = new AtomicLong();

    static final class Member implements Runnable {
        final String protocol;
        final KafkaConsumer<byte[], byte[]> consumer;
        final Map<String, Integer> seen;
        final AtomicBoolean stop = new AtomicBoolean();
        volatile Set<Integer> held = new TreeSet<>();
        volatile Throwable failed;
        Thread thread;

        Member(Properties base, String protocol, String topic, Map<String, Integer> seen) {
            Properties p = new Properties();
            p.putAll(base);
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
            if (protocol.equals("classic")) {
                p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
                p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            }
            this.protocol = protocol;
            this.consumer = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            this.consumer.subscribe(List.of(topic));
            this.seen = seen;
        }

        void start(String name) {
            thread = new Thread(this, name);
            thread.start();
        }

        void stopAndJoin() throws InterruptedException {
            stop.set(true);
            thread.join(30000);
        }

        public void run() {
            try {
                while (!stop.get()) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(50));
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        seen.merge(r.partition() + "@" + r.offset(), 1, Integer::sum);
                    }
                    if (!records.isEmpty()) {
                        try {
                            consumer.commitSync();
                        } catch (CommitFailedException e) {
                            // refused (the group moved to a new generation meanwhile): the
                            // batch counts as not read, its records come again
                            for (ConsumerRecord<byte[], byte[]> r : records) {
                                seen.computeIfPresent(r.partition() + "@" + r.offset(),
                                                      (k, v) -> v > 1 ? v - 1 : null);
                            }
                            uncommitted.addAndGet(records.count());
                        }
                        Thread.sleep(10);  // a slow reader: the roll happens while there is still reading
                    }
                    Set<Integer> now = new TreeSet<>();
                    for (TopicPartition tp : consumer.assignment()) now.add(tp.partition());
                    held = now;
                }
            } catch (Throwable t) {
                failed = t;
            } finally {
                consumer.close();
                held = new TreeSet<>();
            }
        }
    }

    static String covering(List<Member> members, int n) {
        Set<Integer> all = new TreeSet<>();
        int total = 0;
        List<String> parts = new ArrayList<>();
        for (Member m : members) {
            Set<Integer> held = m.held;
            all.addAll(held);
            total += held.size();
            parts.add(String.join(",", held.stream().map(String::valueOf).toList()));
        }
        return all.size() == n && total == n ? String.join(";", parts) : null;
    }

    static String protocols(List<Member> members) {
        return String.join(",", members.stream().map(m -> m.protocol).toList());
    }

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv, Set.of(), Set.of("--bootstrap-server", "--topic", "--group",
                "--partitions", "--records", "--deadline-ms"));
        String topic = a.require("--topic");
        int partitions = (int) a.getLong("--partitions", 0);
        long records = a.getLong("--records", 0);
        long deadline = System.currentTimeMillis() + a.getLong("--deadline-ms", 120000);

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("--bootstrap-server"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.require("--group"));
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "2");

        Map<String, Integer> seen = new ConcurrentHashMap<>();
        List<Member> members = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                Member m = new Member(p, "classic", topic, seen);
                members.add(m);
                m.start("classic-" + i);
            }
            if (!step(members, partitions, seen, deadline, "start")) return 1;
            for (String to : List.of("consumer", "classic")) {
                for (int i = 0; i < 3; i++) {
                    members.get(i).stopAndJoin();
                    if (members.get(i).failed != null) return fail(members.get(i).failed);
                    Member m = new Member(p, to, topic, seen);
                    members.set(i, m);
                    m.start(to + "-" + i);
                    if (!step(members, partitions, seen, deadline, "rolled")) return 1;
                }
            }
            while (seen.size() < records) {
                if (!check(members, deadline, "all records")) return 1;
                Thread.sleep(20);
            }
            long twice = seen.values().stream().filter(v -> v > 1).count();
            System.out.println("commits refused for " + uncommitted.get() + " records");
            System.out.println("read " + seen.size() + " twice " + twice);
            return 0;
        } finally {
            for (Member m : members) if (m.thread != null) m.stopAndJoin();
        }
    }

    static boolean step(List<Member> members, int partitions, Map<String, Integer> seen,
                        long deadline, String what) throws InterruptedException {
        int before = seen.size();
        String held;
        while ((held = covering(members, partitions)) == null || seen.size() <= before) {
            if (!check(members, deadline, what + " " + protocols(members))) return false;
            Thread.sleep(20);
        }
        System.out.println(what + " " + protocols(members) + ": " + held + " (read " + seen.size() + ")");
        return true;
    }

    static int fail(Throwable t) {
        System.out.println("failed " + t);
        t.printStackTrace();
        return 1;
    }

    static boolean check(List<Member> members, long deadline, String what) {
        for (Member m : members) {
            if (m.failed != null) {
                fail(m.failed);
                return false;
            }
        }
        if (System.currentTimeMillis() > deadline) {
            System.out.println("timeout waiting for " + what + " held " + covering(members, 1000));
            for (Member m : members) System.out.println("  " + m.protocol + " " + m.held);
            return false;
        }
        return true;
    }
}
