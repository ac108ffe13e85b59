// Imports got without loading ICU's locale data, which nothing here uses.
import type { Got } from 'got';

/**
 * Imports got without loading ICU's locale data: 6.5 MiB of RSS (Node 26.10, from /proc/self/status) that nothing
 * here uses. @sindresorhus/is, which got imports, builds two Intl.ListFormat when it loads, for the text of its
 * assertion errors, and the first one loads the data. While got loads, Intl.ListFormat is a class that builds the
 * real one at its first use, so the data is loaded only if such a message is ever written (got refusing an
 * option). Intl.ListFormat is the real one again once the import settles.
 *
 * Memoized: a second import overlapping the first would save the first one's stand-in as "the real one" and leave
 * it installed for good.
 */
export function importGot(): Promise<Got> {
  gotModule ??= importWithLazyListFormat();
  return gotModule;
}

let gotModule: Promise<Got> | undefined;

async function importWithLazyListFormat(): Promise<Got> {
  const listFormat = Intl.ListFormat;
  setListFormat(lazyListFormat(listFormat));
  try {
    return (await import('got')).default;
  } finally {
    setListFormat(listFormat);
  }
}

/** Intl's own property is writable; its type says readonly. */
function setListFormat(value: typeof Intl.ListFormat): void {
  Object.defineProperty(Intl, 'ListFormat', { value, writable: true, enumerable: false, configurable: true });
}

/** Intl.ListFormat that builds the real one (and loads its locale data) when first asked to format. */
function lazyListFormat(Real: typeof Intl.ListFormat): typeof Intl.ListFormat {
  class LazyListFormat {
    readonly #args: ConstructorParameters<typeof Intl.ListFormat>;
    #real: Intl.ListFormat | undefined;
    constructor(...args: ConstructorParameters<typeof Intl.ListFormat>) {
      this.#args = args;
    }
    #built(): Intl.ListFormat {
      this.#real ??= new Real(...this.#args);
      return this.#real;
    }
    format(list: Iterable<string>): string {
      return this.#built().format(list);
    }
    formatToParts(list: Iterable<string>): ReturnType<Intl.ListFormat['formatToParts']> {
      return this.#built().formatToParts(list);
    }
    resolvedOptions(): Intl.ResolvedListFormatOptions {
      return this.#built().resolvedOptions();
    }
    static supportedLocalesOf(...args: Parameters<typeof Intl.ListFormat.supportedLocalesOf>): string[] {
      return Real.supportedLocalesOf(...args);
    }
  }
  return LazyListFormat;
}
