// A small parser of the Prometheus text exposition format (0.0.4): strict, for tests of what /metrics serves.
// Free of vitest, so that scripts run outside it can use it too. (devtools/bench/controller.ts keeps a lenient
// parser of its own: it reads samples whatever their family, and must not fail a long run on one odd line.)

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Family {
  readonly name: string;
  help: string | undefined;
  type: string | undefined;
  readonly samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

/** A sample value (or an `le` bound): a number, +Inf, -Inf or NaN. */
export function parseValue(text: string): number {
  if (text === '+Inf' || text === 'Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  const n = Number(text);
  if (text === '' || Number.isNaN(n)) throw new Error(`bad sample value "${text}"`);
  return n;
}

/** Parses the text format strictly: every sample must belong to a family declared by HELP/TYPE. */
export function parsePrometheus(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const family = (name: string): Family => {
    let f = families.get(name);
    if (!f) {
      f = { name, help: undefined, type: undefined, samples: [] };
      families.set(name, f);
    }
    return f;
  };
  const owner = (sampleName: string): Family => {
    const candidates = [sampleName];
    for (const suffix of ['_bucket', '_sum', '_count', '_total', '_created']) {
      if (sampleName.endsWith(suffix)) candidates.push(sampleName.slice(0, -suffix.length));
    }
    for (const c of candidates) {
      const f = families.get(c);
      if (f?.type !== undefined) return f;
    }
    throw new Error(`sample ${sampleName} has no # TYPE line`);
  };
  for (const [index, rawLine] of text.split('\n').entries()) {
    const line = rawLine.trimEnd();
    if (line === '') continue;
    const where = `line ${index + 1}: ${line}`;
    if (line.startsWith('#')) {
      const m = /^#\s+(HELP|TYPE)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\s+(.*))?$/.exec(line);
      if (!m) continue; // a plain comment
      const f = family(m[2] ?? '');
      if (m[1] === 'HELP') f.help = (m[3] ?? '').replace(/\\n/g, '\n').replace(/\\\\/g, '\\');
      else {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(m[3] ?? '')) throw new Error(`bad TYPE, ${where}`);
        f.type = m[3];
      }
      continue;
    }
    const nameMatch = METRIC_NAME.exec(line);
    if (!nameMatch) throw new Error(`no metric name, ${where}`);
    const name = nameMatch[0];
    let rest = line.slice(name.length);
    const labels: Record<string, string> = {};
    if (rest.startsWith('{')) {
      rest = rest.slice(1);
      for (;;) {
        rest = rest.trimStart();
        if (rest.startsWith('}')) {
          rest = rest.slice(1);
          break;
        }
        const ln = LABEL_NAME.exec(rest);
        if (!ln) throw new Error(`bad label name, ${where}`);
        rest = rest.slice(ln[0].length);
        if (!rest.startsWith('="')) throw new Error(`bad label, ${where}`);
        rest = rest.slice(2);
        let value = '';
        for (;;) {
          const ch = rest[0];
          if (ch === undefined) throw new Error(`unterminated label value, ${where}`);
          rest = rest.slice(1);
          if (ch === '"') break;
          if (ch === '\\') {
            const next = rest[0];
            rest = rest.slice(1);
            value += next === 'n' ? '\n' : next === '\\' ? '\\' : next === '"' ? '"' : `\\${next ?? ''}`;
          } else value += ch;
        }
        if (ln[0] in labels) throw new Error(`duplicate label ${ln[0]}, ${where}`);
        labels[ln[0]] = value;
        rest = rest.trimStart();
        if (rest.startsWith(',')) rest = rest.slice(1);
        else if (!rest.startsWith('}')) throw new Error(`expected , or }, ${where}`);
      }
    }
    const parts = rest.trim().split(/\s+/);
    if (parts.length < 1 || parts.length > 2 || !/^\s/.test(rest)) throw new Error(`bad sample, ${where}`);
    owner(name).samples.push({ name, labels, value: parseValue(parts[0] ?? '') });
  }
  return families;
}
