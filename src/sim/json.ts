// JSON values and parse results for the simulator's input checks.
/** A value as JSON.parse produces it. */
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;

export interface JsonObject {
  [key: string]: JsonValue;
}

/** The outcome of turning untrusted input into a typed value. */
export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly message: string };

export function parsed<T>(value: T): Parsed<T> {
  return { ok: true, value };
}

export function rejected<T>(message: string): Parsed<T> {
  return { ok: false, message };
}

/** True for a JSON object; arrays and null are not objects here. */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Parses text that must hold a JSON object. */
export function parseJsonObject(text: string, what: string): Parsed<JsonObject> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return rejected(`${what} is not valid JSON`);
  }
  if (!isJsonObject(value)) {
    return rejected(`${what} must be a JSON object, got ${describeJson(value)}`);
  }
  return parsed(value);
}

/** Names the JSON type of a value, for error messages (never echoes the value itself). */
export function describeJson(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  switch (typeof value) {
    case 'string':
      return 'a string';
    case 'number':
      return 'a number';
    case 'boolean':
      return 'a boolean';
    case 'object':
      return 'an object';
    default:
      return typeof value;
  }
}

/** Rejects fields outside `allowed`, so a misspelt field fails loudly instead of being dropped. */
export function unknownField(body: JsonObject, allowed: readonly string[]): string | undefined {
  return Object.keys(body).find((key) => !allowed.includes(key));
}
