"""Kafka's command-line tools, one module per command, named after it (kafka-topics is
topics.py, kafka-consumer-groups is consumer_groups.py); cli.py's COMMANDS table
registers each for `samsa <command>`."""
