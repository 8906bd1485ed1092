import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from "node:dns";
import { isLinkLocalIp } from "./ip-address.js";

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;
type Lookup = (hostname: string, options: LookupOptions, callback: LookupCallback) => void;

/** The error code a refused resolution fails with (classified as a connect failure). */
export const LINK_LOCAL_REFUSED = "ERR_LINK_LOCAL_REFUSED";

/**
 * A DNS lookup for worker connections that refuses link-local and cloud metadata addresses.
 * Registration checks the URL's host as written; a name (or a DNS record changed later) can still
 * resolve to 169.254.169.254, so the check is repeated on every address a connection would use.
 */
export function guardedLookup(resolve: Lookup = dnsLookup as unknown as Lookup): Lookup {
  return (hostname, options, callback) => {
    resolve(hostname, options, (err, address, family) => {
      if (err) return callback(err, address, family);
      const list = Array.isArray(address) ? address.map((a) => a.address) : [address];
      const refused = list.find(isLinkLocalIp);
      if (refused !== undefined) {
        const error: NodeJS.ErrnoException = new Error(
          `${hostname} resolves to ${refused}, a link-local or cloud metadata address (allow with --allow-link-local-workers)`,
        );
        error.code = LINK_LOCAL_REFUSED;
        return callback(error, address, family);
      }
      callback(null, address, family);
    });
  };
}
