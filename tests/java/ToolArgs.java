import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;

/**
 * The tiny bit of plumbing the test tools share: "--name value" / "--flag" parsing
 * and one exit-code convention (0 ok, 1 failure, 2 usage error), so the Python
 * harness can tell "the broker said no" from "the test called the tool wrongly".
 * Kafka's own tools use joptsimple; these programs only need a dozen options each.
 */
public final class ToolArgs {
    /** Thrown for a bad command line; reported as exit code 2. */
    public static final class UsageException extends RuntimeException {
        public UsageException(String message) { super(message); }
    }

    /** A tool's body: returns its exit code. */
    public interface Body { int run(String[] argv) throws Exception; }

    private final Map<String, List<String>> values = new HashMap<>();
    private final Set<String> flags = new HashSet<>();

    public ToolArgs(String[] argv, Set<String> flagNames, Set<String> valueNames) {
        for (int i = 0; i < argv.length; i++) {
            String arg = argv[i];
            if (flagNames.contains(arg)) {
                flags.add(arg);
            } else if (valueNames.contains(arg)) {
                if (i + 1 >= argv.length) throw new UsageException("missing value after " + arg);
                values.computeIfAbsent(arg, k -> new ArrayList<>()).add(argv[++i]);
            } else {
                throw new UsageException("unknown argument: " + arg);
            }
        }
    }

    public boolean has(String name) { return flags.contains(name) || values.containsKey(name); }

    /** Last value given for an option (later ones win, like joptsimple), or the default. */
    public String get(String name, String dflt) {
        List<String> all = values.get(name);
        return all == null ? dflt : all.get(all.size() - 1);
    }

    public String get(String name) { return get(name, null); }

    public String require(String name) {
        String v = get(name);
        if (v == null) throw new UsageException(name + " is required");
        return v;
    }

    public long getLong(String name, long dflt) {
        String v = get(name);
        try {
            return v == null ? dflt : Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new UsageException(name + " needs a number, got " + v);
        }
    }

    public List<String> all(String name) { return values.getOrDefault(name, List.of()); }

    /** Repeatable "k=v" options (--producer-property, --config, ...) as an ordered map. */
    public Map<String, String> keyValues(String name) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String kv : all(name)) {
            int eq = kv.indexOf('=');
            if (eq <= 0) throw new UsageException(name + " needs key=value, got " + kv);
            out.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return out;
    }

    /** Exactly one of the given action flags must be present; returns it. */
    public String action(String... names) {
        String found = null;
        for (String n : names) {
            if (has(n)) {
                if (found != null) throw new UsageException("use only one of " + String.join(", ", names));
                found = n;
            }
        }
        if (found == null) throw new UsageException("one of " + String.join(", ", names) + " is required");
        return found;
    }

    /** Runs a tool body and exits with its code; failures print the cause chain to stderr. */
    public static void main(Body body, String[] argv) {
        int rc;
        try {
            rc = body.run(argv);
        } catch (UsageException e) {
            System.err.println("USAGE ERROR: " + e.getMessage());
            rc = 2;
        } catch (Throwable t) {
            System.err.println("ERROR: " + describe(t));
            rc = 1;
        }
        System.out.flush();
        System.err.flush();
        System.exit(rc);
    }

    /** "Class: message; caused by ..." without the ExecutionException wrappers futures add. */
    public static String describe(Throwable t) {
        while (t instanceof ExecutionException && t.getCause() != null) t = t.getCause();
        StringBuilder sb = new StringBuilder(t.getClass().getName() + ": " + t.getMessage());
        for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            sb.append("; caused by ").append(c.getClass().getName()).append(": ").append(c.getMessage());
        }
        return sb.toString();
    }
}
