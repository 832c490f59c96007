import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;

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

    static GroupMember member(Properties base, String protocol, String topic, Map<String, Integer> seen) {
        Properties p = new Properties();
        p.putAll(base);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        }
        // a slow reader (10 ms after each poll): the roll happens while there is still reading
        return new GroupMember(p, protocol, topic, seen, uncommitted, 10);
    }

    static String protocols(List<GroupMember> members) {
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
        List<GroupMember> members = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                GroupMember m = member(p, "classic", topic, seen);
                members.add(m);
                m.start("classic-" + i);
            }
            if (!step(members, partitions, seen, deadline, "start")) return 1;
            for (String to : List.of("consumer", "classic")) {
                for (int i = 0; i < 3; i++) {
                    members.get(i).stopAndJoin();
                    if (members.get(i).failed != null) return GroupMember.fail(members.get(i).failed);
                    GroupMember m = member(p, to, topic, seen);
                    members.set(i, m);
                    m.start(to + "-" + i);
                    if (!step(members, partitions, seen, deadline, "rolled")) return 1;
                }
            }
            while (seen.size() < records) {
                if (!GroupMember.check(members, deadline, "all records")) return 1;
                Thread.sleep(20);
            }
            long twice = seen.values().stream().filter(v -> v > 1).count();
            System.out.println("commits refused for " + uncommitted.get() + " records");
            System.out.println("read " + seen.size() + " twice " + twice);
            return 0;
        } finally {
            for (GroupMember m : members) m.stopAndJoin();
        }
    }

    static boolean step(List<GroupMember> members, int partitions, Map<String, Integer> seen,
                        long deadline, String what) throws InterruptedException {
        int before = seen.size();
        String held;
        while ((held = GroupMember.covering(members, partitions)) == null || seen.size() <= before) {
            if (!GroupMember.check(members, deadline, what + " " + protocols(members))) return false;
            Thread.sleep(20);
        }
        System.out.println(what + " " + protocols(members) + ": " + held + " (read " + seen.size() + ")");
        return true;
    }
}
