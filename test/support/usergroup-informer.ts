import pino from 'pino';
import { parseUserGroup, type UserGroup } from '../../src/api/usergroup.js';
import type { KubeClient } from '../../src/kube/http.js';
import { Informer, type InformerOptions } from '../../src/kube/informer.js';

/** An informer over one namespace's UserGroups, parsed as the controller parses them, logging nothing. */
export function userGroupInformer(
  client: KubeClient,
  namespace: string,
  options: Partial<Omit<InformerOptions<UserGroup>, 'client' | 'path' | 'parse'>> = {},
): Informer<UserGroup> {
  return new Informer<UserGroup>({
    name: 'usergroups',
    client,
    path: `/apis/usergroup.dev/v1/namespaces/${namespace}/usergroups`,
    parse: (raw) => {
      const parsed = parseUserGroup(raw);
      return parsed.ok ? parsed.value : undefined;
    },
    log: pino({ level: 'silent' }),
    ...options,
  });
}
