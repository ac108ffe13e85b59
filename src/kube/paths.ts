// The apiserver paths of every resource the operator reads or writes.
import type { RestartKind } from '../api/workload.js';
import { CLAIM_PLURAL, CLAIM_VERSION, CLUSTERUSERGROUPSERVICE_PLURAL, GROUP, USERGROUP_PLURAL, USERGROUPSERVICE_PLURAL, VERSION } from '../api/constants.js';

const WORKLOAD_PLURALS: Readonly<Record<RestartKind, string>> = { Deployment: 'deployments', StatefulSet: 'statefulsets', DaemonSet: 'daemonsets' };

const ns = (namespace: string | undefined): string => (namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '');

/** Collection and object paths of the resources the operator touches; no namespace = cluster-wide. */
export const paths = {
  userGroups: (namespace?: string): string => `/apis/${GROUP}/${VERSION}${ns(namespace)}/${USERGROUP_PLURAL}`,
  userGroup: (namespace: string, name: string): string => `${paths.userGroups(namespace)}/${encodeURIComponent(name)}`,
  userGroupStatus: (namespace: string, name: string): string => `${paths.userGroup(namespace, name)}/status`,
  userGroupServices: (namespace?: string): string => `/apis/${GROUP}/${VERSION}${ns(namespace)}/${USERGROUPSERVICE_PLURAL}`,
  clusterUserGroupServices: (): string => `/apis/${GROUP}/${VERSION}/${CLUSTERUSERGROUPSERVICE_PLURAL}`,
  claims: (): string => `/apis/${GROUP}/${CLAIM_VERSION}/${CLAIM_PLURAL}`,
  claim: (name: string): string => `${paths.claims()}/${encodeURIComponent(name)}`,
  namespaces: (): string => '/api/v1/namespaces',
  namespace: (name: string): string => `/api/v1/namespaces/${encodeURIComponent(name)}`,
  secrets: (namespace?: string): string => `/api/v1${ns(namespace)}/secrets`,
  secret: (namespace: string, name: string): string => `${paths.secrets(namespace)}/${encodeURIComponent(name)}`,
  events: (namespace: string): string => `/apis/events.k8s.io/v1${ns(namespace)}/events`,
  event: (namespace: string, name: string): string => `${paths.events(namespace)}/${encodeURIComponent(name)}`,
  /** Deployments, StatefulSets and DaemonSets (apps/v1), by kind. */
  workload: (namespace: string, kind: RestartKind, name: string): string =>
    `/apis/apps/v1${ns(namespace)}/${WORKLOAD_PLURALS[kind]}/${encodeURIComponent(name)}`,
  pods: (namespace: string): string => `/api/v1${ns(namespace)}/pods`,
  pod: (namespace: string, name: string): string => `${paths.pods(namespace)}/${encodeURIComponent(name)}`,
  leases: (namespace: string): string => `/apis/coordination.k8s.io/v1${ns(namespace)}/leases`,
  lease: (namespace: string, name: string): string => `${paths.leases(namespace)}/${encodeURIComponent(name)}`,
};
