"""How samsa scales: partitions, open connections, network threads.

- partitions: one producer (1 KiB, acks=1) into a topic of 1, 100, 1000 partitions
  (keyless records, so the client spreads them over all partitions);
- connections: the same producer while 10 or 1000 other clients are connected,
  each sending an ApiVersions request every second;
- network threads: samsa only, four producers, num.network.threads 1, 2, 4.
"""

from __future__ import annotations


from ..brokers import create_topic
from ..load import CTX, aggregate, hold_connections, produce_worker, run_workers
from .common import Ctx, Row, on_both, with_cpu
from .produce import measure, row

SIZE = 1024


def run_partitions(ctx: Ctx) -> list[Row]:
    secs = ctx.seconds(4.0, 1.0)
    rows = []
    for parts in ctx.pick([1, 100, 1000], [1, 100]):
        name = f"produce 1KiB acks=1 partitions={parts}"
        ctx.log(f"- {name}")
        res = on_both(ctx, name, lambda b: measure(b, SIZE, "1", 1, secs, partitions=parts,
                                                   topic="parts"))
        rows.append(row(name, res))
    return rows


def _with_connections(broker, count: int, secs: float) -> dict:
    bootstrap, host, port = broker.bootstrap, broker.host, broker.port
    ready, stop, out = CTX.Event(), CTX.Event(), CTX.Queue()
    holder = CTX.Process(target=hold_connections, args=(host, port, count, ready, stop, out), daemon=True)
    holder.start()
    try:
        if not ready.wait(120):
            raise RuntimeError(f"{count} connections not open within 120s")
        create_topic(bootstrap, "conns", 1)
        res = with_cpu(broker, lambda: aggregate(run_workers(
            produce_worker, [(bootstrap, "conns", SIZE, "1", secs)], timeout=secs + 180)))
    finally:
        stop.set()
        holder.join(30)
        if holder.is_alive():
            holder.kill()
            holder.join()
    held = out.get(timeout=10) if not out.empty() else {"error": "holder reported nothing"}
    if held.get("error") or held["open"] < count:
        raise RuntimeError(f"connection holder: {held}")
    res["connections_open"] = held["open"]
    res["heartbeat_rounds"] = held["rounds"]
    return res


def run_connections(ctx: Ctx) -> list[Row]:
    secs = ctx.seconds(4.0, 1.0)
    rows = []
    for count in ctx.pick([10, 1000], [10, 1000]):
        name = f"produce 1KiB acks=1 with {count} other connections"
        ctx.log(f"- {name}")
        res = on_both(ctx, name, lambda b: _with_connections(b, count, secs))
        rows.append(row(name, res))
    return rows


def run_threads(ctx: Ctx) -> list[Row]:
    secs = ctx.seconds(4.0, 1.0)
    rows = []
    for threads in ctx.pick([1, 2, 4], [1, 2, 4]):
        name = f"samsa produce 1KiB acks=1 producers=4 num.network.threads={threads}"
        ctx.log(f"- {name}")
        res = on_both(ctx, name, lambda b: measure(b, SIZE, "1", 4, secs),
                      samsa_overrides={"num.network.threads": threads}, brokers=("samsa",))
        rows.append(row(name, res))
    return rows
