import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Like kafka-console-producer: one record per stdin line (value = the line, no key
 * unless --property parse.key=true), then flush and exit 0 at EOF; exit 1 if any
 * record failed. Defaults match the real tool: acks=all and therefore idempotence
 * on, which makes the broker answer InitProducerId before the first Produce.
 *
 *   --bootstrap-server H:P --topic T [--acks all|1|0]
 *   [--compression-type none|gzip|snappy|lz4|zstd] [--producer-property k=v]...
 *   [--property parse.key=true] [--property key.separator=SEP (default TAB)]
 *   [--property parse.headers=true] [--property headers.delimiter=SEP (default TAB)]
 *   [--property headers.separator=SEP (default ,)] [--property headers.key.separator=SEP (default :)]
 *   [--property null.marker=M] (a key, value or header value equal to M is null)
 *   [--property partition=N] (every record to partition N; not in the real tool)
 *   [--print-acks] [--print-metric NAME]
 *
 * --print-acks (not in the real tool): for every record the broker acknowledged, print
 * "PARTITION<TAB>OFFSET<TAB>VALUE" on stdout from the send callback, flushed at once, so a
 * crash test knows exactly which records were acknowledged before the broker died.
 * Without it nothing is printed on stdout.
 *
 * --print-metric NAME (not in the real tool): after the last record is acknowledged,
 * print "NAME=VALUE" on stderr for the producer-metrics metric NAME (e.g.
 * produce-throttle-time-max), so a test can see what the client itself measured.
 */
public final class ConsoleProducer {
    public static void main(String[] argv) { ToolArgs.main(ConsoleProducer::run, argv); }

    static int run(String[] argv) throws Exception {
        ToolArgs a = new ToolArgs(argv, Set.of("--print-acks"), Set.of("--bootstrap-server", "--topic", "--acks",
                "--compression-type", "--producer-property", "--property", "--print-metric"));
        String topic = a.require("--topic");
        String acks = a.get("--acks", "all");

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("--bootstrap-server"));
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "console-producer");
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        // The client rejects idempotence with acks 0/1, so only ask for it with acks=all.
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(acks.equals("all") || acks.equals("-1")));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, a.get("--compression-type", "none"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.putAll(a.keyValues("--producer-property"));

        LineFormat format = new LineFormat(topic, a.keyValues("--property"));
        boolean printAcks = a.has("--print-acks");
        // Callbacks run on the producer's I/O thread; println+flush under the stream's
        // lock, so every line is whole and written out before the next ack is handled.
        PrintStream ackOut = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

        AtomicLong failed = new AtomicLong();
        AtomicReference<Exception> firstError = new AtomicReference<>();
        long sent = 0;
        try (KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                ProducerRecord<byte[], byte[]> record = format.parse(line);
                String shown = record.value() == null ? format.nullMarker
                        : new String(record.value(), StandardCharsets.UTF_8);
                producer.send(record, (md, e) -> {
                    if (e != null) {
                        if (failed.getAndIncrement() == 0) firstError.set(e);
                    } else if (printAcks) {
                        synchronized (ackOut) {
                            ackOut.println(md.partition() + "\t" + md.offset() + "\t" + shown);
                            ackOut.flush();
                        }
                    }
                });
                sent++;
            }
            producer.flush();
            String metric = a.get("--print-metric", null);
            if (metric != null) {
                producer.metrics().forEach((name, m) -> {
                    if (name.name().equals(metric) && name.group().equals("producer-metrics")) {
                        System.err.println(metric + "=" + m.metricValue());
                    }
                });
            }
        }
        if (failed.get() > 0) {
            System.err.println("ERROR: " + failed.get() + " of " + sent + " records failed, first: "
                    + ToolArgs.describe(firstError.get()));
            return 1;
        }
        return 0;
    }

    /** One stdin line as a record: the --property keys above (kafka-console-producer's). */
    static final class LineFormat {
        final String topic;
        final boolean parseKey, parseHeaders;
        final String separator, headersDelimiter, headersSeparator, headerKeySeparator, nullMarker;
        final Integer partition;

        LineFormat(String topic, Map<String, String> fmt) {
            this.topic = topic;
            parseKey = Boolean.parseBoolean(fmt.getOrDefault("parse.key", "false"));
            separator = fmt.getOrDefault("key.separator", "\t");
            parseHeaders = Boolean.parseBoolean(fmt.getOrDefault("parse.headers", "false"));
            headersDelimiter = fmt.getOrDefault("headers.delimiter", "\t");
            headersSeparator = fmt.getOrDefault("headers.separator", ",");
            headerKeySeparator = fmt.getOrDefault("headers.key.separator", ":");
            nullMarker = fmt.get("null.marker");
            partition = fmt.containsKey("partition") ? Integer.valueOf(fmt.get("partition")) : null;
        }

        ProducerRecord<byte[], byte[]> parse(String line) {
            byte[] key = null;
            String value = line;
            List<Header> headers = new ArrayList<>();
            if (parseHeaders) {
                int at = line.indexOf(headersDelimiter);
                if (at < 0) throw new ToolArgs.UsageException("no headers delimiter on line: " + line);
                for (String h : line.substring(0, at).split(java.util.regex.Pattern.quote(headersSeparator))) {
                    if (h.isEmpty()) continue;
                    int k = h.indexOf(headerKeySeparator);
                    String hk = k < 0 ? h : h.substring(0, k);
                    String hv = k < 0 ? null : h.substring(k + headerKeySeparator.length());
                    headers.add(new RecordHeader(hk, hv == null || hv.equals(nullMarker)
                            ? null : hv.getBytes(StandardCharsets.UTF_8)));
                }
                line = line.substring(at + headersDelimiter.length());
                value = line;
            }
            if (parseKey) {
                int at = line.indexOf(separator);
                if (at < 0) throw new ToolArgs.UsageException("no key separator on line: " + line);
                key = line.substring(0, at).getBytes(StandardCharsets.UTF_8);
                value = line.substring(at + separator.length());
            }
            if (key != null && nullMarker != null && nullMarker.equals(new String(key, StandardCharsets.UTF_8))) {
                key = null;
            }
            byte[] bytes = value.equals(nullMarker) ? null : value.getBytes(StandardCharsets.UTF_8);
            return new ProducerRecord<>(topic, partition, key, bytes, headers);
        }
    }
}
