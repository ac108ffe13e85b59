import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export interface Pki {
  readonly caCert: string;
  readonly caKey: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly adminCert: string;
  readonly adminKey: string;
  /** ServiceAccount token signing pair: the apiserver signs with the private key and verifies with the public one. */
  readonly serviceAccountKey: string;
  readonly serviceAccountPub: string;
}

/**
 * Node's crypto can make keys but not X.509 certificates, so certificates come
 * from openssl: a throwaway CA, a serving certificate for 127.0.0.1 (and extraIps) and an admin
 * client certificate in system:masters (as envtest does).
 */
export function createPki(dir: string, extraIps: readonly string[] = []): Pki {
  fs.mkdirSync(dir, { recursive: true });
  const file = (name: string): string => path.join(dir, name);

  const caCert = file('ca.crt');
  const caKey = file('ca.key');
  issue(dir, 'ca', {
    subject: { CN: 'usergroup-operator-test-ca' },
    ext: ['basicConstraints = critical,CA:TRUE', 'keyUsage = critical,keyCertSign,cRLSign,digitalSignature'],
  });

  issue(dir, 'server', {
    subject: { CN: 'kube-apiserver' },
    ext: [
      'basicConstraints = critical,CA:FALSE',
      'keyUsage = critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage = serverAuth',
      // IP:10.0.0.1 is the default/kubernetes Service (first address of --service-cluster-ip-range): what Pods on a
      // node (devtools/node) dial through kube-proxy.
      // extraIps: a node's address, where the apiserver serves too (ControlPlaneOptions.nodeAddress).
      `subjectAltName = IP:127.0.0.1,IP:10.0.0.1,${extraIps.map((ip) => `IP:${ip},`).join('')}DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc`,
    ],
    ca: { cert: caCert, key: caKey },
  });
  issue(dir, 'admin', {
    subject: { CN: 'admin', O: 'system:masters' },
    ext: ['basicConstraints = critical,CA:FALSE', 'keyUsage = critical,digitalSignature,keyEncipherment', 'extendedKeyUsage = clientAuth'],
    ca: { cert: caCert, key: caKey },
  });

  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  fs.writeFileSync(file('sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  fs.writeFileSync(file('sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));

  return {
    caCert,
    caKey,
    serverCert: file('server.crt'),
    serverKey: file('server.key'),
    adminCert: file('admin.crt'),
    adminKey: file('admin.key'),
    serviceAccountKey: file('sa.key'),
    serviceAccountPub: file('sa.pub'),
  };
}

interface CertRequest {
  subject: Record<string, string>;
  ext: string[];
  ca?: { cert: string; key: string };
}

function issue(dir: string, name: string, req: CertRequest): void {
  const config = path.join(dir, `${name}.cnf`);
  fs.writeFileSync(
    config,
    ['[req]', 'distinguished_name = dn', 'prompt = no', '[dn]', ...Object.entries(req.subject).map(([k, v]) => `${k} = ${v}`), '[ext]', ...req.ext, ''].join(
      '\n',
    ),
  );
  const args = ['req', '-x509', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  args.push('-keyout', path.join(dir, `${name}.key`), '-out', path.join(dir, `${name}.crt`), '-days', '3650');
  args.push('-config', config, '-extensions', 'ext');
  if (req.ca) args.push('-CA', req.ca.cert, '-CAkey', req.ca.key);
  try {
    execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    const stderr = (err as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`openssl could not issue the ${name} certificate (is Debian's openssl installed?): ${stderr || String(err)}`, { cause: err });
  }
}
