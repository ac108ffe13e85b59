#!/usr/bin/env bash
# Exploration for issue 19: a one-node cluster without Docker, built from source.
#   devtools/node/node-up.sh [ROOT] [containerd|kubelet|chart]
# ROOT (default /tmp/ugo-e2e-node) holds every file; the daemons keep running after the
# script ends, their PIDs in ROOT/pids: stop everything with devtools/node/node-down.sh ROOT
# (also after a failure, which leaves everything up for inspection; logs in ROOT/logs).
# Needs root, Debian's runc, busybox-static, socat and iptables. Findings: docs/e2e-node-findings.md.
#
# containerd  builds/caches the binaries (devtools/node/build.sh), creates a network
#             namespace (lo + a veth pair, eth0 10.250.0.2/24; nothing leaves it) and a private
#             mount namespace (tmpfs on /run, bind of ROOT/var-lib-cni on /var/lib/cni)
#             held by a sleeping process, starts containerd there (runc from Debian,
#             cgroupfs, overlayfs snapshotter, CNI bridge 10.244.0.0/24), imports the
#             busybox and pause OCI images (devtools/node/busybox-image.sh) and runs a
#             container with `ctr run`.
# kubelet     (after containerd) also starts the project's control plane inside the same
#             namespaces (test/support/controlplane-cli.ts), a kubelet (cgroup v1,
#             cgroupfs, failCgroupV1: false) registering node ugo-e2e-node, a static Pod
#             and an API-created Pod, and waits for them to be Running; then kube-proxy
#             (nftables) and a ClusterIP Service in front of a busybox httpd Pod, called
#             from another Pod.
# chart       (after kubelet) also starts kube-scheduler, packs the operator image
#             (src/devtools/image, from the Dockerfile's stages), imports it and installs the Helm chart
#             with pullPolicy Never, connected to the project's service simulator on the node
#             address, waits for its Deployment to be available and for a UserGroup to be Ready.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
root=${1:-/tmp/ugo-e2e-node}
phase=${2:-containerd}
ns=ugo-e2e
cg=ugo-e2e
log() { echo "node-up: [$SECONDS s] $*" >&2; }
die() { echo "node-up: FAILED: $*" >&2; exit 1; }
record() { echo "$1 $2" >> "$root/pids"; }
# Run a command inside our network + mount namespaces.
inns() { nsenter -t "$(cat "$root/holder.pid")" -n -m --wd="$PWD" -- "$@"; }
# The same for a daemon started with `&`: exec, so that $! is the daemon's own PID.
inns_exec() { exec nsenter -t "$(cat "$root/holder.pid")" -n -m --wd="$PWD" -- "$@"; }

start_containerd() {
  [ -e "$root/holder.pid" ] && die "$root is in use: run devtools/node/node-down.sh $root first"
  runtime=${UGO_RUNC:-$(command -v runc || true)}
  [ -x "$runtime" ] || die "runc not found: apt-get install runc (or UGO_RUNC=/path/to/runc-or-crun)"
  mkdir -p "$root"
  bins=$(nice -n 19 "$here/build.sh" | tail -n1)
  echo "$bins" > "$root/bins"
  echo "$ns" > "$root/netns"; echo "$cg" > "$root/cgroup"

  log "network namespace $ns"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  # No dummy driver in this kernel: a veth pair with both ends inside the namespace.
  ip -n "$ns" link add eth0 type veth peer name eth1
  ip -n "$ns" link set eth1 up
  ip -n "$ns" addr add 10.250.0.2/24 dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via 10.250.0.1 dev eth0

  # Mount points that must exist on the host for the private mount namespace to cover.
  : > "$root/host-dirs"
  for d in /var/lib/cni; do [ -d "$d" ] || { mkdir -p "$d"; echo "$d" >> "$root/host-dirs"; }; done
  mkdir -p "$root/var-lib-cni" "$root/containerd" "$root/cni/net.d" "$root/logs"

  # Name resolution inside: the node's name, and no resolver outside the namespace.
  printf '127.0.0.1 localhost\n10.250.0.2 ugo-e2e-node\n' > "$root/hosts"
  printf 'nameserver 127.0.0.1\n' > "$root/resolv.conf"

  log "private mount namespace (held by a sleeping process)"
  nsenter --net="/run/netns/$ns" -- unshare --mount --propagation slave -- sh -c "
    mount --make-rshared / &&
    mount -t tmpfs -o mode=755 tmpfs /run && mkdir -p /run/netns /run/containerd &&
    mount --bind '$root/var-lib-cni' /var/lib/cni &&
    mount --bind '$root/hosts' /etc/hosts && mount --bind '$root/resolv.conf' /etc/resolv.conf &&
    exec sleep infinity" &
  echo $! > "$root/holder.pid"; record $! holder
  for _ in $(seq 1 50); do
    [ "$(readlink "/proc/$(cat "$root/holder.pid")/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] &&
      inns mountpoint -q /var/lib/cni 2>/dev/null && break
    sleep 0.1
  done
  inns mountpoint -q /var/lib/cni || die "the private mount namespace did not come up"

  # Cgroup v1: a parent of our own in every hierarchy, for the kubelet's cgroupRoot.
  for h in /sys/fs/cgroup/*/; do
    case $h in */unified/) continue;; esac
    mkdir -p "$h$cg"
    [ -f "$h/cpuset.cpus" ] && { cat "$h/cpuset.cpus" > "$h$cg/cpuset.cpus"; cat "$h/cpuset.mems" > "$h$cg/cpuset.mems"; }
  done

  cat > "$root/cni/net.d/10-ugo-e2e.conflist" <<EOF
{"cniVersion":"1.0.0","name":"ugo-e2e","plugins":[
 {"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":true,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},
 {"type":"portmap","capabilities":{"portMappings":true}}]}
