"""SASL authentication (KIP-43, KIP-152, KIP-368): mechanisms (plain.py,
scram.py), their registry, the broker's SASL settings, JAAS parsing."""
