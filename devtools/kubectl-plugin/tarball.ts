import { promisify } from 'node:util';
import { gzip } from 'node:zlib';

const gzipAsync = promisify(gzip);

export interface TarEntry {
  readonly name: string;
  readonly mode: number;
  readonly data: Buffer;
}

/**
 * A gzipped ustar archive of regular files, written here rather than by tar(1) so it is byte for byte
 * the same on every machine: no owner names, uid/gid 0, mtime 0, entries in the given order, and a gzip
 * header without a timestamp (zlib's default). Then the sha256 in the krew manifest is a property of the
 * sources, not of the build. Compressed on libuv's thread pool, so the platforms' tarballs are made side by side.
 */
export async function tarGz(entries: readonly TarEntry[]): Promise<Buffer> {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    blocks.push(header(entry), entry.data, Buffer.alloc(padding(entry.data.length)));
  }
  blocks.push(Buffer.alloc(1024)); // two zero blocks end the archive
  return gzipAsync(Buffer.concat(blocks));
}

const BLOCK = 512;
const padding = (size: number): number => (BLOCK - (size % BLOCK)) % BLOCK;

function header(entry: TarEntry): Buffer {
  if (Buffer.byteLength(entry.name) > 100) throw new Error(`tar entry name too long: ${entry.name}`);
  const h = Buffer.alloc(BLOCK);
  const put = (at: number, width: number, text: string): void => {
    h.write(text, at, width, 'ascii');
  };
  // Numbers are zero-padded octal with a NUL terminator (POSIX ustar).
  const octal = (at: number, width: number, n: number): void => put(at, width, `${n.toString(8).padStart(width - 1, '0')}\0`);
  h.write(entry.name, 0, 100, 'utf8');
  octal(100, 8, entry.mode);
  octal(108, 8, 0); // uid
  octal(116, 8, 0); // gid
  octal(124, 12, entry.data.length);
  octal(136, 12, 0); // mtime
  put(156, 1, '0'); // regular file
  put(257, 6, 'ustar\0');
  put(263, 2, '00');
  // The checksum is computed with its own field read as eight spaces.
  put(148, 8, '        ');
  let sum = 0;
  for (const byte of h) sum += byte;
  put(148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
  return h;
}
