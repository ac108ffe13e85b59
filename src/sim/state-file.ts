// The simulator's state file (its groups, tokens included): loading, and debounced writes with mode 0600.
import { randomBytes } from 'node:crypto';
import { open, readFile, rename, unlink } from 'node:fs/promises';
import { describeJson, isJsonObject, parseJsonObject, type JsonObject, type JsonValue, type Parsed } from './json.js';
import { parseUpsertRequest } from './requests.js';
import type { GroupRecord } from './store.js';
import { isTokenShaped } from './token.js';

/**
 * The state file is the simulated service's storage, tokens included, so it is written
 * with mode 0600. Format: {"version":1,"groups":[GroupRecord...]}.
 */
const STATE_VERSION = 1;

function isTimestamp(value: JsonValue | undefined): value is string {
  return typeof value === 'string' && !Number.isNaN(Date.parse(value));
}

function parseRecord(entry: JsonValue, index: number): Parsed<GroupRecord> {
  const where = `groups[${index}]`;
  if (!isJsonObject(entry)) return { ok: false, message: `${where} must be an object, got ${describeJson(entry)}` };
  const { teamId, userGroupId, name, mapping, properties, environmentTag, token, rotations, createdAt, updatedAt } = entry;
  // The request parser already knows what a valid id, name, mapping and properties are.
  const request: JsonObject = { user_group_id: userGroupId ?? null, name: name ?? null };
  if (mapping !== undefined) request.mapping = mapping;
  if (properties !== undefined) request.properties = properties;
  const fields = parseUpsertRequest(request);
  if (!fields.ok) return { ok: false, message: `${where}: ${fields.message}` };
  if (typeof teamId !== 'number' || !Number.isSafeInteger(teamId) || teamId <= 0) {
    return { ok: false, message: `${where}.teamId must be a positive integer` };
  }
  if (environmentTag !== 'Customer' && environmentTag !== 'Testing') {
    return { ok: false, message: `${where}.environmentTag must be "Customer" or "Testing"` };
  }
  if (typeof token !== 'string' || !isTokenShaped(token)) {
    return { ok: false, message: `${where}.token must be 64 characters of [A-Za-z0-9]` };
  }
  if (typeof rotations !== 'number' || !Number.isSafeInteger(rotations) || rotations < 0) {
    return { ok: false, message: `${where}.rotations must be a non-negative integer` };
  }
  if (!isTimestamp(createdAt) || !isTimestamp(updatedAt)) {
    return { ok: false, message: `${where}.createdAt and updatedAt must be ISO 8601 timestamps` };
  }
  return {
    ok: true,
    value: {
      teamId,
      userGroupId: fields.value.userGroupId,
      name: fields.value.name,
      mapping: fields.value.mapping,
      properties: fields.value.properties,
      environmentTag,
      token,
      rotations,
      createdAt,
      updatedAt,
    },
  };
}

export function parseState(text: string): Parsed<GroupRecord[]> {
  const body = parseJsonObject(text, 'the state file');
  if (!body.ok) return body;
  if (body.value.version !== STATE_VERSION) {
    return { ok: false, message: `the state file has version ${JSON.stringify(body.value.version ?? null)}; expected ${STATE_VERSION}` };
  }
  const groups = body.value.groups;
  if (!Array.isArray(groups)) return { ok: false, message: 'the state file has no "groups" array' };
  const records: GroupRecord[] = [];
  for (const [index, entry] of groups.entries()) {
    const record = parseRecord(entry, index);
    if (!record.ok) return record;
    records.push(record.value);
  }
  return { ok: true, value: records };
}

export function serializeState(records: readonly GroupRecord[]): string {
  return `${JSON.stringify({ version: STATE_VERSION, groups: records })}\n`;
}

/**
 * Reads the state file; a missing file is an empty service.
 * @throws Error when the file cannot be read or is not a valid state file, rather than
 *   starting empty and overwriting the groups it held on the first write
 */
export async function loadState(path: string): Promise<GroupRecord[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (error instanceof Error && 'code' in error && error.code === 'ENOENT') return [];
    throw error;
  }
  const state = parseState(text);
  if (!state.ok) throw new Error(`cannot load state file ${path}: ${state.message}`);
  return state.value;
}

/** Writes a temp file next to the target and renames it over, so a crash never leaves half a file. */
async function writeFileAtomically(path: string, text: string): Promise<void> {
  const temp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  const handle = await open(temp, 'wx', 0o600);
  try {
    await handle.writeFile(text, 'utf8');
    await handle.sync();
  } catch (error) {
    await handle.close();
    await unlink(temp).catch(() => undefined);
    throw error;
  }
  await handle.close();
  try {
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw error;
  }
}

/**
 * Writes the state at most once per delay however many mutations happen, and one write at
 * a time; flush() writes what is pending now. snapshot() is read when a write starts, so a
 * write always holds the latest state.
 */
export class DebouncedStateWriter {
  readonly #path: string;
  readonly #snapshot: () => string;
  readonly #delayMs: number;
  readonly #onError: (error: unknown) => void;
  #dirty = false;
  #timer: NodeJS.Timeout | undefined;
  #chain: Promise<void> = Promise.resolve();

  constructor(path: string, snapshot: () => string, delayMs: number, onError: (error: unknown) => void) {
    this.#path = path;
    this.#snapshot = snapshot;
    this.#delayMs = delayMs;
    this.#onError = onError;
  }

  schedule(): void {
    this.#dirty = true;
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#write().catch(this.#onError);
    }, this.#delayMs);
    // A pending write must not keep a process alive on its own; stop() flushes it.
    this.#timer.unref();
  }

  /** @throws the write's error, so a caller that stops knows the state did not reach disk */
  async flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#write();
  }

  #write(): Promise<void> {
    const run = this.#chain.then(async () => {
      if (!this.#dirty) return;
      this.#dirty = false;
      try {
        await writeFileAtomically(this.#path, this.#snapshot());
      } catch (error) {
        this.#dirty = true;
        throw error;
      }
    });
    this.#chain = run.catch(() => undefined);
    return run;
  }
}
