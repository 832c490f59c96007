"""samsa: a broker that speaks the Apache Kafka wire protocol, and Kafka's tools.

Everything samsa installs lives under this one name (samsa.broker, samsa.protocol,
samsa.tools, ...), so nothing generic such as `config` or `protocol` lands in a user's
site-packages. The source tree keeps the project's folders at its top, as the design
card puts them (broker/, protocol/, storage/, config/, client/, tools/, pipeline/); in
the tree, samsa/<folder> is a symbolic link to each, and the wheel installs each under
samsa/ (setup.py's package_dir).
"""
