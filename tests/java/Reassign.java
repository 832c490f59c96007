import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;

/**
 * What kafka-reassign-partitions does through the Admin client (Kafka 2.4+):
 * start, cancel and list partition reassignments.
 *
 *   --bootstrap-server H:P and one of
 *   --reassign TOPIC:PARTITION=B1,B2,...   (repeatable)   alterPartitionReassignments
 *       TOPIC-PARTITION: started              or  TOPIC-PARTITION: ERROR ExceptionName: message
 *   --cancel TOPIC:PARTITION               (repeatable)   alterPartitionReassignments(empty)
 *       TOPIC-PARTITION: cancelled            or  TOPIC-PARTITION: ERROR ExceptionName: message
 *   --list                                                 listPartitionReassignments
 *       TOPIC-PARTITION replicas=a,b adding=c removing=d   (one line per partition, sorted)
 * Exit code 1 when any partition had an error.
 */
public final class Reassign {
    public static void main(String[] argv) { ToolArgs.main(Reassign::run, argv); }

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv, Set.of("--list"), Set.of("--bootstrap-server", "--reassign", "--cancel"));
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("--bootstrap-server"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "reassign");
        try (Admin admin = Admin.create(p)) {
            if (a.has("--list")) {
                Map<TopicPartition, PartitionReassignment> running = admin.listPartitionReassignments().reassignments().get();
                List<String> lines = new ArrayList<>();
                running.forEach((tp, r) -> lines.add(tp + " replicas=" + join(r.replicas()) + " adding="
                        + join(r.addingReplicas()) + " removing=" + join(r.removingReplicas())));
                lines.sort(String::compareTo);
                lines.forEach(System.out::println);
                return 0;
            }
            Map<TopicPartition, Optional<NewPartitionReassignment>> wanted = new HashMap<>();
            for (String spec : a.all("--reassign")) {
                String[] parts = spec.split("=", 2);
                if (parts.length != 2) throw new ToolArgs.UsageException("--reassign wants TOPIC:PARTITION=B1,B2: " + spec);
                List<Integer> replicas = new ArrayList<>();
                for (String b : parts[1].split(",")) replicas.add(Integer.parseInt(b.trim()));
                wanted.put(partition(parts[0]), Optional.of(new NewPartitionReassignment(replicas)));
            }
            for (String spec : a.all("--cancel")) wanted.put(partition(spec), Optional.empty());
            if (wanted.isEmpty()) throw new ToolArgs.UsageException("--reassign, --cancel or --list is required");
            Map<TopicPartition, KafkaFuture<Void>> results = admin.alterPartitionReassignments(wanted).values();
            int code = 0;
            List<String> lines = new ArrayList<>();
            for (Map.Entry<TopicPartition, KafkaFuture<Void>> e : results.entrySet()) {
                String done = wanted.get(e.getKey()).isPresent() ? "started" : "cancelled";
                try {
                    e.getValue().get();
                    lines.add(e.getKey() + ": " + done);
                } catch (ExecutionException ex) {
                    code = 1;
                    lines.add(e.getKey() + ": ERROR " + ex.getCause().getClass().getSimpleName() + ": " + ex.getCause().getMessage());
                }
            }
            lines.sort(String::compareTo);
            lines.forEach(System.out::println);
            return code;
        }
    }

    static TopicPartition partition(String spec) {
        int colon = spec.lastIndexOf(':');
        if (colon < 0) throw new ToolArgs.UsageException("want TOPIC:PARTITION, got " + spec);
        return new TopicPartition(spec.substring(0, colon), Integer.parseInt(spec.substring(colon + 1)));
    }

    static String join(List<Integer> ids) {
        List<String> s = new ArrayList<>();
        for (Integer i : ids) s.add(String.valueOf(i));
        return String.join(",", s);
    }
}
