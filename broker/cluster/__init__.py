"""The cluster: replica placement, the controller's decisions, and the I/O
around them (ZooKeeper mode). Decisions are plain functions of the cluster's
state; the modules that talk to ZooKeeper only carry them out."""