EOF
  snapshotter=${UGO_SNAPSHOTTER:-overlayfs}
  cat > "$root/containerd/config.toml" <<EOF
version = 4
root = "$root/containerd/root"
state = "$root/containerd/state"
imports = []
[plugins."io.containerd.server.v1.grpc"]
  address = "$root/containerd/containerd.sock"
[plugins."io.containerd.server.v1.ttrpc"]
  address = "$root/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.cri.v1.runtime"]
  enable_selinux = false
  # root here lacks CAP_SYS_RESOURCE (CapEff 000001fffeffffff), so runc cannot lower
  # oom_score_adj (the pause container asks for -998): clamp to containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$runtime"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$bins/cni"]
    conf_dir = "$root/cni/net.d"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "$snapshotter"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "usergroup-operator.dev/e2e/pause:1"
EOF
  log "containerd ($("$bins/containerd" --version)), snapshotter $snapshotter"
  inns_exec env PATH="$bins:$(dirname "$runtime"):$PATH" "$bins/containerd" --config "$root/containerd/config.toml" --log-level info \
    > "$root/logs/containerd.log" 2>&1 &
  record $! containerd
  for _ in $(seq 1 100); do [ -S "$root/containerd/containerd.sock" ] && break; sleep 0.1; done
  ctr() { inns "$bins/ctr" --address "$root/containerd/containerd.sock" "$@"; }
  ctr version >&2 || die "containerd did not answer; see $root/logs/containerd.log"

  log "images"
  "$here/busybox-image.sh" "$root/images" >/dev/null
  for n in default k8s.io; do
    for i in busybox pause; do ctr -n "$n" images import --snapshotter "$snapshotter" "$root/images/$i.tar" >&2; done
  done
  ctr -n k8s.io images ls -q >&2

  log "ctr run (namespace default)"
  out=$(ctr -n default run --rm --cgroup "/$cg/ctr-run" --snapshotter "$snapshotter" usergroup-operator.dev/e2e/busybox:1 ugo-e2e-ctr-run \
    sh -c 'echo hello from busybox; id; cat /proc/self/cgroup | head -4; mount | head -3' 2>&1) ||
    die "ctr run: $out"
  echo "$out" | sed 's/^/    /' >&2
  log "containerd can run a container"
}

