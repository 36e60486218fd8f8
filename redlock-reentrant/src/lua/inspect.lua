-- What one node knows of a reentrant lock.
-- KEYS[1]: the lock hash. ARGV[1]: the owner asking.
-- Returns {exists (0/1), the owner's hold count, pttl in milliseconds (-2 when absent)}.
-- A key of another type, or a hash without an expiry (never one of ours), is an error.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    return {0, 0, -2}
end
if kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE lock key holds a ' .. kind .. ' value')
end
local pttl = redis.call('pttl', KEYS[1])
if pttl < 0 then
    return redis.error_reply('WRONGTYPE lock key holds a hash with no expiry')
end
return {1, tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0'), pttl}
