"""The benchmark scenarios, in the order ``python -m bench`` runs them.

Each module has ``run(ctx) -> list[Row]`` and measures samsa and the peer with
the same load generator (bench/load.py) in the same run.
"""

from . import fetch, java, latency, partition_scale, produce, scale

SCENARIOS = {
    "produce": produce.run,
    "fetch": fetch.run,
    "latency": latency.run,
    "latency-rf3": latency.run_rf3,
    "partitions": scale.run_partitions,
    "partition-scale": partition_scale.run,
    "connections": scale.run_connections,
    "threads": scale.run_threads,
    "java": java.run,
}
