import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Produce-throughput load from the Java client, for bench/ (python -m bench).
 * Like kafka-producer-perf-test, minus throttling: sends fixed-size random values
 * for a number of seconds after a warm-up (metadata, connection, JIT), flushes,
 * and prints one line "records=N bytes=B seconds=S failed=F" so the JVM's start-up
 * is not part of the figure.
 *
 *   PerfProducer BOOTSTRAP TOPIC VALUE_SIZE ACKS SECONDS [LINGER_MS]
 */
public final class PerfProducer {
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1], acks = a[3];
        int size = Integer.parseInt(a[2]);
        double seconds = Double.parseDouble(a[4]);
        String linger = a.length > 5 ? a[5] : "5";
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        p.put(ProducerConfig.LINGER_MS_CONFIG, linger);
        // Bigger batches than the 16 KiB default, like librdkafka's, so both clients batch alike.
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
        p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(256L << 20));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
        byte[] value = new byte[size];
        new Random(42).nextBytes(value);
        AtomicLong failed = new AtomicLong();
        try (KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < 20000; i++) producer.send(new ProducerRecord<>(topic, value));
            producer.flush();
            long sent = 0;
            long t0 = System.nanoTime();
            long end = t0 + (long) (seconds * 1e9);
            while (true) {
                producer.send(new ProducerRecord<>(topic, value), (md, e) -> { if (e != null) failed.incrementAndGet(); });
                sent++;
                if ((sent & 1023) == 0 && System.nanoTime() >= end) break;
            }
            producer.flush();
            double secs = (System.nanoTime() - t0) / 1e9;
            long ok = sent - failed.get();
            System.out.println("records=" + ok + " bytes=" + (ok * size) + " seconds=" + secs + " failed=" + failed.get());
        }
        System.exit(failed.get() == 0 ? 0 : 1);
    }
}
