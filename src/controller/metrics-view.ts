// Pure views for /metrics: UserGroups per Ready reason, token schedules, informer totals, finalizers held.
import { hasRotateFinalizer, type ObjectMeta } from '../api/meta.js';
import type { UserGroup } from '../api/usergroup.js';
import type { InformerStats } from '../kube/informer.js';
import type { TokenScheduleSample } from '../observability/metrics.js';
import { effectiveMaxTokenAge } from './policies/rotation.js';

/** UserGroups per "ready/reason", for the usergroup_usergroups gauge. */
export function countByReadyReason(userGroups: Iterable<UserGroup>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const ug of userGroups) {
    const ready = ug.status.conditions?.find((c) => c.type === 'Ready');
    const key = `${ready?.status ?? 'Unknown'}/${ready?.reason ?? ''}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/**
 * The token schedule of every UserGroup with scheduled rotation, as its status reports it (seconds since the epoch;
 * the age with the operator's floor).
 */
export function* tokenSchedules(userGroups: Iterable<UserGroup>, minTokenAgeMs: number): Generator<TokenScheduleSample> {
  for (const ug of userGroups) {
    const maxAgeMs = ug.spec.ok ? effectiveMaxTokenAge(ug.spec.value, minTokenAgeMs) : undefined;
    const issued = Date.parse(ug.status.rotation?.tokenIssuedTime ?? '');
    if (maxAgeMs === undefined || Number.isNaN(issued)) continue;
    const next = Date.parse(ug.status.rotation?.nextRotationTime ?? '');
    yield {
      namespace: ug.metadata.namespace,
      name: ug.metadata.name,
      issuedSeconds: issued / 1000,
      maxAgeSeconds: maxAgeMs / 1000,
      nextRotationSeconds: Number.isNaN(next) ? undefined : next / 1000,
    };
  }
}

/** Each cached resource's list and watch counts, summed over its informers (one per watched namespace). */
export function informerTotals(informers: Iterable<{ readonly name: string; readonly stats: InformerStats }>): Map<string, InformerStats> {
  const byResource = new Map<string, InformerStats>();
  for (const { name, stats } of informers) {
    const sum = byResource.get(name);
    byResource.set(
      name,
      sum
        ? {
            lists: sum.lists + stats.lists,
            watchLists: sum.watchLists + stats.watchLists,
            watches: sum.watches + stats.watches,
            gone: sum.gone + stats.gone,
            silent: sum.silent + stats.silent,
            failures: sum.failures + stats.failures,
            oversizedPages: sum.oversizedPages + stats.oversizedPages,
            largestPageBytes: Math.max(sum.largestPageBytes, stats.largestPageBytes),
          }
        : { ...stats },
    );
  }
  return byResource;
}

/**
 * How many of these objects (UserGroups and token Secrets, as cached) carry the rotate-on-delete finalizer: what a
 * release that does not know it would leave hanging. Zero, with --rotate-on-delete=false, says a rollback below
 * 0.3.0 is safe (docs/operations.md, "Rolling back").
 */
export function rotateOnDeleteFinalizers(objects: Iterable<{ readonly metadata: Pick<ObjectMeta, 'finalizers'> }>): number {
  let n = 0;
  for (const o of objects) if (hasRotateFinalizer(o.metadata)) n++;
  return n;
}
