import { spawnSync } from 'node:child_process';
import { isDeepStrictEqual } from 'node:util';

/**
 * Runs Argo CD resource customization scripts (health checks, action discovery, actions) with
 * Debian's real Lua 5.1 interpreter, in a sandbox shaped like Argo CD's: gopher-lua (Lua 5.1) with
 * only the base, table and package libraries and a "safe" os holding time and date. A script that
 * uses string.*, math.*, io.* or ("x"):method() passes a plain Lua test but fails in Argo CD, so it
 * fails here too. Objects go in as Lua table literals (no JSON library in Lua needed); results come
 * back as JSON, encoded the way Argo CD's gopher-json does (an empty table is []).
 */

export const LUA = 'lua5.1';

export interface LuaRunOptions {
  /** Chunk name in error messages, e.g. "health.lua". */
  readonly name?: string;
  /** Pins the clock seen by os.time()/os.date() (Unix seconds), so time-based results are testable. */
  readonly clock?: number;
}

/** `lua5.1 -v`, e.g. "Lua 5.1.5  Copyright (C) 1994-2012 Lua.org, PUC-Rio"; throws when lua5.1 is missing. */
export function luaVersion(): string {
  const res = spawnSync(LUA, ['-v'], { encoding: 'utf8' });
  if (res.error) throw missingLua(res.error);
  return `${res.stdout}${res.stderr}`.trim();
}

/**
 * Runs `source` as Argo CD does: `obj` is a global holding the object, and the result is the
 * chunk's last return value (Argo CD reads the top of the stack). Returns it as JSON; throws
 * with Lua's error message when the script fails.
 */
export function runArgoCdLua(source: string, obj: unknown, options: LuaRunOptions = {}): unknown {
  const program = harness(source, obj, options);
  const res = spawnSync(LUA, ['-'], { input: program, encoding: 'utf8', timeout: 10_000 });
  if (res.error) throw missingLua(res.error);
  if (res.status !== 0) throw new Error(`${LUA} exited with ${String(res.status)}: ${res.stderr}`);
  const envelope = JSON.parse(res.stdout) as { ok: boolean; value?: unknown; error?: string };
  if (!envelope.ok) throw new Error(`${options.name ?? 'script'} failed: ${envelope.error ?? 'unknown error'}`);
  return envelope.value ?? null;
}

function missingLua(err: Error): Error {
  return new Error(
    `cannot run ${LUA} (${err.message}): the Argo CD Lua tests need Debian's real Lua 5.1 interpreter; ` +
      'install it with `apt-get install lua5.1`',
  );
}

/** A Lua expression for a JSON-like value: tables for objects and arrays, nil for null/undefined. */
export function toLua(value: unknown): string {
  if (value === null || value === undefined) return 'nil';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new Error(`cannot pass ${value} to Lua`);
      // JavaScript prints e.g. 1e+21 or 1.5e-7, which Lua's strtod-based lexer reads alike.
      return String(value);
    case 'string':
      return luaString(value);
    case 'object': {
      if (Array.isArray(value)) {
        // A nil inside a Lua sequence leaves a hole; Kubernetes objects never hold null in a list.
        if (value.some((v) => v === null || v === undefined)) throw new Error('cannot pass null inside an array to Lua');
        return `{${value.map(toLua).join(', ')}}`;
      }
      const fields = Object.entries(value as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => `[${luaString(k)}] = ${toLua(v)}`);
      return `{${fields.join(', ')}}`;
    }
    default:
      throw new Error(`cannot pass a ${typeof value} to Lua`);
  }
}

/** A quoted Lua string: printable ASCII as is, every other UTF-8 byte as \ddd (three digits, so a following digit is safe). */
export function luaString(text: string): string {
  let out = '"';
  for (const byte of Buffer.from(text, 'utf8')) {
    const printable = byte >= 0x20 && byte <= 0x7e && byte !== 0x22 && byte !== 0x5c;
    out += printable ? String.fromCharCode(byte) : `\\${byte.toString().padStart(3, '0')}`;
  }
  return `${out}"`;
}

/** A Lua long string [==[...]==] whose level does not occur in the text. */
function longString(text: string): string {
  let level = '';
  while (text.includes(`]${level}]`)) level += '=';
  // Lua drops a newline right after the opening bracket: add one so the text's own first line survives.
  return `[${level}[\n${text}]${level}]`;
}

