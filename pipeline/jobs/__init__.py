"""The activity pipeline on the ``samsa`` data source (see pipeline/README.md, "The jobs"):

    python -m samsa.pipeline.jobs generate --bootstrap-servers localhost:9092 --count 10000 --seed 7
    python -m samsa.pipeline.jobs stream   --bootstrap-servers localhost:9092 --output data/events --checkpoint data/checkpoints
    python -m samsa.pipeline.jobs rebuild  --bootstrap-servers localhost:9092 --output data/events --date 2026-11-23

- ``generate``: deterministic JSON activity events into the events topic (``generate.py``);
- ``stream``: events -> date-partitioned Parquet with topic/partition/offset in each row, and
  per-window counts with a watermark -> a topic (``stream.py``);
- ``rebuild``: one day of the Parquet dataset again from the topic (``rebuild.py``).
"""
