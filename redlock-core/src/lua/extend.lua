-- Compare-and-PEXPIRE on one node; never recreates a key that is gone.
-- KEYS[1]: the lock key. ARGV[1]: the owner token. ARGV[2]: the new lease in milliseconds.
-- Returns 1 when our key's lease was reset, 0 otherwise.
if redis.call('type', KEYS[1])['ok'] == 'string' and redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