start_kubelet() {
  bins=$(cat "$root/bins")
  cpbins=$(nice -n 19 "$repo/devtools/controlplane/build.sh" | tail -n1)
  kubectl() { "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" "$@"; }

  log "control plane (test/support/controlplane-cli.ts) inside the node's namespaces"
  (cd "$repo" && inns_exec env PATH="$repo/node_modules/node/bin:$repo/node_modules/.bin:$PATH" \
    tsx test/support/controlplane-cli.ts --kubeconfig "$root/admin.kubeconfig") > "$root/logs/controlplane.log" 2>&1 &
  record $! controlplane
  for _ in $(seq 1 240); do grep -q 'Ctrl-C' "$root/logs/controlplane.log" && break; sleep 0.5; done
  grep -q 'Ctrl-C' "$root/logs/controlplane.log" || die "control plane did not start: $(tail -5 "$root/logs/controlplane.log")"
  inns "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" version >&2

  mkdir -p "$root/kubelet" "$root/manifests" "$root/pod-logs"
  cat > "$root/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$cg
containerRuntimeEndpoint: unix://$root/containerd/containerd.sock
failSwapOn: false
staticPodPath: $root/manifests
podLogsDir: $root/pod-logs
address: 0.0.0.0
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: ""
EOF
  cat > "$root/manifests/static-busybox.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: static-busybox, namespace: default}
spec:
  containers:
  - name: sh
    image: usergroup-operator.dev/e2e/busybox:1
    imagePullPolicy: Never
    command: [sh, -c, 'echo static pod up; ip addr; while :; do sleep 5; done']
EOF
  log "kubelet ($("$bins/kubelet" --version))"
  inns_exec "$bins/kubelet" --config "$root/kubelet.yaml" --kubeconfig "$root/admin.kubeconfig" \
    --root-dir "$root/kubelet" --hostname-override ugo-e2e-node --node-ip 10.250.0.2 --v=2 \
    > "$root/logs/kubelet.log" 2>&1 &
  record $! kubelet
  for _ in $(seq 1 120); do
    inns "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" get node ugo-e2e-node >/dev/null 2>&1 && break
    kill -0 "$(tail -n1 "$root/pids" | cut -d' ' -f1)" 2>/dev/null || die "kubelet exited: $(tail -5 "$root/logs/kubelet.log")"
    sleep 1
  done
  inns "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" get node -o wide >&2 || die "node did not register"

  inns "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" apply -f - >&2 <<EOF
apiVersion: v1
kind: Pod
metadata: {name: api-busybox, namespace: default}
spec:
  nodeName: ugo-e2e-node
  containers:
  - name: sh
    image: usergroup-operator.dev/e2e/busybox:1
    imagePullPolicy: Never
    command: [sh, -c, 'echo api pod up; while :; do sleep 5; done']
EOF
  for _ in $(seq 1 90); do
    phases=$(inns "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" get pods -A -o jsonpath='{range .items[*]}{.status.phase}{" "}{end}' 2>/dev/null || true)
    [ "$phases" = "Running Running " ] && break
    sleep 2
  done
  inns "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" get pods -A -o wide >&2
  [ "$phases" = "Running Running " ] || die "pods not Running (phases: $phases); see $root/logs/kubelet.log"
  inns "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" logs api-busybox >&2
  log "both pods Running"

  log "kube-proxy (nftables) and a ClusterIP Service"
  inns_exec "$bins/kube-proxy" --kubeconfig "$root/admin.kubeconfig" --hostname-override ugo-e2e-node \
    --proxy-mode nftables --cluster-cidr 10.244.0.0/24 --conntrack-max-per-core 0 \
    --metrics-bind-address 127.0.0.1:10249 --healthz-bind-address 127.0.0.1:10256 --v=2 \
    > "$root/logs/kube-proxy.log" 2>&1 &
  record $! kube-proxy
  inns "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" apply -f - >&2 <<EOF
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  nodeName: ugo-e2e-node
  automountServiceAccountToken: false
  containers:
  - name: httpd
    image: usergroup-operator.dev/e2e/busybox:1
    imagePullPolicy: Never
    command: [sh, -c, 'mkdir -p /www && echo hello-from-web > /www/index.html && exec httpd -f -p 8080 -h /www']
    ports: [{containerPort: 8080}]
    readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 2}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
EOF
  inns "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" wait --for=condition=Ready pod/web --timeout=90s >&2
  ip=$(inns "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" get svc web -o jsonpath='{.spec.clusterIP}')
  # Debian's static busybox wget segfaults (also outside containers): talk HTTP with nc.
  got=""
  for _ in $(seq 1 30); do
    got=$(inns "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" exec api-busybox -- \
      sh -c "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 $ip 80 | tail -n1" 2>/dev/null || true)
    [ "$got" = hello-from-web ] && break
    sleep 1
  done
  [ "$got" = hello-from-web ] || die "Service web ($ip:80) not reachable from a pod (got '$got'); see $root/logs/kube-proxy.log"
  log "pod -> Service $ip:80 -> pod answered: $got"
}

