import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.ListConfigResourcesOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The Admin client's log-dir and config-resource calls (what kafka-reassign-partitions
 * with log dirs, kafka-log-dirs and kafka-configs use).
 *
 *   --bootstrap-server H:P and one of
 *   --alter --broker B --dir PATH --partition TOPIC:P [--partition TOPIC:P]...
 *       TOPIC-P\tOK  or  TOPIC-P\tERROR ExceptionClass   (AlterReplicaLogDirs, one line per replica)
 *   --describe --broker B
 *       DIR\tTOPIC-P\tsize=N\tlag=N\tfuture=true|false   (DescribeLogDirs, sorted;
 *       DIR\tERROR ExceptionClass for a dir with an error)
 *   --describe-replica --broker B --partition TOPIC:P
 *       current=DIR\tcurrentLag=N\tfuture=DIR|null\tfutureLag=N   (describeReplicaLogDirs)
 *   --list-config-resources [--type TOPIC|BROKER|BROKER_LOGGER|GROUP|CLIENT_METRICS]...
 *       TYPE\tNAME   (ListConfigResources, sorted)
 */
public final class LogDirs {
    public static void main(String[] argv) { ToolArgs.main(LogDirs::run, argv); }

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv, Set.of("--alter", "--describe", "--describe-replica",
                "--list-config-resources"), Set.of("--bootstrap-server", "--broker", "--dir", "--partition", "--type"));
        String action = a.action("--alter", "--describe", "--describe-replica", "--list-config-resources");
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("--bootstrap-server"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "log-dirs");
        try (Admin admin = Admin.create(p)) {
            if (action.equals("--alter")) {
                int broker = Integer.parseInt(a.require("--broker"));
                Map<TopicPartitionReplica, String> moves = new HashMap<>();
                List<TopicPartitionReplica> order = new ArrayList<>();
                for (String tp : a.all("--partition")) {
                    TopicPartition parsed = partition(tp);
                    TopicPartitionReplica r = new TopicPartitionReplica(parsed.topic(), parsed.partition(), broker);
                    moves.put(r, a.require("--dir"));
                    order.add(r);
                }
                Map<TopicPartitionReplica, KafkaFuture<Void>> results = admin.alterReplicaLogDirs(moves).values();
                for (TopicPartitionReplica r : order) {
                    String outcome;
                    try {
                        results.get(r).get();
                        outcome = "OK";
                    } catch (Exception e) {
                        outcome = "ERROR " + (e.getCause() != null ? e.getCause() : e).getClass().getSimpleName();
                    }
                    System.out.println(r.topic() + "-" + r.partition() + "\t" + outcome);
                }
                return 0;
            }
            if (action.equals("--describe")) {
                int broker = Integer.parseInt(a.require("--broker"));
                Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(broker)).allDescriptions().get().get(broker);
                List<String> lines = new ArrayList<>();
                for (Map.Entry<String, LogDirDescription> d : dirs.entrySet()) {
                    if (d.getValue().error() != null) {
                        lines.add(d.getKey() + "\tERROR " + d.getValue().error().getClass().getSimpleName());
                        continue;
                    }
                    for (Map.Entry<TopicPartition, ReplicaInfo> r : d.getValue().replicaInfos().entrySet()) {
                        ReplicaInfo i = r.getValue();
                        lines.add(d.getKey() + "\t" + r.getKey() + "\tsize=" + i.size() + "\tlag=" + i.offsetLag()
                                + "\tfuture=" + i.isFuture());
                    }
                }
                lines.sort(null);
                lines.forEach(System.out::println);
                return 0;
            }
            if (action.equals("--describe-replica")) {
                TopicPartition tp = partition(a.require("--partition"));
                TopicPartitionReplica r = new TopicPartitionReplica(tp.topic(), tp.partition(),
                        Integer.parseInt(a.require("--broker")));
                ReplicaLogDirInfo info = admin.describeReplicaLogDirs(List.of(r)).all().get().get(r);
                System.out.println("current=" + info.getCurrentReplicaLogDir() + "\tcurrentLag=" + info.getCurrentReplicaOffsetLag()
                        + "\tfuture=" + info.getFutureReplicaLogDir() + "\tfutureLag=" + info.getFutureReplicaOffsetLag());
                return 0;
            }
            Set<ConfigResource.Type> types = new HashSet<>();
            for (String t : a.all("--type")) types.add(ConfigResource.Type.valueOf(t));
            List<String> lines = new ArrayList<>();
            for (ConfigResource r : admin.listConfigResources(types, new ListConfigResourcesOptions()).all().get()) {
                lines.add(r.type() + "\t" + r.name());
            }
            lines.sort(null);
            lines.forEach(System.out::println);
            return 0;
        }
    }

    static TopicPartition partition(String s) {
        int at = s.lastIndexOf(':');
        if (at < 0) throw new ToolArgs.UsageException("--partition is TOPIC:P, got " + s);
        return new TopicPartition(s.substring(0, at), Integer.parseInt(s.substring(at + 1)));
    }
}
