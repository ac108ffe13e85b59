// The controller's view of the cluster: its six informer caches, the indexes kept over them, and the verified tokens.
import type { Logger } from 'pino';
import { CLAIM_NAMESPACE_LABEL, USERGROUP_KIND } from '../api/constants.js';
import { parseClaim, type UserGroupClaim } from '../api/claim.js';
import { parseClusterUserGroupService, type ClusterUserGroupService } from '../api/clusterusergroupservice.js';
import { objectKey, parseMeta, type ObjectMeta } from '../api/meta.js';
import { isTokenSecret, parseCachedSecret, type CachedSecret, type ObservedSecret } from '../api/secret.js';
import { parseUserGroup, type UserGroup } from '../api/usergroup.js';
import { parseUserGroupService, type UserGroupService } from '../api/usergroupservice.js';
import { InformerGroup, NarrowedCache } from '../kube/cache.js';
import type { KubeClient } from '../kube/http.js';
import { Informer, type Cached, type InformerOptions, type InformerStats } from '../kube/informer.js';
import { paths } from '../kube/paths.js';
import { isRecord } from '../platform/json-value.js';
import { KeyMultimap } from './key-multimap.js';
import { UserGroupIdIndex } from './usergroup-index.js';
import { VerifiedSecrets } from './verified-secrets.js';

/** A namespace as the tenant rules see it: its labels (set by cluster admins). */
export interface NamespaceLabels {
  readonly metadata: ObjectMeta;
}

export interface CachesOptions {
  readonly client: KubeClient;
  readonly log: Logger;
  /** Namespaces to watch; empty = all. */
  readonly namespaces: readonly string[];
  readonly watchInactivityMs?: number | undefined;
  /**
   * This replica's share of the namespaces (--shard-by-namespace); absent: all. Objects of other namespaces are
   * dropped before they are parsed or cached.
   */
  readonly owns?: ((namespace: string) => boolean) | undefined;
}

interface Admit {
  admit?: (metadata: Readonly<Record<string, unknown>>) => boolean;
}

/** What the caches have in common, whatever they hold. */
interface CacheLifecycle {
  start(): void;
  waitForSync(): Promise<void>;
  readonly synced: boolean;
  stop(): Promise<void>;
  readonly informers: readonly { readonly name: string; readonly stats: InformerStats; failingForMs(): number }[];
}

/**
 * What the controller keeps of the cluster: six caches (one informer per watched namespace each, or one
 * cluster-wide), the indexes over them, and what this process knows of its token Secrets' data. Informers run from
 * start() on every replica, standbys included, so a takeover starts warm. Indexes are kept by the caches' own
 * handlers, registered first: a trigger (triggers.ts) always sees them current.
 */
export class Caches {
  readonly userGroups: InformerGroup<UserGroup>;
  /** Every Secret's metadata, from one watch: token Secrets trimmed (parseCachedSecret), any other by name. */
  private readonly allSecrets: InformerGroup<CachedSecret>;
  /** Token Secrets (metadata only): those with our label that a UserGroup controls. */
  readonly secrets: NarrowedCache<CachedSecret, ObservedSecret>;
  readonly services: InformerGroup<UserGroupService>;
  readonly clusterServices: InformerGroup<ClusterUserGroupService>;
  readonly claims: InformerGroup<UserGroupClaim>;
  readonly namespaces: InformerGroup<NamespaceLabels>;
  /** userGroupId → UserGroup keys. */
  readonly byUserGroupId = new UserGroupIdIndex();
  /** Owner UserGroup uid → keys of the token Secrets it controls. */
  readonly secretsByOwner = new KeyMultimap();
  /** Holder UserGroup uid → names of the UserGroupClaims it holds. */
  readonly claimsByHolder = new KeyMultimap();
  readonly verified = new VerifiedSecrets();

