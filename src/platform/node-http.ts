// node:http and node:https, loaded with require so importing them does not load undici.
import { createRequire } from 'node:module';
import type * as NodeHttp from 'node:http';
import type * as NodeHttps from 'node:https';

const require = createRequire(import.meta.url);

/**
 * node:http, loaded with require rather than `import`. An ES import of node:http makes Node build the module
 * namespace, which reads every lazy export (WebSocket, MessageEvent, …) and so loads undici, http2 and zlib:
 * ~12 MiB of RSS in every process that imports it (Node 24.21 and 26.10, measured from /proc/self/status), which the
 * controller's memory budget cannot spare and which nothing here uses.
 */
export const http = require('node:http') as typeof NodeHttp;

/**
 * node:https, the same way. Its ES import loads no undici, http2 or zlib today (Node 24.21: the same RSS as
 * require), but with one rule for all of Node's HTTP modules the check that holds it
 * (test/unit/import-graph.test.ts) needs no exception, and a later Node that gives node:https lazy exports
 * costs nothing here.
 */
export const https = require('node:https') as typeof NodeHttps;
