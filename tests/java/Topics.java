import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * Like kafka-topics, through the Admin client (so the requests are the real tool's:
 * CreateTopics, Metadata/DescribeTopicPartitions, DescribeConfigs, DeleteTopics,
 * CreatePartitions).
 *
 *   --bootstrap-server H:P [--admin-property k=v]... and one of
 *   --create --topic T [--partitions N] [--replication-factor R] [--config k=v]... [--if-not-exists]
 *   --list
 *   --describe [--topic T]
 *   --delete --topic T [--if-exists]
 *   --alter --topic T --partitions N
 *
 * --describe prints Kafka's lines (without the 3.7+ Elr columns):
 *   Topic: T\tTopicId: ID\tPartitionCount: N\tReplicationFactor: R\tConfigs: k=v,...
 *   \tTopic: T\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0
 * where Configs lists the topic's dynamic (per-topic) overrides, as the real tool does.
 */
public final class Topics {
    public static void main(String[] argv) { ToolArgs.main(Topics::run, argv); }

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv,
                Set.of("--create", "--list", "--describe", "--delete", "--alter", "--if-not-exists", "--if-exists"),
                Set.of("--bootstrap-server", "--topic", "--partitions", "--replication-factor", "--config",
                        "--admin-property"));
        String action = a.action("--create", "--list", "--describe", "--delete", "--alter");
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("--bootstrap-server"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "topics-tool");
        p.putAll(a.keyValues("--admin-property"));
        try (Admin admin = Admin.create(p)) {
            switch (action) {
                case "--create": return create(admin, a);
                case "--list":
                    for (String name : new TreeSet<>(admin.listTopics().names().get())) System.out.println(name);
                    return 0;
                case "--describe": return describe(admin, a);
                case "--delete": return delete(admin, a);
                default:
                    admin.createPartitions(Map.of(a.require("--topic"),
                            NewPartitions.increaseTo((int) a.getLong("--partitions", -1)))).all().get();
                    return 0;
            }
        }
    }

    static int create(Admin admin, ToolArgs a) throws Exception {
        String topic = a.require("--topic");
        Optional<Integer> partitions = a.has("--partitions")
                ? Optional.of((int) a.getLong("--partitions", 1)) : Optional.empty();
        Optional<Short> rf = a.has("--replication-factor")
                ? Optional.of((short) a.getLong("--replication-factor", 1)) : Optional.empty();
        NewTopic newTopic = new NewTopic(topic, partitions, rf).configs(a.keyValues("--config"));
        try {
            admin.createTopics(List.of(newTopic)).all().get();
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException && a.has("--if-not-exists"))) throw e;
        }
        System.out.println("Created topic " + topic + ".");
        return 0;
    }

    static int delete(Admin admin, ToolArgs a) throws Exception {
        String topic = a.require("--topic");
        try {
            admin.deleteTopics(List.of(topic)).all().get();
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof UnknownTopicOrPartitionException && a.has("--if-exists"))) throw e;
        }
        return 0;
    }

    static int describe(Admin admin, ToolArgs a) throws Exception {
        Collection<String> names = a.has("--topic")
                ? List.of(a.require("--topic"))
                : new TreeSet<>(admin.listTopics().names().get());
        if (names.isEmpty()) return 0;
        Map<String, TopicDescription> descriptions = admin.describeTopics(names).allTopicNames().get();
        List<ConfigResource> resources = new ArrayList<>();
        for (String name : names) resources.add(new ConfigResource(ConfigResource.Type.TOPIC, name));
        Map<ConfigResource, Config> configs = admin.describeConfigs(resources).all().get();
        for (String name : names) {
            TopicDescription d = descriptions.get(name);
            List<TopicPartitionInfo> parts = d.partitions();
            String overrides = configs.get(new ConfigResource(ConfigResource.Type.TOPIC, name)).entries().stream()
                    .filter(e -> e.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG)
                    .sorted((x, y) -> x.name().compareTo(y.name()))
                    .map(e -> e.name() + "=" + e.value())
                    .collect(Collectors.joining(","));
            System.out.println("Topic: " + name + "\tTopicId: " + d.topicId() + "\tPartitionCount: " + parts.size()
                    + "\tReplicationFactor: " + (parts.isEmpty() ? 0 : parts.get(0).replicas().size())
                    + "\tConfigs: " + overrides);
            for (TopicPartitionInfo part : parts) {
                System.out.println("\tTopic: " + name + "\tPartition: " + part.partition()
                        + "\tLeader: " + (part.leader() == null || part.leader().isEmpty() ? "none" : part.leader().id())
                        + "\tReplicas: " + ids(part.replicas()) + "\tIsr: " + ids(part.isr()));
            }
        }
        return 0;
    }

    static String ids(List<Node> nodes) {
        return nodes.stream().map(n -> String.valueOf(n.id())).collect(Collectors.joining(","));
    }
}
