// The id-binding policy (policies/id-binding.ts): the one namespace the tenant rules let hold an id, if any.
import { describe, expect, it } from 'vitest';
import type { ClusterUserGroupService } from '../../../src/api/clusterusergroupservice.js';
import { boundNamespace } from '../../../src/controller/policies/id-binding.js';
import { clusterService } from '../../support/fixtures.js';

/** Whether the admins' rules leave an id to exactly one namespace: then it needs no claim (pure). */

const bySelector = { matchLabels: { tenant: 'true' } };

describe('boundNamespace', () => {
  it("one namespace by name, any id (the benchmark's rule): bound to it", () => {
    const services = [clusterService('s', [{ namespaces: ['bench'], userGroupIds: { prefix: '' } }])];
    expect(boundNamespace('anything', services)).toBe('bench');
  });

  it('two namespaces by name for the same ids: bound to neither', () => {
    const services = [clusterService('s', [{ namespaces: ['a', 'b'], userGroupIds: { prefix: '' } }])];
    expect(boundNamespace('x', services)).toBeUndefined();
  });

  it('"{namespace}." by name or by labels: bound to the namespace the id names, whatever gets the labels later', () => {
    for (const rule of [{ namespaces: ['team-a', 'team-b'] }, { namespaceSelector: bySelector }, { namespaces: ['team-a'], namespaceSelector: bySelector }]) {
      const services = [clusterService('s', [{ ...rule, userGroupIds: { prefix: '{namespace}.' } }])];
      expect(boundNamespace('team-a.acme', services)).toBe('team-a');
      expect(boundNamespace('team-b.acme.eu', services)).toBe('team-b');
    }
  });

  it('by labels, a template without {namespace}: any namespace may get the labels, so bound to none', () => {
    const services = [clusterService('s', [{ namespaceSelector: bySelector, userGroupIds: { prefix: 'shared.' } }])];
    expect(boundNamespace('shared.x', services)).toBeUndefined();
    expect(boundNamespace('other', services)).toBeUndefined(); // the rule gives no one "other"
  });

  it('exact ids: each bound to the namespace it names, unless another namespace could fill a template to it', () => {
    const services = [clusterService('s', [{ namespaceSelector: bySelector, userGroupIds: { exact: ['{namespace}', 'eu.{namespace}'] } }])];
    expect(boundNamespace('billing', services)).toBe('billing');
    expect(boundNamespace('eu.billing', services)).toBe('billing');
    // "x-y" is namespace "x-y"'s own id and namespace "y"'s "x-" id.
    const ambiguous = [clusterService('s', [{ namespaceSelector: bySelector, userGroupIds: { exact: ['{namespace}', 'x-{namespace}'] } }])];
    expect(boundNamespace('x-y', ambiguous)).toBeUndefined();
    expect(boundNamespace('y', ambiguous)).toBe('y');
  });

  it('a second rule or a second ClusterUserGroupService that gives the id to another namespace unbinds it', () => {
    const mine = clusterService('s', [{ namespaces: ['team-a'], userGroupIds: { prefix: '' } }]);
    expect(boundNamespace('x', [mine, clusterService('t', [{ namespaces: ['team-b'], userGroupIds: { prefix: 'x' } }])])).toBeUndefined();
    expect(boundNamespace('x', [mine, clusterService('t', [{ namespaces: ['team-b'], userGroupIds: { prefix: 'y' } }])])).toBe('team-a');
    const widened = clusterService('s', [
      { namespaces: ['team-a'], userGroupIds: { prefix: '' } },
      { namespaces: ['team-b'], userGroupIds: { exact: ['x'] } },
    ]);
    expect(boundNamespace('x', [widened])).toBeUndefined();
    expect(boundNamespace('y', [widened])).toBe('team-a');
  });

  it('no rule gives the id: bound to none (the rules refuse it anyway)', () => {
    expect(boundNamespace('x', [])).toBeUndefined();
    expect(boundNamespace('x', [clusterService('s', [{ namespaces: ['a'], userGroupIds: { prefix: 'y' } }])])).toBeUndefined();
  });

  it('a ClusterUserGroupService whose spec does not parse serves no one and binds nothing', () => {
    const broken: ClusterUserGroupService = { metadata: clusterService('b', []).metadata, spec: { ok: false, error: 'bad' } };
    expect(boundNamespace('x', [broken, clusterService('s', [{ namespaces: ['a'], userGroupIds: { prefix: '' } }])])).toBe('a');
  });
});
