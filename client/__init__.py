"""The wire clients samsa's server (inter-broker calls), tools and tests talk to brokers with.

core.py is the sans-IO part (requests, correlation, version choice); blocking.py and
aio.py are its transports; sasl.py, scram_credential.py, jaas.py, tls.py and properties.py
read and speak what a Kafka client's properties ask for.
"""
