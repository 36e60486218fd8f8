-- A writer that stopped waiting (its wait ran out, it failed, or it was dropped) takes its
-- registration back on one node, and readers held up by it are told (after lua/announce.lua).
-- KEYS[1]: the waiting writers. ARGV[1]: the owner's prefix. ARGV[2]: the lock's channel.
-- ARGV[3]: the message. Returns 1 when it was registered here, 0 otherwise.
if redis.pcall('zrem', KEYS[1], ARGV[1]) == 1 then
    announce(ARGV[2], ARGV[3])
    return 1
end
return 0
