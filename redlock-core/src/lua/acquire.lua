-- Take a plain Redlock lock on one node.
-- KEYS[1]: the lock key. ARGV[1]: the owner token. ARGV[2]: the lease in milliseconds.
-- Returns nil when the lock was taken; otherwise the holder's PTTL in milliseconds
-- (-1 when the key has no expiry). A key of another type is an error, never "contended".
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return nil
end
if kind ~= 'string' then
    return redis.error_reply('WRONGTYPE lock key holds a ' .. kind .. ' value')
end
return redis.call('pttl', KEYS[1])
