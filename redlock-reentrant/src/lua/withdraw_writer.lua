-- A waiter that stopped waiting takes its registration back on one node (after
-- lua/announce.lua): a read-write lock's writer from the waiting writers, a fair lock's waiter
-- from its queue and heartbeats. One that gave up (its wait ran out, it failed, or it was
-- dropped) tells the waiters it held up; one that got the lock does so where its grant did not
-- (a node that refused it keeps the registration otherwise), and announces nothing (it holds the
-- lock).
-- KEYS: the sorted sets it is registered in (the first one holds every waiter), then keys that
-- go once nobody waits (a fair lock's ticket counter). ARGV[1]: the owner's prefix. ARGV[2]: the
-- lock's channel, or '' to announce nothing. ARGV[3]: the message. Returns 1 when it was
-- registered here, 0 otherwise.
local removed = 0
for _, key in ipairs(KEYS) do
    if redis.pcall('zrem', key, ARGV[1]) == 1 then
        removed = 1
    end
end
if #KEYS > 1 and redis.pcall('zcard', KEYS[1]) == 0 then
    redis.call('del', unpack(KEYS, 2))
end
if removed == 1 and ARGV[2] ~= '' then
    announce(ARGV[2], ARGV[3])
end
return removed