start_chart() {
  bins=$(cat "$root/bins")
  cpbins=$(nice -n 19 "$repo/devtools/controlplane/build.sh" | tail -n1)
  k() { inns "$cpbins/kubectl" --kubeconfig "$root/admin.kubeconfig" "$@"; }

  # The test control plane has no scheduler; a Deployment's Pods need one.
  log "kube-scheduler"
  inns_exec "$bins/kube-scheduler" --kubeconfig "$root/admin.kubeconfig" \
    --authentication-kubeconfig "$root/admin.kubeconfig" --authorization-kubeconfig "$root/admin.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --v=1 > "$root/logs/kube-scheduler.log" 2>&1 &
  record $! kube-scheduler

  # Pods reach the apiserver as the default/kubernetes Service (10.0.0.1:443). The test
  # control plane listens on 127.0.0.1 only and runs with --endpoint-reconciler-type=none:
  # relay the node address to it, and give the Service an EndpointSlice by hand.
  command -v socat >/dev/null || die "socat not found: apt-get install socat"
  apiport=$(sed -n 's#.*server: https://127.0.0.1:\([0-9]*\).*#\1#p' "$root/admin.kubeconfig")
  [ -n "$apiport" ] || die "no apiserver port in $root/admin.kubeconfig"
  log "relay 10.250.0.2:6443 -> 127.0.0.1:$apiport, EndpointSlice for default/kubernetes"
  inns_exec socat TCP-LISTEN:6443,bind=10.250.0.2,fork,reuseaddr "TCP:127.0.0.1:$apiport" \
    > "$root/logs/apiserver-relay.log" 2>&1 &
  record $! apiserver-relay
  k apply -f - >&2 <<EOF
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes-node-up
  namespace: default
  labels: {kubernetes.io/service-name: kubernetes, endpointslice.kubernetes.io/managed-by: node-up.usergroup-operator.dev}
addressType: IPv4
endpoints: [{addresses: [10.250.0.2], conditions: {ready: true}}]
ports: [{name: https, port: 6443, protocol: TCP}]
EOF

  log "operator image (src/devtools/image, from the Dockerfile's stages)"
  (cd "$here/../.." && nice -n 19 npx tsx src/devtools/image/build-cli.ts "$root/images/operator.tar" usergroup-operator.dev/e2e/usergroup-operator:dev >/dev/null)
  inns "$bins/ctr" --address "$root/containerd/containerd.sock" -n k8s.io images import "$root/images/operator.tar" >&2

  # The service the operator syncs to: the project's simulator, on the node address.
  log "service simulator on 10.250.0.2:8089 (usergroup-operator sim)"
  inns_exec "$repo/node_modules/node/bin/node" "$repo/dist/cli/main.js" sim --host 10.250.0.2 --port 8089 \
    --api-key e2e-node-key > "$root/logs/sim.log" 2>&1 &
  record $! sim
  k create namespace team-a >&2

  log "helm install deploy/helm/usergroup-operator (image pullPolicy Never, connection to the simulator)"
  inns "$cpbins/helm" --kubeconfig "$root/admin.kubeconfig" install ugo "$repo/deploy/helm/usergroup-operator" \
    --namespace usergroup-system --create-namespace \
    --set image.repository=usergroup-operator.dev/e2e/usergroup-operator --set image.tag=dev \
    --set image.pullPolicy=Never --set 'watchNamespaces={team-a}' \
    --set connection.url=http://10.250.0.2:8089 --set connection.allowInsecure=true \
    --set connection.apiKey.value=e2e-node-key >&2
  k -n usergroup-system rollout status deployment --timeout=180s >&2 ||
    { k -n usergroup-system get pods -o wide >&2; k -n usergroup-system describe pods | tail -30 >&2;
      die "the chart's Deployment did not become available"; }
  k -n usergroup-system get pods -o wide >&2
  log "the chart's pods are Running and Ready on ugo-e2e-node"

  log "a UserGroup synced through the operator pod to the simulator"
  k apply -f - >&2 <<EOF
apiVersion: usergroup.dev/v1alpha1
kind: UserGroup
metadata: {name: acme, namespace: team-a}
spec: {userGroupId: team-a.acme, name: Acme Corporation}
EOF
  k -n team-a wait --for=condition=Ready usergroup/acme --timeout=90s >&2 ||
    { k -n team-a get usergroup acme -o yaml | tail -30 >&2; die "UserGroup team-a/acme not Ready"; }
  k -n team-a get usergroups,secrets >&2
  log "UserGroup team-a/acme Ready"
}

case $phase in
  containerd) start_containerd ;;
  kubelet) [ -e "$root/holder.pid" ] || start_containerd; start_kubelet ;;
  chart) [ -e "$root/holder.pid" ] || { start_containerd; start_kubelet; }; start_chart ;;
  *) die "unknown phase $phase (containerd|kubelet|chart)" ;;
esac
