// The plugin's access to UserGroups at the apiserver: read, annotate with a precondition, watch one.
import { isRecord } from '../../platform/json-value.js';
import { parseUserGroup, type UserGroup } from '../../api/usergroup.js';
import { isConflict, isNotFound } from '../../kube/api-error.js';
import { call, type KubeClient } from '../../kube/http.js';
import { paths } from '../../kube/paths.js';
import { watchOnce, type WatchEnd } from '../../kube/watch-stream.js';

export type AnnotateResult =
  | { readonly kind: 'annotated'; readonly ug: UserGroup }
  /** The object changed since it was read (resourceVersion precondition): read it again and re-check. */
  | { readonly kind: 'conflict' }
  | { readonly kind: 'not-found' };

export type Observation =
  | { readonly kind: 'object'; readonly ug: UserGroup }
  | { readonly kind: 'deleted' }
  /** Nothing changed, but the watch may resume from here. */
  | { readonly kind: 'bookmark'; readonly resourceVersion: string };

export interface WatchOneOptions {
  readonly resourceVersion: string;
  readonly signal: AbortSignal;
  readonly timeoutSeconds: number;
  readonly inactivityMs: number;
  readonly onObservation: (observation: Observation) => void;
}

/** What the plugin's commands need from the apiserver: UserGroups only, never Secrets. */
export interface UserGroupAccess {
  get(namespace: string, name: string): Promise<UserGroup | undefined>;
  /** namespace undefined: all namespaces. `skipped` names objects whose metadata could not be read. */
  list(namespace: string | undefined): Promise<{ items: UserGroup[]; skipped: string[] }>;
  /** Merge-patches one annotation, only if the object is still at `resourceVersion`. */
  annotate(namespace: string, name: string, key: string, value: string, resourceVersion: string): Promise<AnnotateResult>;
  /** Watches one UserGroup (fieldSelector metadata.name) from `resourceVersion` until the watch ends. */
  watchOne(namespace: string, name: string, options: WatchOneOptions): Promise<WatchEnd>;
}

/** UserGroupAccess over the operator's KubeClient; every object is parsed into a typed UserGroup here, at the edge. */
export class KubeUserGroupAccess implements UserGroupAccess {
  constructor(private readonly client: KubeClient) {}

  async get(namespace: string, name: string): Promise<UserGroup | undefined> {
    const res = await call(this.client, 'GET', objectPath(namespace, name));
    if (res.ok) return parseOrThrow(res.body);
    if (isNotFound(res.error)) return undefined;
    throw res.error;
  }

  async list(namespace: string | undefined): Promise<{ items: UserGroup[]; skipped: string[] }> {
    const res = await call(this.client, 'GET', paths.userGroups(namespace));
    if (!res.ok) throw res.error;
    const raw = isRecord(res.body) && Array.isArray(res.body['items']) ? res.body['items'] : [];
    const items: UserGroup[] = [];
    const skipped: string[] = [];
    for (const item of raw) {
      const parsed = parseUserGroup(item);
      if (parsed.ok) items.push(parsed.value);
      else skipped.push(parsed.error);
    }
    return { items, skipped };
  }

  async annotate(namespace: string, name: string, key: string, value: string, resourceVersion: string): Promise<AnnotateResult> {
    // resourceVersion in a merge patch is a precondition: the checks made on the object we read still hold.
    const body = { metadata: { resourceVersion, annotations: { [key]: value } } };
    const res = await call(this.client, 'PATCH', objectPath(namespace, name), { body, contentType: 'application/merge-patch+json' });
    if (res.ok) return { kind: 'annotated', ug: parseOrThrow(res.body) };
    if (isConflict(res.error)) return { kind: 'conflict' };
    if (isNotFound(res.error)) return { kind: 'not-found' };
    throw res.error;
  }

  watchOne(namespace: string, name: string, options: WatchOneOptions): Promise<WatchEnd> {
    // watchOnce takes no field selector, but KubeClient keeps a query already in the path and adds its own
    // parameters to it, so the selector rides along in the path.
    const path = `${paths.userGroups(namespace)}?${new URLSearchParams({ fieldSelector: `metadata.name=${name}` }).toString()}`;
    return watchOnce(this.client, path, {
      resourceVersion: options.resourceVersion,
      timeoutSeconds: options.timeoutSeconds,
      inactivityMs: options.inactivityMs,
      signal: options.signal,
      onEvent: (event) => {
        if (event.type === 'DELETED') {
          options.onObservation({ kind: 'deleted' });
          return;
        }
        const meta = event.object['metadata'];
        if (event.type === 'BOOKMARK') {
          const rv = isRecord(meta) ? meta['resourceVersion'] : undefined;
          if (typeof rv === 'string') options.onObservation({ kind: 'bookmark', resourceVersion: rv });
          return;
        }
        const parsed = parseUserGroup(event.object);
        if (parsed.ok) options.onObservation({ kind: 'object', ug: parsed.value });
      },
    });
  }
}

function objectPath(namespace: string, name: string): string {
  return `${paths.userGroups(namespace)}/${encodeURIComponent(name)}`;
}

function parseOrThrow(body: unknown): UserGroup {
  const parsed = parseUserGroup(body);
  if (!parsed.ok) throw new Error(`the apiserver sent a UserGroup that cannot be read: ${parsed.error}`);
  return parsed.value;
}
