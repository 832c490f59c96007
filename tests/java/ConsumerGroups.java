import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

/**
 * Like kafka-consumer-groups, through the Admin client (ListGroups, ConsumerGroupDescribe
 * falling back to DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups).
 *
 *   --bootstrap-server H:P [--admin-property k=v]... and one of
 *   --list                                  one group id per line, sorted
 *   --describe --group G [--state]          per partition, whitespace-separated, "-" when empty:
 *       GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
 *     with --state instead: GROUP COORDINATOR(ID) ASSIGNMENT-STRATEGY STATE #MEMBERS
 *   --reset-offsets --group G --topic T (--to-earliest|--to-latest|--to-offset N) [--execute]
 *       prints GROUP TOPIC PARTITION NEW-OFFSET; commits only with --execute (else a dry run)
 *   --delete --group G
 */
public final class ConsumerGroups {
    public static void main(String[] argv) { ToolArgs.main(ConsumerGroups::run, argv); }

    static final String ROW = "%-20s %-20s %-9s %-14s %-14s %-6s %-40s %-16s %s%n";

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv,
                Set.of("--list", "--describe", "--reset-offsets", "--delete", "--state", "--to-earliest",
                        "--to-latest", "--execute"),
                Set.of("--bootstrap-server", "--group", "--topic", "--to-offset", "--admin-property"));
        String action = a.action("--list", "--describe", "--reset-offsets", "--delete");
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("--bootstrap-server"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "consumer-groups-tool");
        p.putAll(a.keyValues("--admin-property"));
        try (Admin admin = Admin.create(p)) {
            switch (action) {
                case "--list":
                    TreeSet<String> ids = new TreeSet<>();
                    for (GroupListing g : admin.listGroups().all().get()) ids.add(g.groupId());
                    ids.forEach(System.out::println);
                    return 0;
                case "--describe":
                    return a.has("--state") ? state(admin, a.require("--group")) : describe(admin, a.require("--group"));
                case "--reset-offsets":
                    return reset(admin, a);
                default:
                    String group = a.require("--group");
                    admin.deleteConsumerGroups(List.of(group)).all().get();
                    System.out.println("Deletion of requested consumer groups ('" + group + "') was successful.");
                    return 0;
            }
        }
    }

    static ConsumerGroupDescription describeGroup(Admin admin, String group) throws Exception {
        return admin.describeConsumerGroups(List.of(group)).all().get().get(group);
    }

    static int state(Admin admin, String group) throws Exception {
        ConsumerGroupDescription d = describeGroup(admin, group);
        System.out.println("GROUP COORDINATOR(ID) ASSIGNMENT-STRATEGY STATE #MEMBERS");
        String strategy = d.partitionAssignor() == null || d.partitionAssignor().isEmpty() ? "-" : d.partitionAssignor();
        System.out.println(group + " " + d.coordinator().host() + ":" + d.coordinator().port() + "(" + d.coordinator().id()
                + ") " + strategy + " " + d.groupState() + " " + d.members().size());
        return 0;
    }

    static int describe(Admin admin, String group) throws Exception {
        ConsumerGroupDescription d = describeGroup(admin, group);
        Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        Map<TopicPartition, MemberDescription> owner = new HashMap<>();
        for (MemberDescription m : d.members()) {
            for (TopicPartition tp : m.assignment().topicPartitions()) owner.put(tp, m);
        }
        TreeMap<String, TopicPartition> rows = new TreeMap<>();
        for (TopicPartition tp : owner.keySet()) rows.put(key(tp), tp);
        for (TopicPartition tp : committed.keySet()) rows.put(key(tp), tp);
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        for (TopicPartition tp : rows.values()) latest.put(tp, OffsetSpec.latest());
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends =
                latest.isEmpty() ? Map.of() : admin.listOffsets(latest).all().get();

        if (d.members().isEmpty()) System.err.println("Consumer group '" + group + "' has no active members.");
        System.out.printf(ROW, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                "CONSUMER-ID", "HOST", "CLIENT-ID");
        for (TopicPartition tp : rows.values()) {
            OffsetAndMetadata c = committed.get(tp);
            long end = ends.get(tp).offset();
            MemberDescription m = owner.get(tp);
            System.out.printf(ROW, group, tp.topic(), tp.partition(), c == null ? "-" : c.offset(), end,
                    c == null ? "-" : String.valueOf(end - c.offset()),
                    m == null ? "-" : m.consumerId(), m == null ? "-" : m.host(), m == null ? "-" : m.clientId());
        }
        return 0;
    }

    static int reset(Admin admin, ToolArgs a) throws Exception {
        String group = a.require("--group");
        String topic = a.require("--topic");
        TopicDescription td = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        List<TopicPartition> tps = new ArrayList<>();
        for (TopicPartitionInfo info : td.partitions()) tps.add(new TopicPartition(topic, info.partition()));

        Map<TopicPartition, OffsetAndMetadata> target = new TreeMap<>((x, y) -> Integer.compare(x.partition(), y.partition()));
        String mode = a.action("--to-earliest", "--to-latest", "--to-offset");
        if (mode.equals("--to-offset")) {
            long offset = a.getLong("--to-offset", 0);
            for (TopicPartition tp : tps) target.put(tp, new OffsetAndMetadata(offset));
        } else {
            OffsetSpec spec = mode.equals("--to-earliest") ? OffsetSpec.earliest() : OffsetSpec.latest();
            Map<TopicPartition, OffsetSpec> query = new HashMap<>();
            for (TopicPartition tp : tps) query.put(tp, spec);
            admin.listOffsets(query).all().get().forEach((tp, info) -> target.put(tp, new OffsetAndMetadata(info.offset())));
        }
        if (a.has("--execute")) admin.alterConsumerGroupOffsets(group, target).all().get();
        System.out.println("GROUP TOPIC PARTITION NEW-OFFSET");
        target.forEach((tp, o) -> System.out.println(group + " " + tp.topic() + " " + tp.partition() + " " + o.offset()));
        return 0;
    }

    static String key(TopicPartition tp) { return String.format("%s\0%010d", tp.topic(), tp.partition()); }
}
