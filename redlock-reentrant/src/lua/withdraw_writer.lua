-- A writer that stopped waiting takes its registration back on one node (after
-- lua/announce.lua): one that gave up (its wait ran out, it failed, or it was dropped) tells the
-- readers it held up; one that got the lock does so where its grant did not (a node that
-- refused it keeps the registration otherwise), and announces nothing (it holds the lock).
-- KEYS[1]: the waiting writers. ARGV[1]: the owner's prefix. ARGV[2]: the lock's channel, or ''
-- to announce nothing. ARGV[3]: the message. Returns 1 when it was registered here, 0
-- otherwise.
if redis.pcall('zrem', KEYS[1], ARGV[1]) == 1 then
    if ARGV[2] ~= '' then
        announce(ARGV[2], ARGV[3])
    end
    return 1
end
return 0
