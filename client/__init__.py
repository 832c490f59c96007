"""The wire clients samsa's server, tools, Spark source and tests talk to brokers with.

core.py is the sans-IO part (requests, correlation, version choice); blocking.py and
aio.py are its transports; sasl.py, scram_credential.py, jaas.py and properties.py
read and speak what a Kafka client's properties ask for.
"""
