-- Release one hold of a reentrant lock on one node; the last release deletes the lock and
-- announces it to waiters. A retried nested release whose first try was applied here gets the
-- same answer; a retried final release finds nothing here, and the client counts that "not
-- held" as released where its earlier try got no reply (`decide` in unlock.rs).
-- Mirrored by the model checker's `Master::unlock` (model/src/master.rs): change both.
-- KEYS[1]: the lock hash.
-- ARGV[1]: the hold's field. ARGV[2]: the lock's channel. ARGV[3]: the release message.
-- ARGV[4]: the hold's count before this release.
-- Returns the holds left (0: the lock is free), or -1 when the hold is not here.
local expected = tonumber(ARGV[4])
local held = redis.pcall('hget', KEYS[1], ARGV[1])
if type(held) == 'table' then
    return -1 -- not a lock hash
end
held = tonumber(held or '0')
if held == expected then
    if held == 1 then
        redis.call('del', KEYS[1])
        announce(ARGV[2], ARGV[3])
        return 0
    end
    redis.call('hset', KEYS[1], ARGV[1], held - 1)
    return held - 1
end
if held > 0 and held == expected - 1 then
    return held -- a retry whose first try was applied here
end
return -1
