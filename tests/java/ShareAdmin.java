import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
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
 *
 *   ShareAdmin BOOTSTRAP serve
 *
 * keeps one Admin client and reads commands from stdin, one a line ("ACTION GROUP ..."
 * as above, separated by spaces), answering each with its lines and then a line "END";
 * it exits at the end of stdin. (A JVM and an Admin client per call is seconds of CPU
 * each on a loaded machine; a test that polls a group's state makes many calls.)
 */
public final class ShareAdmin {
    public static void main(String[] argv) { ToolArgs.main(ShareAdmin::run, argv); }

    static String error(Throwable t) {
        Throwable c = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
        return "ERROR " + c.getClass().getSimpleName();
    }

    static int run(String[] argv) throws Exception {
        boolean serve = argv.length == 2 && argv[1].equals("serve");
        if (argv.length < 3 && !serve) {
            throw new ToolArgs.UsageException("ShareAdmin BOOTSTRAP ACTION GROUP ... | BOOTSTRAP serve");
        }
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, argv[0]);
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        try (Admin admin = Admin.create(p)) {
            if (!serve) return call(admin, Arrays.copyOfRange(argv, 1, argv.length), out);
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                String[] command = line.trim().split(" +");
                if (command.length < 2) {
                    out.println("USAGE ACTION GROUP ...");
                } else {
                    try {
                        call(admin, command, out);
                    } catch (ToolArgs.UsageException e) {
                        out.println("USAGE " + e.getMessage());
                    } catch (Exception e) {  // a call that failed outright: the next goes on
                        out.println(error(e));
                    }
                }
                out.println("END");
            }
            return 0;
        }
    }

    /** One call: command is ACTION GROUP ARGS...; its answer's lines go to out. */
    static int call(Admin admin, String[] command, PrintStream out) throws Exception {
        String group = command[1];
        switch (command[0]) {
            case "alter": {
                Map<TopicPartition, Long> offsets = new HashMap<>();
                for (int i = 2; i < command.length; i++) {
                    String[] tp = command[i].split("=");
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
                        out.println(tp + " OK");
                    } catch (ExecutionException e) {
                        out.println(tp + " " + error(e));
                    }
                }
                out.println(all(result.all()));
                return 0;
            }
            case "delete-offsets": {
                Set<String> topics = Set.of(Arrays.copyOfRange(command, 2, command.length));
                var result = admin.deleteShareGroupOffsets(group, topics);
                for (String t : new java.util.TreeSet<>(topics)) {
                    try {
                        result.topicResult(t).get();
                        out.println(t + " OK");
                    } catch (ExecutionException e) {
                        out.println(t + " " + error(e));
                    }
                }
                out.println(all(result.all()));
                return 0;
            }
            case "delete":
                out.println(all(admin.deleteShareGroups(List.of(group)).all()));
                return 0;
            case "offsets": {
                Map<TopicPartition, SharePartitionOffsetInfo> got = admin.listShareGroupOffsets(
                        Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group).get();
                TreeMap<String, String> lines = new TreeMap<>();
                got.forEach((tp, info) -> lines.put(tp.toString(), tp.topic() + " " + tp.partition() + " "
                        + (info == null ? "-" : info.startOffset() + " "
                           + info.lag().map(String::valueOf).orElse("-"))));
                lines.values().forEach(out::println);
                return 0;
            }
            case "describe": {
                try {
                    ShareGroupDescription d = admin.describeShareGroups(List.of(group)).all().get().get(group);
                    out.println(d.groupState() + " " + d.members().size());
                } catch (ExecutionException e) {
                    out.println(error(e));
                }
                return 0;
            }
            default:
                throw new ToolArgs.UsageException("unknown action " + command[0]);
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
