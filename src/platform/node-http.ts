import { createRequire } from 'node:module';
import type * as NodeHttp from 'node:http';

/**
 * node:http, loaded with require rather than `import`. An ES import of node:http makes Node build the module
 * namespace, which reads every lazy export (WebSocket, MessageEvent, …) and so loads undici, http2 and zlib:
 * ~12 MiB of RSS in every process that imports it (Node 24.21, measured from /proc/self/status), which the
 * controller's memory budget cannot spare and which nothing here uses.
 */
export const http = createRequire(import.meta.url)('node:http') as typeof NodeHttp;
