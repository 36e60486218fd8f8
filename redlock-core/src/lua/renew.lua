-- Renew many plain locks on one node in one call (a watchdog's batch renewal); never recreates a
-- lock that is gone, and never shortens a lease.
-- KEYS[i]: a lock key. ARGV[1]: the lease in milliseconds. ARGV[i + 1]: the owner token of KEYS[i].
-- Returns one integer per key: 1 when that owner holds it and its lease now runs at least ARGV[1]
-- more, 0 when it does not hold it (expired, released, taken over, or the key is not a lock).
local lease = tonumber(ARGV[1])
local renewed = {}
for i, key in ipairs(KEYS) do
    if redis.call('type', key)['ok'] == 'string' and redis.call('get', key) == ARGV[i + 1] then
        if redis.call('pttl', key) < lease then
            redis.call('pexpire', key, lease)
        end
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
