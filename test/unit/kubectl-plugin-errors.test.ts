import fs from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPlugin } from '../../src/cli/kubectl/plugin.js';

/**
 * kubectl usergroup against a scripted apiserver: a refusal reads as kubectl prints it (cmdutil.StandardErrorMessage),
 * with the apiserver's own message, not the request that was refused.
 */

interface Reply {
  readonly status: number;
  readonly body?: unknown;
}
let reply: (req: IncomingMessage) => Reply = () => ({ status: 500 });
let server: Server;
let dir: string;
let kubeconfig: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    const { status, body } = reply(req);
    res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain' : 'application/json' });
    res.end(body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ug-plugin-errors-'));
  kubeconfig = path.join(dir, 'config');
  fs.writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: `http://127.0.0.1:${address.port}` } }],
      users: [{ name: 'jane', user: { token: 'jane-token' } }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'jane', namespace: 'team-a' } }],
      'current-context': 'c',
    }),
  );
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  fs.rmSync(dir, { recursive: true, force: true });
});

async function plugin(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runPlugin([...argv, '--kubeconfig', kubeconfig], {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
  });
  return { code, out, err };
}

function status(code: number, reason: string, message: string): Reply {
  return { status: code, body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code } };
}

const acme = {
  apiVersion: 'usergroup.dev/v1',
  kind: 'UserGroup',
  metadata: { name: 'acme', namespace: 'team-a', uid: 'uid-acme', resourceVersion: '10', generation: 1, creationTimestamp: '2025-06-01T11:00:00Z' },
  spec: { userGroupId: 'acme', name: 'Acme' },
};

describe("kubectl usergroup: apiserver refusals in kubectl's words", () => {
  it('403: "Error from server (Forbidden): " and the apiserver\'s message (was "error: GET /apis/…: 403 Forbidden: …")', async () => {
    const message =
      'usergroups.usergroup.dev is forbidden: User "jane" cannot list resource "usergroups" in API group "usergroup.dev" in the namespace "team-a"';
    reply = () => status(403, 'Forbidden', message);
    expect(await plugin('status')).toEqual({ code: 1, out: '', err: `Error from server (Forbidden): ${message}\n` });
  });

  it('401: kubectl\'s "You must be logged in to the server"', async () => {
    reply = () => status(401, 'Unauthorized', 'Unauthorized');
    expect(await plugin('status', 'acme')).toEqual({ code: 1, out: '', err: 'error: You must be logged in to the server (Unauthorized)\n' });
  });

  it('an answer that is not a Status: the reason and text client-go gives its code, not the body', async () => {
    reply = () => ({ status: 502, body: '<html>upstream connect error</html>' });
    expect((await plugin('status', '-A')).err).toBe('Error from server (InternalError): an error on the server has prevented the request from succeeding\n');
    reply = () => ({ status: 418 });
    expect((await plugin('status')).err).toBe('Error from server: the server responded with the status code 418 but did not return more information\n');
  });

  it('rotate: a refused PATCH is reported as kubectl would report it', async () => {
    const message =
      'usergroups.usergroup.dev "acme" is forbidden: User "jane" cannot patch resource "usergroups" in API group "usergroup.dev" in the namespace "team-a"';
    reply = (req) => (req.method === 'GET' ? { status: 200, body: acme } : status(403, 'Forbidden', message));
    expect(await plugin('rotate', 'acme', '--no-wait')).toEqual({ code: 1, out: '', err: `Error from server (Forbidden): ${message}\n` });
  });

  it('rotate: a 409 (changed since read) is read again and retried; a 404 (deleted meanwhile) is "not found"', async () => {
    const methods: string[] = [];
    reply = (req) => {
      methods.push(req.method ?? '');
      if (req.method === 'GET') return { status: 200, body: acme };
      return methods.filter((m) => m === 'PATCH').length === 1
        ? status(
            409,
            'Conflict',
            'Operation cannot be fulfilled on usergroups.usergroup.dev "acme": the object has been modified; please apply your changes to the latest version and try again',
          )
        : status(404, 'NotFound', 'usergroups.usergroup.dev "acme" not found');
    };
    expect(await plugin('rotate', 'acme', '--no-wait')).toEqual({ code: 1, out: '', err: 'error: usergroup "acme" not found in namespace "team-a"\n' });
    expect(methods).toEqual(['GET', 'PATCH', 'GET', 'PATCH']);
  });
});
