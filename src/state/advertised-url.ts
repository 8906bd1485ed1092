/**
 * Where peers reach a replica over HTTP (--state-advertise-url): an http:// or https:// origin
 * without credentials. Peers send whole client requests there, with the client's own
 * Authorization, so the URL itself must carry no secret of the replica's. One check for the
 * setting (its problem becomes a startup error) and for the URLs peers publish (a problem there
 * reads as no URL).
 */
export function parseAdvertisedUrl(raw: string): { origin: string } | { problem: string } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { problem: `must be a URL like http://10.0.0.7:8080, got "${raw}"` };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    return { problem: `must start with http:// or https://, got ${url.protocol}//` };
  if (url.username !== "" || url.password !== "")
    return { problem: "must not carry credentials (user:password@)" };
  if ((url.pathname !== "/" && url.pathname !== "") || url.search !== "" || url.hash !== "")
    return { problem: `must be an origin only (scheme, host, port), got "${raw}"` };
  return { origin: url.origin };
}
