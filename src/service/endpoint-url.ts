// A service endpoint's base URL, checked (https, no credentials, query or fragment) and normalised before anything is sent.
export type ServiceUrlCheck = { ok: true; url: string } | { ok: false; message: string };

/**
 * Loopback hosts, where plain http never leaves the machine. WHATWG URL parsing has already normalised
 * IPv4 shorthands (127.1, 0x7f.0.0.1) to dotted quads and IPv6 to its compressed, bracketed form.
 */
function isLoopback(hostname: string): boolean {
  if (hostname === 'localhost' || hostname === '[::1]') {
    return true;
  }
  if (/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)) {
    return true;
  }
  // IPv4-mapped loopback (::ffff:127.x.y.z), which URL prints in hex.
  return /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(hostname);
}

/**
 * Checks the base URL of a service connection and normalises it (no trailing slash), so the client can
 * append /api/user. Messages never repeat the URL: a rejected one may carry credentials.
 */
export function validateServiceUrl(url: string, allowInsecure: boolean): ServiceUrlCheck {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, message: 'service URL is not an absolute URL' };
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    return { ok: false, message: `service URL must use https (or http), not ${parsed.protocol.slice(0, 20)}` };
  }
  if (parsed.username !== '' || parsed.password !== '') {
    return { ok: false, message: 'service URL must not contain credentials; the API key is configured separately' };
  }
  // A bare "?" or "#" parses to an empty search/hash, so look at the input too.
  if (parsed.search !== '' || url.includes('?')) {
    return { ok: false, message: 'service URL must not have a query string' };
  }
  if (parsed.hash !== '' || url.includes('#')) {
    return { ok: false, message: 'service URL must not have a fragment' };
  }
  if (parsed.protocol === 'http:' && !allowInsecure && !isLoopback(parsed.hostname)) {
    return {
      ok: false,
      message:
        'service URL must use https: plain http would send the API key and tokens unencrypted (allowed only for loopback hosts or when insecure connections are explicitly allowed)',
    };
  }
  return { ok: true, url: parsed.href.replace(/\/+$/, '') };
}
