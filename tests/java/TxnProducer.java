import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * ConsoleProducer's lines written inside transactions, some committed and some aborted, by
 * one or more transactional producers at once: data for the readers of transactional topics
 * (read_committed must drop what was aborted, and no reader may show a control record).
 *
 *   --bootstrap-server H:P --topic T --transactional-id ID [--producers N (default 1)]
 *   [--compression-type C[,C...]] [--property ...] (ConsoleProducer's)
 *
 * Each input line is "P<TAB>" and then a ConsoleProducer line, sent by producer P (0 to N-1,
 * transactional id ID-P), which begins a transaction if P has none open; or "P COMMIT" or
 * "P ABORT", which ends P's transaction (its records flushed first, so the aborted ones do
 * reach the log, as an application's would). A transaction still open at the end of the input
 * is committed. A send that failed fails the run, named on stderr, aborted or not: a reader's
 * test counts the aborted records too, so a record that never reached the log must say why. Prints "committed C aborted A" (transactions) on stdout.
 *
 * Each C is none, gzip, snappy, lz4 or zstd (default none): producer P compresses with the
 * P-th, or the last one given, so one run can write transactions in every codec.
 */
public final class TxnProducer {
    public static void main(String[] argv) { ToolArgs.main(TxnProducer::run, argv); }

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv, Set.of(), Set.of("--bootstrap-server", "--topic",
                "--transactional-id", "--producers", "--compression-type", "--property"));
        ConsoleProducer.LineFormat format =
                new ConsoleProducer.LineFormat(a.require("--topic"), a.keyValues("--property"));
        int n = (int) a.getLong("--producers", 1);
        String[] codecs = a.get("--compression-type", "none").split(",");
        List<KafkaProducer<byte[], byte[]>> producers = new ArrayList<>();
        boolean[] open = new boolean[n];
        List<AtomicReference<Exception>> failed = new ArrayList<>();  // each producer's first
        long committed = 0, aborted = 0;
        try {
            for (int i = 0; i < n; i++) {
                Properties p = new Properties();
                p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("--bootstrap-server"));
                p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.require("--transactional-id") + "-" + i);
                p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codecs[Math.min(i, codecs.length - 1)]);
                p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
                KafkaProducer<byte[], byte[]> producer =
                        new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
                producers.add(producer);
                failed.add(new AtomicReference<>());
                producer.initTransactions();
            }
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                int tab = line.indexOf('\t'), space = line.indexOf(' ');
                int cut = tab >= 0 && (space < 0 || tab < space) ? tab : space;
                if (cut <= 0) throw new ToolArgs.UsageException("no producer index on line: " + line);
                int i = Integer.parseInt(line.substring(0, cut));
                if (i < 0 || i >= n) throw new ToolArgs.UsageException("no producer " + i + ": " + line);
                KafkaProducer<byte[], byte[]> producer = producers.get(i);
                String rest = line.substring(cut + 1);
                if (cut == space && (rest.equals("COMMIT") || rest.equals("ABORT"))) {
                    if (!open[i]) throw new ToolArgs.UsageException("producer " + i + " has no open transaction");
                    producer.flush();
                    throwIfFailed(failed, i);
                    if (rest.equals("COMMIT")) {
                        producer.commitTransaction();
                        committed++;
                    } else {
                        producer.abortTransaction();
                        aborted++;
                    }
                    open[i] = false;
                    continue;
                }
                if (cut != tab) throw new ToolArgs.UsageException("not P<TAB>record, P COMMIT or P ABORT: " + line);
                if (!open[i]) {
                    producer.beginTransaction();
                    open[i] = true;
                }
                AtomicReference<Exception> mine = failed.get(i);
                producer.send(format.parse(rest), (meta, e) -> {
                    if (e != null) mine.compareAndSet(null, e);
                });
            }
            for (int i = 0; i < n; i++) {
                if (open[i]) {
                    producers.get(i).flush();
                    throwIfFailed(failed, i);
                    producers.get(i).commitTransaction();
                    committed++;
                }
            }
        } finally {
            for (KafkaProducer<byte[], byte[]> producer : producers) producer.close();
        }
        System.out.println("committed " + committed + " aborted " + aborted);
        return 0;
    }

    private static void throwIfFailed(List<AtomicReference<Exception>> failed, int i) {
        Exception e = failed.get(i).get();
        if (e != null) throw new IllegalStateException("producer " + i + ": a send failed", e);
    }
}
