#!/bin/sh
# Writes zoo.cfg from the environment (ZOO_PORT, ZOO_ADDRESS, ZOO_TICK_TIME, ZOO_HEAP) and runs the server in the foreground
# (exec: it is PID 1 and gets docker stop's SIGTERM), without Debian's service
# scripts, from the package's jars.
set -eu
cfg=/tmp/zoo.cfg
cat > "$cfg" <<CFG
tickTime=${ZOO_TICK_TIME:-2000}
dataDir=/var/lib/zookeeper/data
clientPort=${ZOO_PORT:-2181}
clientPortAddress=${ZOO_ADDRESS:-0.0.0.0}
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
CFG
j=/usr/share/java
exec java -Xmx${ZOO_HEAP:-256m} -cp "$j/zookeeper.jar:$j/slf4j-api.jar:$j/slf4j-simple.jar:$j/netty.jar:$j/jline.jar" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