function harness(source: string, obj: unknown, options: LuaRunOptions): string {
  return `
-- The harness keeps what it needs before the sandbox takes it away from the script.
local type, pairs, next, tostring, select, pcall, error, loadstring = type, pairs, next, tostring, select, pcall, error, loadstring
local format, gsub, byte = string.format, string.gsub, string.byte
local concat, sort = table.concat, table.sort
local floor, huge = math.floor, math.huge
local realDate, realTime, write = os.date, os.time, io.write
local CLOCK = ${options.clock === undefined ? 'nil' : toLua(options.clock)}

-- Argo CD's sandbox: base, table, package, and an os with time and date only.
local function now() if CLOCK ~= nil then return CLOCK end return realTime() end
os = {
  time = function(t) if t == nil then return now() end return realTime(t) end,
  date = function(fmt, t) return realDate(fmt or "%c", t or now()) end,
}
string, math, io, debug, coroutine = nil, nil, nil, nil, nil
for _, lib in pairs({ "string", "math", "io", "debug", "coroutine" }) do package.loaded[lib] = nil end
package.loaded.os = os
getmetatable("").__index = nil

-- JSON out, the way gopher-json encodes a Lua value for Argo CD.
local encode
local function escape(c)
  if c == '"' then return '\\\\"' end
  if c == "\\\\" then return "\\\\\\\\" end
  return format("\\\\u%04x", byte(c))
end
encode = function(v)
  local t = type(v)
  if t == "nil" then return "null" end
  if t == "boolean" then return tostring(v) end
  if t == "number" then
    if v ~= v or v == huge or v == -huge then error("cannot encode " .. tostring(v)) end
    if v == floor(v) and v > -1e15 and v < 1e15 then return format("%d", v) end
    return format("%.17g", v)
  end
  if t == "string" then return '"' .. gsub(v, '[%c"\\\\]', escape) .. '"' end
  if t ~= "table" then error("cannot encode a " .. t) end
  local first = next(v)
  if first == nil then return "[]" end
  local parts = {}
  if type(first) == "number" then
    local n = 0
    for k in pairs(v) do
      if type(k) ~= "number" then error("cannot encode a table with mixed keys") end
      n = n + 1
    end
    for i = 1, n do
      if v[i] == nil then error("cannot encode a sparse array") end
      parts[i] = encode(v[i])
    end
    return "[" .. concat(parts, ",") .. "]"
  end
  local keys = {}
  for k in pairs(v) do
    if type(k) ~= "string" then error("cannot encode a table with mixed keys") end
    keys[#keys + 1] = k
  end
  sort(keys)
  for i, k in pairs(keys) do parts[i] = encode(k) .. ":" .. encode(v[k]) end
  return "{" .. concat(parts, ",") .. "}"
end

local function envelope(ok, value)
  local encoded, out = pcall(encode, value)
  if not encoded then ok, value = false, "the result cannot be encoded: " .. tostring(out) end
  if ok then write('{"ok":true,"value":' .. out .. '}') else write('{"ok":false,"error":' .. encode(tostring(value)) .. '}') end
end

obj = ${toLua(obj)}

local chunk, compileError = loadstring(${longString(source)}, ${luaString(`=${options.name ?? 'script'}`)})
if chunk == nil then
  envelope(false, compileError)
else
  local function pack(...) return { n = select("#", ...), ... } end
  local results = pack(pcall(chunk))
  local last = nil
  if results.n >= 2 then last = results[results.n] end
  if results[1] then envelope(true, last) else envelope(false, results[2]) end
end
`;
}

type JsonObject = Record<string, unknown>;

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * What Argo CD sends after running an action: it first undoes gopher-json's "empty table is []"
 * where the live object had a map (Argo CD's cleanReturnedObj), then diffs live and result into a
 * JSON merge patch (RFC 7386, jsonpatch.CreateMergePatch), sent as application/merge-patch+json.
 * `{}` means Argo CD sends nothing.
 */
export function argoCdActionPatch(live: unknown, returned: unknown): JsonObject {
  if (!isObject(live) || !isObject(returned)) throw new Error('an action must return the object');
  return mergePatch(live, cleanReturned(returned, live) as JsonObject);
}

function cleanReturned(value: unknown, old: unknown): unknown {
  if (Array.isArray(value)) {
    if (isObject(old) && value.length === 0) return old;
    if (Array.isArray(old)) return value.map((v, i) => cleanReturned(v, old[i]));
    return value;
  }
  if (isObject(value) && isObject(old)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k in old ? cleanReturned(v, old[k]) : v]));
  }
  return value;
}

function mergePatch(from: JsonObject, to: JsonObject): JsonObject {
  const patch: JsonObject = {};
  for (const key of Object.keys(from)) if (!(key in to)) patch[key] = null;
  for (const [key, value] of Object.entries(to)) {
    const before = from[key];
    if (isObject(before) && isObject(value)) {
      const nested = mergePatch(before, value);
      if (Object.keys(nested).length > 0) patch[key] = nested;
    } else if (!(key in from) || !isDeepStrictEqual(before, value)) {
      patch[key] = value;
    }
  }
  return patch;
}
