// The workloads a UserGroup may restart (Deployments, StatefulSets, DaemonSets): what is read of one, and its consent.
import { RESTART_CONSENT_ANNOTATION, RESTARTED_FOR_PREFIX } from './constants.js';
import { isRecord } from '../platform/json-value.js';
import type { Parsed } from './meta.js';

/** The workload kinds a UserGroup may restart (spec.rolloutRestartTargets), all of group apps/v1. */
export const RESTART_KINDS = ['Deployment', 'StatefulSet', 'DaemonSet'] as const;
export type RestartKind = (typeof RESTART_KINDS)[number];

export interface RestartTarget {
  readonly kind: RestartKind;
  readonly name: string;
}

/** What the operator reads of a workload before restarting it: never its containers or anything else. */
export interface ObservedWorkload {
  readonly resourceVersion: string;
  /** UserGroup names the workload's owner lets restart it (RESTART_CONSENT_ANNOTATION). */
  readonly consentsTo: readonly string[];
  /** Pod-template annotations under RESTARTED_FOR_PREFIX, by UserGroup name. */
  readonly restartedFor: Readonly<Record<string, string>>;
}

/** The pod-template annotation one UserGroup's restarts write (a UserGroup name is at most 63 characters: a valid key name). */
export function restartedForKey(userGroupName: string): string {
  return `${RESTARTED_FOR_PREFIX}${userGroupName}`;
}

export function parseWorkload(raw: unknown): Parsed<ObservedWorkload> {
  if (!isRecord(raw) || !isRecord(raw['metadata'])) return { ok: false, error: 'workload has no metadata' };
  const { resourceVersion, annotations } = raw['metadata'];
  if (typeof resourceVersion !== 'string' || resourceVersion === '') return { ok: false, error: 'workload has no resourceVersion' };
  const consent = isRecord(annotations) ? annotations[RESTART_CONSENT_ANNOTATION] : undefined;
  const spec = isRecord(raw['spec']) ? raw['spec'] : {};
  const template = isRecord(spec['template']) ? spec['template'] : {};
  const templateMeta = isRecord(template['metadata']) ? template['metadata'] : {};
  const templateAnnotations = isRecord(templateMeta['annotations']) ? templateMeta['annotations'] : {};
  const restartedFor: Record<string, string> = {};
  for (const [key, value] of Object.entries(templateAnnotations)) {
    if (key.startsWith(RESTARTED_FOR_PREFIX) && typeof value === 'string') restartedFor[key.slice(RESTARTED_FOR_PREFIX.length)] = value;
  }
  return {
    ok: true,
    value: {
      resourceVersion,
      consentsTo:
        typeof consent === 'string'
          ? consent
              .split(',')
              .map((n) => n.trim())
              .filter((n) => n !== '')
          : [],
      restartedFor,
    },
  };
}
