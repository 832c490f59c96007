import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DeleteTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.errors.ThrottlingQuotaExceededException;

/**
 * Several topics created, deleted or grown in ONE Admin request, each topic's outcome
 * printed, for the controller mutation quota (KIP-599):
 *
 *   --bootstrap-server H:P --client-id C [--no-retry-on-quota] --topic T [--topic T]... and one of
 *   --create --partitions N  |  --delete  |  --add-partitions N (the new total)
 *
 * One line per topic, in the order given:
 *   T\tOK
 *   T\tThrottlingQuotaExceededException\tthrottleTimeMs=N
 *   T\t<exception class>
 * The Admin client retries topics refused for the quota by itself (after the throttle
 * time, until its timeout) unless --no-retry-on-quota says otherwise.
 */
public final class TopicMutations {
    public static void main(String[] argv) { ToolArgs.main(TopicMutations::run, argv); }

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv, Set.of("--create", "--delete", "--no-retry-on-quota"),
                Set.of("--bootstrap-server", "--client-id", "--topic", "--partitions", "--add-partitions"));
        String action = a.action("--create", "--delete", "--add-partitions");
        List<String> topics = a.all("--topic");
        boolean retry = !a.has("--no-retry-on-quota");
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("--bootstrap-server"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, a.require("--client-id"));
        try (Admin admin = Admin.create(p)) {
            Map<String, KafkaFuture<Void>> outcomes;
            switch (action) {
                case "--create": {
                    int partitions = (int) a.getLong("--partitions", 1);
                    List<NewTopic> wanted = topics.stream()
                            .map(t -> new NewTopic(t, Optional.of(partitions), Optional.empty())).toList();
                    outcomes = admin.createTopics(wanted,
                            new CreateTopicsOptions().retryOnQuotaViolation(retry)).values();
                    break;
                }
                case "--delete":
                    outcomes = admin.deleteTopics(topics,
                            new DeleteTopicsOptions().retryOnQuotaViolation(retry)).topicNameValues();
                    break;
                default: {
                    int total = (int) a.getLong("--add-partitions", 1);
                    Map<String, NewPartitions> wanted = new LinkedHashMap<>();
                    for (String t : topics) wanted.put(t, NewPartitions.increaseTo(total));
                    outcomes = admin.createPartitions(wanted,
                            new CreatePartitionsOptions().retryOnQuotaViolation(retry)).values();
                }
            }
            for (String t : topics) {
                try {
                    outcomes.get(t).get();
                    System.out.println(t + "\tOK");
                } catch (ExecutionException e) {
                    Throwable cause = e.getCause();
                    if (cause instanceof ThrottlingQuotaExceededException q) {
                        System.out.println(t + "\tThrottlingQuotaExceededException\tthrottleTimeMs="
                                + q.throttleTimeMs());
                    } else {
                        System.out.println(t + "\t" + cause.getClass().getSimpleName());
                    }
                }
            }
            return 0;
        }
    }
}