  constructor(options: CachesOptions) {
    const { owns } = options;
    const base = { client: options.client, log: options.log, ...(options.watchInactivityMs !== undefined ? { inactivityMs: options.watchInactivityMs } : {}) };
    const admit = (namespaceOf: (metadata: Readonly<Record<string, unknown>>) => unknown): Admit =>
      owns ? { admit: (m) => ((ns) => typeof ns === 'string' && owns(ns))(namespaceOf(m)) } : {};
    const byNamespace = admit((m) => m['namespace']);
    const watchedNamespaces = options.namespaces.length > 0 ? options.namespaces : [''];
    const namespaced = <T extends Cached>(
      name: string,
      path: (ns?: string) => string,
      parse: (raw: unknown) => T | undefined,
      extra: Partial<InformerOptions<T>> = {},
    ): InformerGroup<T> =>
      new InformerGroup(
        new Map(watchedNamespaces.map((ns) => [ns, new Informer<T>({ ...base, name, path: path(ns || undefined), parse, ...byNamespace, ...extra })])),
      );
    // Cluster-scoped: one informer whatever --namespaces says (a shard still needs the connections and claims).
    const cluster = <T extends Cached>(
      name: string,
      path: string,
      parse: (raw: unknown) => T | undefined,
      extra: Partial<InformerOptions<T>> = {},
    ): InformerGroup<T> => new InformerGroup(new Map([['', new Informer<T>({ ...base, name, path, parse, ...extra })]]));

    this.userGroups = namespaced('usergroups', paths.userGroups, (raw) => okOrUndefined(parseUserGroup(raw)));
    // Metadata only: a tenant can put 1 MiB of data on each of its Secrets, and the label on any of them. One
    // watch for all Secrets (not one per side of a label selector): the names of the others tell whether a token
    // Secret can be created without a read first. The data is read when a reconcile needs it.
    this.allSecrets = namespaced('secrets', paths.secrets, parseCachedSecret, { metadataOnly: true });
    this.secrets = new NarrowedCache(this.allSecrets, isTokenSecret);
    this.services = namespaced('usergroupservices', paths.userGroupServices, (raw) => okOrUndefined(parseUserGroupService(raw)));
    this.clusterServices = cluster('clusterusergroupservices', paths.clusterUserGroupServices(), (raw) => okOrUndefined(parseClusterUserGroupService(raw)));
    // A shard keeps its own namespaces' claims, and any other it had to read (a refusal then hears of its release).
    this.claims = cluster(
      'usergroupclaims',
      paths.claims(),
      (raw) => okOrUndefined(parseClaim(raw)),
      admit((m) => (isRecord(m['labels']) ? m['labels'][CLAIM_NAMESPACE_LABEL] : undefined)),
    );
    this.namespaces = cluster('namespaces', paths.namespaces(), parseNamespaceLabels, { metadataOnly: true, ...admit((m) => m['name']) });
    this.keepIndexes();
  }

  private keepIndexes(): void {
    this.userGroups.on((type, ug) => this.byUserGroupId.update(type, ug));
    this.secrets.on((type, secret) => {
      const owner = tokenSecretOwner(secret);
      if (!owner) return;
      const key = objectKey(secret.metadata);
      if (type === 'deleted') {
        this.verified.forget(key);
        this.secretsByOwner.delete(owner.uid, key);
      } else {
        this.secretsByOwner.add(owner.uid, key);
      }
    });
    this.claims.on((type, claim, old) => {
      if (old && old.spec.userGroup.uid !== claim.spec.userGroup.uid) this.claimsByHolder.delete(old.spec.userGroup.uid, claim.metadata.name);
      if (type === 'deleted') this.claimsByHolder.delete(claim.spec.userGroup.uid, claim.metadata.name);
      else this.claimsByHolder.add(claim.spec.userGroup.uid, claim.metadata.name);
    });
  }

  /** Every cache alike, for what applies to all of them. */
  private all(): readonly CacheLifecycle[] {
    return [this.userGroups, this.allSecrets, this.services, this.clusterServices, this.claims, this.namespaces];
  }

  /** Starts the informers and waits for their first list. */
  async start(): Promise<void> {
    for (const group of this.all()) group.start();
    await Promise.all(this.all().map((g) => g.waitForSync()));
  }

  get synced(): boolean {
    return this.all().every((g) => g.synced);
  }

  async stop(): Promise<void> {
    await Promise.all(this.all().map((g) => g.stop()));
  }

  /** The longest time any informer has been failing to list or watch. */
  watchFailingForMs(): number {
    return Math.max(0, ...this.all().flatMap((g) => g.informers.map((i) => i.failingForMs())));
  }

  /** Each informer's list and watch counts, by resource name (one per watched namespace). */
  informerStats(): { readonly name: string; readonly stats: InformerStats }[] {
    return this.all().flatMap((g) => g.informers.map((i) => ({ name: i.name, stats: i.stats })));
  }

  /** The UserGroups declaring this userGroupId. */
  withUserGroupId(userGroupId: string): UserGroup[] {
    return this.byUserGroupId.keys(userGroupId).flatMap((k) => this.userGroups.get(k) ?? []);
  }

  /** Whether a Secret other than a token Secret has this key: creating a token Secret there would fail. */
  otherSecretExists(key: string): boolean {
    const secret = this.allSecrets.get(key);
    return secret !== undefined && !isTokenSecret(secret);
  }

  /** The cached token Secrets this UserGroup controls. */
  ownedSecrets(ug: UserGroup): ObservedSecret[] {
    return this.secretsByOwner.get(ug.metadata.uid).flatMap((key) => this.secrets.get(key) ?? []);
  }
}

/** The UserGroup that controls a token Secret, as its owner reference names it. */
export function tokenSecretOwner(secret: ObservedSecret): { readonly name: string; readonly uid: string } | undefined {
  return secret.metadata.ownerReferences.find((o) => o.controller && o.kind === USERGROUP_KIND);
}

function parseNamespaceLabels(raw: unknown): NamespaceLabels | undefined {
  const meta = okOrUndefined(parseMeta(isRecord(raw) ? raw['metadata'] : undefined));
  return meta && { metadata: meta };
}

function okOrUndefined<T>(parsed: { ok: true; value: T } | { ok: false; error: string }): T | undefined {
  return parsed.ok ? parsed.value : undefined;
}
