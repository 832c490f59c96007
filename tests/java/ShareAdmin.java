import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.common.TopicPartition;

/**
 * The Admin client's share-group calls, one per run, for the tests to check the
 * broker's answers (Kafka's exceptions by class name):
 *
 *   ShareAdmin BOOTSTRAP alter GROUP TOPIC:PARTITION=OFFSET...   AlterShareGroupOffsets
 *   ShareAdmin BOOTSTRAP delete-offsets GROUP TOPIC...            DeleteShareGroupOffsets
 *   ShareAdmin BOOTSTRAP delete GROUP                             DeleteGroups
 *   ShareAdmin BOOTSTRAP offsets GROUP      "TOPIC PARTITION START-OFFSET LAG" per line
 *   ShareAdmin BOOTSTRAP describe GROUP     "STATE #MEMBERS"
 *
 * Prints "OK" or "ERROR <exception class>" (for alter/delete-offsets one line per
 * partition/topic too), exit code 0 either way: the broker's answer is the output.
 */
public final class ShareAdmin {
    public static void main(String[] argv) { ToolArgs.main(ShareAdmin::run, argv); }

    static String error(Throwable t) {
        Throwable c = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
        return "ERROR " + c.getClass().getSimpleName();
    }

    static int run(String[] argv) throws Exception {
        if (argv.length < 3) throw new ToolArgs.UsageException("ShareAdmin BOOTSTRAP ACTION GROUP ...");
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, argv[0]);
        String group = argv[2];
        try (Admin admin = Admin.create(p)) {
            switch (argv[1]) {
                case "alter": {
                    Map<TopicPartition, Long> offsets = new HashMap<>();
                    for (int i = 3; i < argv.length; i++) {
                        String[] tp = argv[i].split("=");
                        int colon = tp[0].lastIndexOf(':');
                        offsets.put(new TopicPartition(tp[0].substring(0, colon),
                                Integer.parseInt(tp[0].substring(colon + 1))), Long.parseLong(tp[1]));
                    }
                    var result = admin.alterShareGroupOffsets(group, offsets);
                    TreeMap<String, TopicPartition> sorted = new TreeMap<>();
                    for (TopicPartition tp : offsets.keySet()) sorted.put(tp.toString(), tp);
                    for (TopicPartition tp : sorted.values()) {
                        try {
                            result.partitionResult(tp).get();
                            System.out.println(tp + " OK");
                        } catch (ExecutionException e) {
                            System.out.println(tp + " " + error(e));
                        }
                    }
                    System.out.println(all(result.all()));
                    return 0;
                }
                case "delete-offsets": {
                    Set<String> topics = Set.of(java.util.Arrays.copyOfRange(argv, 3, argv.length));
                    var result = admin.deleteShareGroupOffsets(group, topics);
                    for (String t : new java.util.TreeSet<>(topics)) {
                        try {
                            result.topicResult(t).get();
                            System.out.println(t + " OK");
                        } catch (ExecutionException e) {
                            System.out.println(t + " " + error(e));
                        }
                    }
                    System.out.println(all(result.all()));
                    return 0;
                }
                case "delete":
                    System.out.println(all(admin.deleteShareGroups(List.of(group)).all()));
                    return 0;
                case "offsets": {
                    Map<TopicPartition, SharePartitionOffsetInfo> got = admin.listShareGroupOffsets(
                            Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group).get();
                    TreeMap<String, String> lines = new TreeMap<>();
                    got.forEach((tp, info) -> lines.put(tp.toString(), tp.topic() + " " + tp.partition() + " "
                            + (info == null ? "-" : info.startOffset() + " "
                               + info.lag().map(String::valueOf).orElse("-"))));
                    lines.values().forEach(System.out::println);
                    return 0;
                }
                case "describe": {
                    try {
                        ShareGroupDescription d = admin.describeShareGroups(List.of(group)).all().get().get(group);
                        System.out.println(d.groupState() + " " + d.members().size());
                    } catch (ExecutionException e) {
                        System.out.println(error(e));
                    }
                    return 0;
                }
                default:
                    throw new ToolArgs.UsageException("unknown action " + argv[1]);
            }
        }
    }

    static String all(org.apache.kafka.common.KafkaFuture<Void> f) {
        try {
            f.get();
            return "OK";
        } catch (Exception e) {
            return error(e);
        }
    }
}
