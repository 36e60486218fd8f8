-- Release one hold of a reentrant lock on one node; the last release deletes the lock and
-- announces it to waiters. A retried request gets the answer of the first.
-- Mirrored by the model checker's `Master::unlock` (model/src/master.rs): change both.
-- KEYS[1]: the lock hash. KEYS[2]: this request's latch key.
-- ARGV[1]: the hold's field. ARGV[2]: the lock's channel. ARGV[3]: the release message.
-- ARGV[4]: how long the latch remembers a final release, in milliseconds.
-- ARGV[5]: the hold's count before this release.
-- Returns the holds left (0: the lock is free), or -1 when the hold is not here.
local expected = tonumber(ARGV[5])
local held = redis.pcall('hget', KEYS[1], ARGV[1])
if type(held) == 'table' then
    return -1 -- not a lock hash
end
held = tonumber(held or '0')
if held == expected then
    if held == 1 then
        redis.call('del', KEYS[1])
        announce(ARGV[2], ARGV[3])
        -- Only a final release leaves nothing behind to tell a retry it was applied.
        redis.call('set', KEYS[2], 0, 'PX', ARGV[4])
        return 0
    end
    redis.call('hset', KEYS[1], ARGV[1], held - 1)
    return held - 1
end
if held > 0 and held == expected - 1 then
    return held -- a retry whose first try was applied here
end
if held == 0 and redis.call('exists', KEYS[2]) == 1 then
    return 0 -- a retried final release
end
return -1
