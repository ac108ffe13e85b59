// metav1.LabelSelector: parsed from the tenant rules, and matched against a namespace's labels.
import { stringMap, type Parsed } from './meta.js';
import { isRecord } from '../platform/json-value.js';

/** A metav1.LabelSelector, parsed: matchLabels and matchExpressions must all hold. */
export interface LabelSelector {
  readonly matchLabels: Readonly<Record<string, string>>;
  readonly matchExpressions: readonly LabelRequirement[];
}

export interface LabelRequirement {
  readonly key: string;
  readonly operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  readonly values: readonly string[];
}

const OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist'] as const;

export function parseLabelSelector(raw: unknown, field: string): Parsed<LabelSelector> {
  if (!isRecord(raw)) return { ok: false, error: `${field} must be an object` };
  const matchLabels = stringMap(raw['matchLabels']);
  if (!matchLabels) return { ok: false, error: `${field}.matchLabels must map strings to strings` };
  const expressions = raw['matchExpressions'] ?? [];
  if (!Array.isArray(expressions)) return { ok: false, error: `${field}.matchExpressions must be a list` };
  const matchExpressions: LabelRequirement[] = [];
  for (const [i, e] of expressions.entries()) {
    const at = `${field}.matchExpressions[${i}]`;
    if (!isRecord(e) || typeof e['key'] !== 'string' || e['key'] === '') return { ok: false, error: `${at}.key must be a non-empty string` };
    const operator = OPERATORS.find((o) => o === e['operator']);
    if (!operator) return { ok: false, error: `${at}.operator must be one of ${OPERATORS.join(', ')}` };
    const values = e['values'] ?? [];
    if (!Array.isArray(values) || !values.every((v): v is string => typeof v === 'string'))
      return { ok: false, error: `${at}.values must be a list of strings` };
    // The apiserver's own rule for label selectors: In/NotIn need values, Exists/DoesNotExist take none.
    if ((operator === 'In' || operator === 'NotIn') !== values.length > 0) {
      return { ok: false, error: `${at}: ${operator} ${operator === 'In' || operator === 'NotIn' ? 'needs' : 'takes no'} values` };
    }
    matchExpressions.push({ key: e['key'], operator, values });
  }
  return { ok: true, value: { matchLabels, matchExpressions } };
}

/** Kubernetes semantics: every requirement holds; an empty selector selects everything. */
export function selects(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels)) if (labels[k] !== v) return false;
  return selector.matchExpressions.every((r) => {
    const has = Object.hasOwn(labels, r.key);
    switch (r.operator) {
      case 'In':
        return has && r.values.includes(labels[r.key] ?? '');
      case 'NotIn':
        return !has || !r.values.includes(labels[r.key] ?? '');
      case 'Exists':
        return has;
      case 'DoesNotExist':
        return !has;
    }
  });
}
