/**
 * The Lua scripts of the Redis quota store (redis-quota-store.ts), each one atomic in Redis, so
 * two replicas never both take a tenant's last place. Time is Redis's own (TIME), so replicas
 * with skewed clocks still agree on the minute. The minute's token counter is named in the script
 * from KEYS[2] and the minute's index: the store is meant for a single Redis (as --state-url is),
 * not a Redis Cluster.
 *
 * KEYS[1]: the tenant's leases, a sorted set of lease ids scored by their expiry (ms); a replica
 * renews its leases while their requests run, so a crashed replica's leases lapse on their own.
 * KEYS[2]: the prefix of the tenant's per-minute token counters (`<prefix>:<minute index>`, each
 * kept two minutes and a little).
 */
const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/**
 * ARGV: tokens per minute (0 = none), concurrent requests (0 = none), cost, lease id, window ms,
 * lease ttl ms. Returns {verdict (0 admitted, 1 over concurrency, 2 over tokens), now, previous
 * minute's tokens, current minute's tokens, requests under way}.
 */
export const ACQUIRE = `${NOW}
local tpm = tonumber(ARGV[1])
local conc = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local windowMs = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local index = math.floor(now / windowMs)
local curKey = KEYS[2] .. ':' .. index
local prev = tonumber(redis.call('GET', KEYS[2] .. ':' .. (index - 1)) or '0')
local cur = tonumber(redis.call('GET', curKey) or '0')
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local running = redis.call('ZCARD', KEYS[1])
if conc > 0 and running >= conc then return {1, now, prev, cur, running} end
if tpm > 0 then
  local used = prev * (windowMs - (now - index * windowMs)) / windowMs + cur
  if used + math.min(cost, tpm) > tpm then return {2, now, prev, cur, running} end
end
if cost > 0 then
  redis.call('INCRBY', curKey, cost)
  redis.call('PEXPIRE', curKey, 2 * windowMs + 10000)
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[4])
redis.call('PEXPIRE', KEYS[1], ttl)
return {0, now, prev, cur + cost, running + 1}
`;

/**
 * ARGV: lease id, the minute it was charged in, refund, extra, window ms. The refund goes back to
 * the minute charged if it still counts (never below 0); the extra is charged to this minute.
 */
export const RELEASE = `${NOW}
redis.call('ZREM', KEYS[1], ARGV[1])
local charged = tonumber(ARGV[2])
local refund = tonumber(ARGV[3])
local extra = tonumber(ARGV[4])
local windowMs = tonumber(ARGV[5])
local index = math.floor(now / windowMs)
if refund > 0 and charged >= index - 1 then
  local key = KEYS[2] .. ':' .. charged
  if redis.call('EXISTS', key) == 1 then
    if redis.call('DECRBY', key, refund) < 0 then redis.call('SET', key, 0, 'KEEPTTL') end
  end
end
if extra > 0 then
  local key = KEYS[2] .. ':' .. index
  redis.call('INCRBY', key, extra)
  redis.call('PEXPIRE', key, 2 * windowMs + 10000)
end
return 1
`;

/** ARGV: lease ttl ms, then the lease ids still running: their expiry moves on. */
export const RENEW = `${NOW}
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
`;
