import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import java.util.HashMap;
import java.util.TreeMap;

/**
 * Shows what the Admin client gets for cluster and config questions (the parts of
 * kafka-topics / kafka-configs / kafka-cluster that tests need to look at).
 *
 *   --bootstrap-server H:P [--admin-property k=v]... and one of
 *   --describe-cluster
 *       Cluster ID: ID
 *       Controller: ID            (or "none")
 *       Node: ID\tHOST:PORT\track: RACK   (one line per node, by id)
 *   --describe-configs --entity-type topics|brokers --entity-name X [--with-source]
 *       name=value                (one line per config, by name; value "null" when unset,
 *                                  "\tsource=SOURCE" appended with --with-source)
 *   --alter-configs --entity-type topics|brokers --entity-name X [--add-config k=v]... [--delete-config k]...
 *       (IncrementalAlterConfigs SET / DELETE)
 *   --describe-producers --topic T --partition P
 *       ProducerId: ID\tEpoch: E\tLastSequence: S\tLastTimestamp: TS\tCoordinatorEpoch: C\tCurrentTransactionStartOffset: O
 *                                 (one line per producer, by id; -1 for an empty optional)
 *   --alter-quotas --quota-entity TYPE=NAME... [--add-config k=v]... [--delete-config k]...
 *       (AlterClientQuotas; TYPE user|client-id|ip, NAME <default> for the default entity)
 *   --describe-quotas [--quota-entity TYPE=NAME]...
 *       TYPE=NAME[,TYPE=NAME]\tk=v[,k=v]  (DescribeClientQuotas, non-strict filter; one
 *                                 line per entity, sorted)
 */
public final class AdminInfo {
    public static void main(String[] argv) { ToolArgs.main(AdminInfo::run, argv); }

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv, Set.of("--describe-cluster", "--describe-configs", "--alter-configs",
                "--describe-producers", "--with-source", "--alter-quotas", "--describe-quotas"), Set.of("--quota-entity", "--bootstrap-server", "--entity-type",
                "--entity-name", "--add-config", "--delete-config", "--admin-property", "--topic", "--partition"));
        String action = a.action("--describe-cluster", "--describe-configs", "--alter-configs",
                "--describe-producers", "--alter-quotas", "--describe-quotas");
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("--bootstrap-server"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "admin-info");
        p.putAll(a.keyValues("--admin-property"));
        try (Admin admin = Admin.create(p)) {
            if (action.equals("--describe-cluster")) {
                DescribeClusterResult r = admin.describeCluster();
                System.out.println("Cluster ID: " + r.clusterId().get());
                Node controller = r.controller().get();
                System.out.println("Controller: " + (controller == null || controller.isEmpty() ? "none" : controller.id()));
                List<Node> nodes = new ArrayList<>(r.nodes().get());
                nodes.sort((x, y) -> Integer.compare(x.id(), y.id()));
                for (Node n : nodes) {
                    System.out.println("Node: " + n.id() + "\t" + n.host() + ":" + n.port() + "\track: " + n.rack());
                }
                return 0;
            }
            if (action.equals("--describe-producers")) {
                TopicPartition tp = new TopicPartition(a.require("--topic"), Integer.parseInt(a.require("--partition")));
                List<ProducerState> producers = new ArrayList<>(
                        admin.describeProducers(List.of(tp)).all().get().get(tp).activeProducers());
                producers.sort((x, y) -> Long.compare(x.producerId(), y.producerId()));
                for (ProducerState s : producers) {
                    System.out.println("ProducerId: " + s.producerId() + "\tEpoch: " + s.producerEpoch()
                            + "\tLastSequence: " + s.lastSequence() + "\tLastTimestamp: " + s.lastTimestamp()
                            + "\tCoordinatorEpoch: " + s.coordinatorEpoch().orElse(-1)
                            + "\tCurrentTransactionStartOffset: " + s.currentTransactionStartOffset().orElse(-1));
                }
                return 0;
            }
            if (action.equals("--alter-quotas")) {
                List<ClientQuotaAlteration.Op> ops = new ArrayList<>();
                for (Map.Entry<String, String> kv : a.keyValues("--add-config").entrySet()) {
                    ops.add(new ClientQuotaAlteration.Op(kv.getKey(), Double.parseDouble(kv.getValue())));
                }
                for (String key : a.all("--delete-config")) ops.add(new ClientQuotaAlteration.Op(key, null));
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(quotaEntity(a), ops))).all().get();
                return 0;
            }
            if (action.equals("--describe-quotas")) {
                List<ClientQuotaFilterComponent> components = new ArrayList<>();
                for (Map.Entry<String, String> e : quotaEntity(a).entries().entrySet()) {
                    components.add(e.getValue() == null ? ClientQuotaFilterComponent.ofDefaultEntity(e.getKey())
                            : ClientQuotaFilterComponent.ofEntity(e.getKey(), e.getValue()));
                }
                Map<ClientQuotaEntity, Map<String, Double>> found =
                        admin.describeClientQuotas(ClientQuotaFilter.contains(components)).entities().get();
                List<String> lines = new ArrayList<>();
                for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : found.entrySet()) {
                    List<String> who = new ArrayList<>();
                    new TreeMap<>(e.getKey().entries()).forEach((t, n) -> who.add(t + "=" + (n == null ? "<default>" : n)));
                    List<String> values = new ArrayList<>();
                    new TreeMap<>(e.getValue()).forEach((k, v) -> values.add(k + "=" + v));
                    lines.add(String.join(",", who) + "\t" + String.join(",", values));
                }
                lines.sort(null);
                lines.forEach(System.out::println);
                return 0;
            }
            ConfigResource resource = resource(a);
            if (action.equals("--alter-configs")) {
                Collection<AlterConfigOp> ops = new ArrayList<>();
                for (Map.Entry<String, String> kv : a.keyValues("--add-config").entrySet()) {
                    ops.add(new AlterConfigOp(new ConfigEntry(kv.getKey(), kv.getValue()), AlterConfigOp.OpType.SET));
                }
                for (String key : a.all("--delete-config")) {
                    ops.add(new AlterConfigOp(new ConfigEntry(key, ""), AlterConfigOp.OpType.DELETE));
                }
                if (ops.isEmpty()) throw new ToolArgs.UsageException("--add-config or --delete-config is required");
                admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
                return 0;
            }
            Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            List<ConfigEntry> entries = new ArrayList<>(config.entries());
            entries.sort((x, y) -> x.name().compareTo(y.name()));
            for (ConfigEntry e : entries) {
                System.out.println(e.name() + "=" + e.value() + (a.has("--with-source") ? "\tsource=" + e.source() : ""));
            }
            return 0;
        }
    }

    static ClientQuotaEntity quotaEntity(ToolArgs a) {
        Map<String, String> entries = new HashMap<>();
        for (String pair : a.all("--quota-entity")) {
            int at = pair.indexOf('=');
            if (at < 0) throw new ToolArgs.UsageException("--quota-entity is TYPE=NAME, got " + pair);
            String name = pair.substring(at + 1);
            entries.put(pair.substring(0, at), name.equals("<default>") ? null : name);
        }
        return new ClientQuotaEntity(entries);
    }

    static ConfigResource resource(ToolArgs a) {
        String type = a.require("--entity-type");
        String name = a.require("--entity-name");
        switch (type) {
            case "topics": return new ConfigResource(ConfigResource.Type.TOPIC, name);
            case "brokers": return new ConfigResource(ConfigResource.Type.BROKER, name);
            default: throw new ToolArgs.UsageException("--entity-type must be topics or brokers, got " + type);
        }
    }
}
