import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.consumer.ConsumerConfig;

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
        List<GroupMember> members = new ArrayList<>();
        List<GroupMember> all = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            GroupMember m = new GroupMember(p, "consumer", topic, seen, null, 0);
            members.add(m);
            all.add(m);
            m.start("member-" + i);
        }
        try {
            String held = null;
            while ((held = GroupMember.covering(members, partitions)) == null || seen.size() < Math.min(leaveAfter, records)) {
                if (!GroupMember.check(members, deadline, "members " + count)) return 1;
                Thread.sleep(20);
            }
            System.out.println("members " + count + ": " + held);
            members.remove(members.size() - 1).stopAndJoin();
            while ((held = GroupMember.covering(members, partitions)) == null || seen.size() < records) {
                if (!GroupMember.check(members, deadline, "members " + members.size())) return 1;
                Thread.sleep(20);
            }
            System.out.println("members " + members.size() + ": " + held);
            long twice = seen.values().stream().filter(v -> v > 1).count();
            System.out.println("read " + seen.size() + " twice " + twice);
            return 0;
        } finally {
            for (GroupMember m : all) m.stopAndJoin();
        }
    }
}
