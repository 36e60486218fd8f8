-- Delete a reentrant lock whoever holds it, and announce it to waiters.
-- KEYS[1]: the lock hash. ARGV[1]: the lock's channel. ARGV[2]: the release message.
-- Returns 1 when a lock was deleted, 0 when there was none (a key of another type is left alone).
if redis.call('type', KEYS[1])['ok'] ~= 'hash' then
    return 0
end
redis.call('del', KEYS[1])
announce(ARGV[1], ARGV[2])
return 1
