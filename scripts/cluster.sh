#!/usr/bin/env bash
# A samsa cluster on this machine: a ZooKeeper server (Debian's package) and
# three brokers on loopback, with all data and logs under one directory.
#
#   ./scripts/cluster.sh start [DIR]    (default DIR: ./cluster)
#   ./scripts/cluster.sh stop [DIR]
#
# Ports: ZooKeeper on $ZK_PORT (2181), brokers on $PORT_BASE, +1, +2 (9092-9094).
# Extra broker settings: BROKER_OVERRIDES="key=value key=value".
set -euo pipefail
cd "$(dirname "$0")/.."

cmd=${1:-}
dir=${2:-cluster}
ZK_PORT=${ZK_PORT:-2181}
PORT_BASE=${PORT_BASE:-9092}
BROKERS=3
JARS=/usr/share/java

usage() { echo "usage: $0 start|stop [DIR]" >&2; exit 2; }

wait_port() {  # host port what seconds
    local deadline=$((SECONDS + $4))
    until (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; do
        if [ $SECONDS -ge $deadline ]; then
            echo "cluster: $3 did not come up on $1:$2 (see its log in $dir)" >&2
            return 1
        fi
        sleep 0.2
    done
}

wait_started() {  # broker dir, what, seconds: up means registered and serving
    local deadline=$((SECONDS + $3))
    until grep -q "samsa broker .* started" "$1/broker.log" 2>/dev/null; do
        if ! kill -0 "$(cat "$1/pid")" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
            echo "cluster: $2 did not start; the end of $1/broker.log:" >&2
            tail -5 "$1/broker.log" >&2
            return 1
        fi
        sleep 0.2
    done
}

stop_pid() {  # pidfile
    [ -f "$1" ] || return 0
    local pid
    pid=$(cat "$1")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    rm -f "$1"
}

start() {
    ./scripts/setup.sh
    if [ ! -e "$JARS/zookeeper.jar" ]; then
        SUDO=""
        [ "$(id -u)" = 0 ] || SUDO="sudo"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq zookeeper >/dev/null
    fi
    mkdir -p "$dir/zookeeper"
    dir=$(cd "$dir" && pwd)
    if [ -f "$dir/zookeeper/pid" ] && kill -0 "$(cat "$dir/zookeeper/pid")" 2>/dev/null; then
        echo "cluster: already running in $dir (./scripts/cluster.sh stop $dir)" >&2
        exit 1
    fi
    cat > "$dir/zookeeper/zoo.cfg" <<EOF
tickTime=2000
dataDir=$dir/zookeeper/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr
EOF
    local cp="$JARS/zookeeper.jar:$JARS/slf4j-api.jar:$JARS/slf4j-simple.jar:$JARS/netty.jar:$JARS/jline.jar"
    nohup java -Xmx256m -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain \
        "$dir/zookeeper/zoo.cfg" > "$dir/zookeeper/zookeeper.log" 2>&1 &
    echo $! > "$dir/zookeeper/pid"
    wait_port 127.0.0.1 "$ZK_PORT" ZooKeeper 60

    local bootstrap=""
    for i in $(seq 0 $((BROKERS - 1))); do
        local port=$((PORT_BASE + i)) b="$dir/broker-$i"
        mkdir -p "$b"
        cat > "$b/server.properties" <<EOF
broker.id=$i
listeners=PLAINTEXT://127.0.0.1:$port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
log.dirs=$b/data
zookeeper.connect=127.0.0.1:$ZK_PORT/samsa
EOF
        local overrides=()
        for kv in ${BROKER_OVERRIDES:-}; do overrides+=(--override "$kv"); done
        nohup .venv/bin/samsa server "$b/server.properties" "${overrides[@]}" \
            > "$b/broker.log" 2>&1 &
        echo $! > "$b/pid"
        bootstrap="$bootstrap${bootstrap:+,}127.0.0.1:$port"
    done
    for i in $(seq 0 $((BROKERS - 1))); do
        wait_started "$dir/broker-$i" "broker $i" 60
    done
    echo "cluster: ZooKeeper on 127.0.0.1:$ZK_PORT (chroot /samsa), brokers on $bootstrap"
    echo "cluster: data and logs in $dir; stop with: ./scripts/cluster.sh stop $dir"
}

stop() {
    [ -d "$dir" ] || { echo "cluster: no cluster in $dir" >&2; exit 1; }
    for b in "$dir"/broker-*; do
        [ -d "$b" ] && stop_pid "$b/pid"
    done
    stop_pid "$dir/zookeeper/pid"
    echo "cluster: stopped (data kept in $dir)"
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
