import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Members of one KIP-848 consumer group (group.protocol=consumer), each on
 * its own thread with its own KafkaConsumer, committing synchronously after
 * each poll's records:
 *
 *   --bootstrap-server H:P --topic T --group G --partitions N --records R
 *   [--members M]      how many join (default 3)
 *   [--leave-after K]  the last member leaves once K records are read (default R/2)
 *   [--deadline-ms MS] give up after this long (default 60000)
 *
 * Prints "members M: p,p;p,p;..." once the M members hold disjoint sets of
 * partitions covering all N, then "members M-1: ..." the same after one left,
 * then "read R twice 0" (records read, and read more than once) and exits 0;
 * "timeout ..." and exit 1 when the deadline passes first.
 */
public final class ConsumerProtocolGroup {
    public static void main(String[] argv) { ToolArgs.main(ConsumerProtocolGroup::run, argv); }

    static final class Member implements Runnable {
        final KafkaConsumer<byte[], byte[]> consumer;
        final Map<String, Integer> seen;
        final AtomicBoolean stop = new AtomicBoolean();
        volatile Set<Integer> held = new TreeSet<>();
        volatile Throwable failed;

        Member(Properties props, String topic, Map<String, Integer> seen) {
            this.consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(),
                                                new ByteArrayDeserializer());
            this.consumer.subscribe(List.of(topic));
            this.seen = seen;
        }

        public void run() {
            try {
                while (!stop.get()) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        seen.merge(r.partition() + "@" + r.offset(), 1, Integer::sum);
                    }
                    if (!records.isEmpty()) consumer.commitSync();
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

    /** "p,p;p,p" when the members' partitions are disjoint and cover 0..n-1, else null. */
    static String covering(List<Member> members, int n) {
        Set<Integer> all = new TreeSet<>();
        int total = 0;
        List<String> parts = new ArrayList<>();
        for (Member m : members) {
            Set<Integer> held = m.held;
            if (held.isEmpty()) return null;
            all.addAll(held);
            total += held.size();
            parts.add(String.join(",", held.stream().map(String::valueOf).toList()));
        }
        return all.size() == n && total == n ? String.join(";", parts) : null;
    }

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv, Set.of(), Set.of("--bootstrap-server", "--topic", "--group",
                "--partitions", "--records", "--members", "--leave-after", "--deadline-ms"));
        String topic = a.require("--topic");
        int partitions = (int) a.getLong("--partitions", 0);
        long records = a.getLong("--records", 0);
        int count = (int) a.getLong("--members", 3);
        long leaveAfter = a.getLong("--leave-after", records / 2);
        long deadline = System.currentTimeMillis() + a.getLong("--deadline-ms", 60000);

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("--bootstrap-server"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.require("--group"));
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "20");

        Map<String, Integer> seen = new ConcurrentHashMap<>();
        List<Member> members = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Member m = new Member(p, topic, seen);
            members.add(m);
            Thread t = new Thread(m, "member-" + i);
            threads.add(t);
            t.start();
        }
        try {
            String held = null;
            while ((held = covering(members, partitions)) == null || seen.size() < Math.min(leaveAfter, records)) {
                if (!check(members, deadline, "members " + count)) return 1;
                Thread.sleep(20);
            }
            System.out.println("members " + count + ": " + held);
            Member leaver = members.remove(members.size() - 1);
            leaver.stop.set(true);
            threads.get(threads.size() - 1).join();
            while ((held = covering(members, partitions)) == null || seen.size() < records) {
                if (!check(members, deadline, "members " + members.size())) return 1;
                Thread.sleep(20);
            }
            System.out.println("members " + members.size() + ": " + held);
            long twice = seen.values().stream().filter(v -> v > 1).count();
            System.out.println("read " + seen.size() + " twice " + twice);
            return 0;
        } finally {
            for (Member m : members) m.stop.set(true);
            for (Thread t : threads) t.join(30000);
        }
    }

    static boolean check(List<Member> members, long deadline, String what) {
        for (Member m : members) {
            if (m.failed != null) {
                System.out.println("failed " + m.failed);
                m.failed.printStackTrace();
                return false;
            }
        }
        if (System.currentTimeMillis() > deadline) {
            System.out.println("timeout waiting for " + what);
            return false;
        }
        return true;
    }
}
