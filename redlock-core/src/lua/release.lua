-- Compare-and-delete on one node.
-- KEYS[1]: the lock key. ARGV[1]: the owner token.
-- Returns 1 when our key was deleted, 0 when the key is absent, someone else's, or not a lock.
if redis.call('type', KEYS[1])['ok'] ~= 'string' then
    return 0
end
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
