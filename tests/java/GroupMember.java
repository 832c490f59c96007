import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One member of a consumer group on a thread of its own, for the group
 * programs (ConsumerProtocolGroup, MigrateGroup): it polls, counts each record
 * it reads in the shared "partition@offset" map, commits synchronously after
 * every poll that returned records, and publishes the partitions it holds.
 *
 * With a refusal counter, a refused commit (the group moved on meanwhile)
 * takes the poll's records back out of the map (they come again) and counts
 * them there; without one, a refusal ends the member as a failure.
 */
final class GroupMember implements Runnable {
    final String protocol;
    final KafkaConsumer<byte[], byte[]> consumer;
    final Map<String, Integer> seen;
    final AtomicLong refused;
    final long pauseMs;
    final AtomicBoolean stop = new AtomicBoolean();
    volatile Set<Integer> held = new TreeSet<>();
    volatile Throwable failed;
    Thread thread;

    /** pauseMs: a slow reader's pause after each non-empty poll (0: none). */
    GroupMember(Properties props, String protocol, String topic, Map<String, Integer> seen,
                AtomicLong refused, long pauseMs) {
        this.protocol = protocol;
        this.consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        this.consumer.subscribe(List.of(topic));
        this.seen = seen;
        this.refused = refused;
        this.pauseMs = pauseMs;
    }

    void start(String name) {
        thread = new Thread(this, name);
        thread.start();
    }

    void stopAndJoin() throws InterruptedException {
        stop.set(true);
        if (thread != null) thread.join(30000);
    }

    public void run() {
        try {
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(50));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    seen.merge(r.partition() + "@" + r.offset(), 1, Integer::sum);
                }
                if (!records.isEmpty()) {
                    commit(records);
                    if (pauseMs > 0) Thread.sleep(pauseMs);
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

    private void commit(ConsumerRecords<byte[], byte[]> records) {
        try {
            consumer.commitSync();
        } catch (CommitFailedException e) {
            if (refused == null) throw e;
            for (ConsumerRecord<byte[], byte[]> r : records) {
                seen.computeIfPresent(r.partition() + "@" + r.offset(), (k, v) -> v > 1 ? v - 1 : null);
            }
            refused.addAndGet(records.count());
        }
    }

    /** "p,p;p,p" when every member holds partitions, disjoint and covering 0..n-1; else null. */
    static String covering(List<GroupMember> members, int n) {
        Set<Integer> all = new TreeSet<>();
        int total = 0;
        List<String> parts = new ArrayList<>();
        for (GroupMember m : members) {
            Set<Integer> held = m.held;
            if (held.isEmpty()) return null;
            all.addAll(held);
            total += held.size();
            parts.add(String.join(",", held.stream().map(String::valueOf).toList()));
        }
        return all.size() == n && total == n ? String.join(";", parts) : null;
    }

    /** False (after printing why) when a member failed or the deadline passed. */
    static boolean check(List<GroupMember> members, long deadline, String what) {
        for (GroupMember m : members) {
            if (m.failed != null) return fail(m.failed) == 0;
        }
        if (System.currentTimeMillis() > deadline) {
            System.out.println("timeout waiting for " + what);
            for (GroupMember m : members) System.out.println("  " + m.protocol + " " + m.held);
            return false;
        }
        return true;
    }

    /** Prints the failure; 1, a program's exit code for it. */
    static int fail(Throwable t) {
        System.out.println("failed " + t);
        t.printStackTrace();
        return 1;
    }
}
