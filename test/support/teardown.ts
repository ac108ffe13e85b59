/**
 * A suite's resource as its teardown sees it: possibly never assigned.
 *
 * Suites declare `let env: TestEnv` and assign it in beforeAll: the tests run only once that succeeded,
 * so they may treat it as set. afterAll runs even when beforeAll failed part-way, though, and must skip
 * what was never created: `await ifAssigned(env)?.close()`. The value is returned unchanged; only its
 * type is widened, so that the optional chain says what it guards against.
 */
export function ifAssigned<T extends object>(value: T): T | undefined {
  return value;
}
