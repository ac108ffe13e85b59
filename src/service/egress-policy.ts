// Where a namespaced UserGroupService may send its API key: the cluster admin's allowed hosts and http rule.
/**
 * Where a namespaced UserGroupService may send the API key it names: the operator's rule, set by the
 * cluster admin (--allowed-service-hosts, --allow-http-services), not the tenant's. Deny by default: with
 * no patterns, tenants cannot define their own connections at all. ClusterUserGroupServices are the
 * admins' own and are not subject to it.
 */
export interface EgressPolicy {
  readonly allowedHosts: readonly HostPattern[];
  readonly allowHttp: boolean;
}

/** An exact host ("analytics.example.com", "10.0.0.7", "[::1]") or "*.example.com" (subdomains only); any port unless given. */
export interface HostPattern {
  readonly host: string;
  readonly wildcard: boolean;
  readonly port: string | undefined;
}

export type PatternParse = { readonly ok: true; readonly pattern: HostPattern } | { readonly ok: false; readonly message: string };

export function parseHostPattern(raw: string): PatternParse {
  const text = raw.trim().toLowerCase();
  const wildcard = text.startsWith('*.');
  const rest = wildcard ? text.slice(2) : text;
  let parsed: URL;
  try {
    parsed = new URL(`https://${rest}`);
  } catch {
    return { ok: false, message: `"${raw}" is not a host pattern (host, *.domain, optionally :port)` };
  }
  if (
    parsed.pathname !== '/' ||
    parsed.username !== '' ||
    parsed.password !== '' ||
    parsed.search !== '' ||
    parsed.hash !== '' ||
    rest.includes('*') ||
    rest === ''
  ) {
    return { ok: false, message: `"${raw}" is not a host pattern (host, *.domain, optionally :port)` };
  }
  if (wildcard && (parsed.hostname.startsWith('[') || /^[\d.]+$/.test(parsed.hostname))) {
    return { ok: false, message: `"${raw}": a wildcard needs a domain name, not an IP address` };
  }
  // URL drops a port equal to the scheme's default; an explicit ":443" must still pin the port.
  const explicitPort = /:(\d+)$/.exec(rest)?.[1];
  return { ok: true, pattern: { host: parsed.hostname, wildcard, port: explicitPort === undefined ? undefined : String(Number(explicitPort)) } };
}

/** The policy from the flags' strings; every pattern must parse. */
export function parseEgressPolicy(hosts: readonly string[], allowHttp: boolean): { ok: true; policy: EgressPolicy } | { ok: false; messages: string[] } {
  const patterns: HostPattern[] = [];
  const messages: string[] = [];
  for (const raw of hosts) {
    const parsed = parseHostPattern(raw);
    if (parsed.ok) patterns.push(parsed.pattern);
    else messages.push(parsed.message);
  }
  return messages.length > 0 ? { ok: false, messages } : { ok: true, policy: { allowedHosts: patterns, allowHttp } };
}

export type EgressCheck = { readonly ok: true } | { readonly ok: false; readonly message: string };

/**
 * Checks a URL that validateServiceUrl already accepted. Loopback gets no exemption here: for a tenant,
 * 127.0.0.1 is the operator's own pod (its metrics, its sidecars), not a safe place.
 */
export function checkEgress(url: string, allowInsecure: boolean, policy: EgressPolicy): EgressCheck {
  const parsed = new URL(url);
  if (parsed.protocol === 'http:') {
    if (!policy.allowHttp) return { ok: false, message: 'plain http is not allowed for UserGroupServices by the operator (--allow-http-services); use https' };
    if (!allowInsecure) return { ok: false, message: 'plain http needs spec.allowInsecure: true' };
  }
  const port = parsed.port === '' ? (parsed.protocol === 'http:' ? '80' : '443') : parsed.port;
  const host = parsed.hostname.toLowerCase();
  const allowed = policy.allowedHosts.some((p) => (p.port === undefined || p.port === port) && (p.wildcard ? host.endsWith(`.${p.host}`) : host === p.host));
  if (allowed) return { ok: true };
  return {
    ok: false,
    message:
      policy.allowedHosts.length === 0
        ? 'the operator allows no host for UserGroupServices (--allowed-service-hosts is empty); use a ClusterUserGroupService, or ask a cluster admin'
        : `host ${host.slice(0, 253)} (port ${port}) is not among the hosts the operator allows for UserGroupServices (--allowed-service-hosts); ask a cluster admin`,
  };
}
