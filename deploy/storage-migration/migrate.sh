#!/usr/bin/env bash
# Storage migration after upgrading to usergroup-operator 0.3.0 (usergroup.dev/v1): rewrites every stored
# UserGroup, UserGroupService and ClusterUserGroupService in the CRDs' storage version (v1), then leaves only v1 in
# each CRD's status.storedVersions, so that a later release can stop serving v1alpha1. Run it once, after
# `kubectl apply --server-side --force-conflicts -f crds/` and `helm upgrade` (docs/operations.md: Upgrading). Safe to run again.
#
# Kubernetes 1.37 and newer: one StorageVersionMigration per resource (storagemigration.k8s.io/v1, served and run by
# kube-controller-manager by default); the migrator itself updates storedVersions when it succeeds.
# Older clusters, or --rewrite: the same thing with kubectl: an empty merge patch of every object (the apiserver
# writes it back in the storage version; spec, status, generation and the operator's work are unchanged), then
# storedVersions set to [v1] on the CRD's status.
#
#   usage: deploy/storage-migration/migrate.sh [--rewrite]      (KUBECTL: kubectl to use; KUBECONFIG as usual)
set -euo pipefail
kubectl=${KUBECTL:-kubectl}
resources=(usergroups usergroupservices clusterusergroupservices)
mode=auto
case "${1:-}" in
  '') ;;
  --rewrite) mode=rewrite ;;
  *) echo "usage: $0 [--rewrite]" >&2; exit 2 ;;
esac

stored() { "$kubectl" get crd "$1.usergroup.dev" -o jsonpath='{.status.storedVersions}'; }

for r in "${resources[@]}"; do
  [ "$("$kubectl" get crd "$r.usergroup.dev" -o jsonpath='{.spec.versions[?(@.storage==true)].name}')" = v1 ] || {
    echo "migrate.sh: $r.usergroup.dev does not store v1 yet: apply the new CRDs first (kubectl apply --server-side --force-conflicts -f crds/)" >&2
    exit 1
  }
done

if [ "$mode" = auto ] && "$kubectl" api-resources --api-group=storagemigration.k8s.io -o name 2>/dev/null | grep -qx 'storageversionmigrations.storagemigration.k8s.io'; then
  # All at once: the migrator handles resources side by side, and each waits for kube-controller-manager to
  # rediscover the resource (up to a minute after the CRD changed).
  declare -A migration=()
  for r in "${resources[@]}"; do
    if [ "$(stored "$r")" = '["v1"]' ]; then echo "$r.usergroup.dev: already stored as v1 only"; continue; fi
    migration[$r]=$("$kubectl" create -o name -f - <<YAML
apiVersion: storagemigration.k8s.io/v1
kind: StorageVersionMigration
metadata:
  generateName: $r.usergroup.dev-v1-
spec:
  resource: {group: usergroup.dev, resource: $r}
YAML
)
    echo "$r.usergroup.dev: ${migration[$r]} created; waiting for it to succeed"
  done
  deadline=$((SECONDS + 1800))
  for r in "${!migration[@]}"; do
    name=${migration[$r]}
    while :; do
      [ "$SECONDS" -lt "$deadline" ] || { echo "migrate.sh: $name has not finished after 30 minutes: kubectl describe $name" >&2; exit 1; }
      state=$("$kubectl" get "$name" -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{.message}{"\n"}{end}')
      case "$state" in
        *Succeeded*) break ;;
        *Failed*)
          echo "migrate.sh: $name failed: $(grep Failed <<<"$state"); run this again, or with --rewrite" >&2
          exit 1
          ;;
      esac
      sleep 2
    done
    for _ in $(seq 1 30); do [ "$(stored "$r")" = '["v1"]' ] && break; sleep 1; done
    [ "$(stored "$r")" = '["v1"]' ] || {
      echo "migrate.sh: $name succeeded but $r.usergroup.dev still lists $(stored "$r") in status.storedVersions (the CRD changed during the migration?); run this again" >&2
      exit 1
    }
    echo "$r.usergroup.dev: stored as v1 only"
  done
  exit 0
fi

for r in "${resources[@]}"; do
  count=$("$kubectl" get "$r.usergroup.dev" -A -o name | wc -l)
  if [ "$count" -gt 0 ]; then
    # One kubectl for all objects: an empty merge patch cannot conflict with anyone's write.
    "$kubectl" get "$r.usergroup.dev" -A -o json | "$kubectl" patch -f - --type=merge -p '{}' >/dev/null
  fi
  "$kubectl" patch crd "$r.usergroup.dev" --subresource=status --type=merge -p '{"status":{"storedVersions":["v1"]}}' >/dev/null
  echo "$r.usergroup.dev: $count objects rewritten, stored as v1 only"
done
