"""``python -m samsa.pipeline.jobs {generate,stream,rebuild} ...``: the pipeline's command line."""
from __future__ import annotations

import argparse
import datetime as dt
import logging
import re
import sys
import time

from .generate import events, produce_events

DEFAULT_TOPIC = "events"
DEFAULT_AGGREGATES_TOPIC = "activity-per-window"


def _time_ms(text: str) -> int:
    """``now``, epoch milliseconds, or an ISO-8601 date/time (UTC unless it says otherwise)."""
    if text == "now":
        return int(time.time() * 1000)
    if re.fullmatch(r"\d+", text):
        return int(text)
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'now', epoch milliseconds or an ISO-8601 time, got '{text}'") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp() * 1000)


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date YYYY-MM-DD, got '{text}'") from None


def _positive(kind):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            v = None
        if v is None or v <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got '{text}'") from None
        return v
    return parse


def _duration(text: str) -> str:
    # Spark's interval strings, checked here rather than deep inside a query.
    if not re.fullmatch(r"\s*\d+\s+(milliseconds?|seconds?|minutes?|hours?|days?)\s*", text):
        raise argparse.ArgumentTypeError(f"expected a duration such as '1 minute' or '30 seconds', got '{text}'") from None
    return text.strip()


def parser() -> argparse.ArgumentParser:
    from . import __doc__ as jobs_doc
    ap = argparse.ArgumentParser(prog="python -m samsa.pipeline.jobs", description=jobs_doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="job", required=True)

    def common(p):
        p.add_argument("--bootstrap-servers", required=True, help="the brokers, host:port[,host:port]")
        p.add_argument("--topic", default=DEFAULT_TOPIC, help=f"the events topic (default {DEFAULT_TOPIC})")

    g = sub.add_parser("generate", help="produce deterministic activity events")
    common(g)
    g.add_argument("--count", type=_positive(int), default=10_000)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--start", type=_time_ms, default="now",
                   help="event time of the first event: now, epoch ms or ISO-8601 (default now)")
    g.add_argument("--interval-ms", type=_positive(int), default=1000, help="event time between events")
    g.add_argument("--users", type=_positive(int), default=50)
    g.add_argument("--rate", type=_positive(float), default=None,
                   help="events per second, steady (default: as fast as possible)")
    g.add_argument("--partitions", type=_positive(int), default=3, help="when the topic is created")

    def spark_args(p):
        p.add_argument("--output", required=True, help="the Parquet dataset's directory (local or mounted)")
        p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")

    s = sub.add_parser("stream", help="events -> Parquet by date, and window counts -> a topic")
    common(s)
    spark_args(s)
    s.add_argument("--checkpoint", required=True, help="the queries' checkpoint directory")
    s.add_argument("--aggregates-topic", default=DEFAULT_AGGREGATES_TOPIC)
    s.add_argument("--window", type=_duration, default="1 minute")
    s.add_argument("--watermark", type=_duration, default="10 minutes")
    s.add_argument("--trigger", type=_duration, default="5 seconds", help="micro-batch interval")
    s.add_argument("--available-now", action="store_true",
                   help="process what the topic holds now, then stop (backfills, tests)")
    s.add_argument("--starting-offsets", default="earliest",
                   help="earliest, latest or Spark's offsets JSON; a new checkpoint only")
    s.add_argument("--max-offsets-per-trigger", type=_positive(int), default=None)

    r = sub.add_parser("rebuild", help="rebuild one day of the Parquet dataset from the topic")
    common(r)
    spark_args(r)
    r.add_argument("--date", type=_date, required=True, help="the day (UTC), YYYY-MM-DD")
    r.add_argument("--slack-ms", type=int, default=3_600_000,
                   help="read this much before and after the day by record timestamp (default 1 h)")
    return ap


def main(argv=None, spark=None) -> int:
    """Runs one job; ``spark``: a session to use instead of starting one (tests)."""
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.job == "generate":
        evs = events(args.count, args.seed, args.start, args.interval_ms, args.users)
        n = produce_events(args.bootstrap_servers, args.topic, evs, rate=args.rate, partitions=args.partitions)
        print(f"produced {n} events to '{args.topic}' (seed {args.seed}, "
              f"{evs[0].iso_time()} .. {evs[-1].iso_time()})")
        return 0
    if spark is None:
        from ..session import local_session
        spark = local_session(f"samsa-pipeline-{args.job}", master=args.master)
    if args.job == "stream":
        from .stream import StreamConfig, run
        run(spark, StreamConfig(
            bootstrap_servers=args.bootstrap_servers, events_topic=args.topic, output=args.output,
            checkpoint=args.checkpoint, aggregates_topic=args.aggregates_topic, window=args.window,
            watermark=args.watermark, trigger=args.trigger, available_now=args.available_now,
            starting_offsets=args.starting_offsets, max_offsets_per_trigger=args.max_offsets_per_trigger))
        return 0
    from .rebuild import rebuild_day
    n = rebuild_day(spark, args.bootstrap_servers, args.topic, args.output, args.date, args.slack_ms)
    print(f"rebuilt date={args.date} of {args.output}: {n} rows")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
