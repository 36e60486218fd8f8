-- Take or re-enter a reentrant lock on one node.
-- KEYS[1]: the lock hash (field = owner, value = hold count). KEYS[2]: the node's fencing counter.
-- ARGV[1]: the owner. ARGV[2]: the lease in milliseconds. ARGV[3]: the hold count the owner
-- expects to find here (0 for a new hold).
-- Returns {status, value}:
--   {1, candidate}  a new hold; candidate is this node's fencing-token candidate
--   {2, count}      a reentrant acquisition; count is the new hold count
--   {0, pttl}       held by another owner; pttl in milliseconds
--   {3, count}      this owner's count here is not the expected one (the hold was lost here)
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE lock key holds a ' .. kind .. ' value')
end
local held = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if kind == 'hash' and held == 0 then
    return {0, redis.call('pttl', KEYS[1])}
end
local expected = tonumber(ARGV[3])
if expected > 0 then
    if held ~= expected then
        return {3, held}
    end
    redis.call('hincrby', KEYS[1], ARGV[1], 1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return {2, held + 1}
end
-- A new hold. A leftover field of this owner's (an earlier hold it gave up as lost) is reset.
redis.call('hset', KEYS[1], ARGV[1], 1)
redis.call('pexpire', KEYS[1], ARGV[2])
-- Fencing candidate: one more than the counter, and never behind the server clock in
-- microseconds, so a node restarted empty still hands out larger tokens.
local counter_kind = redis.call('type', KEYS[2])['ok']
if counter_kind ~= 'none' and counter_kind ~= 'string' then
    return redis.error_reply('WRONGTYPE fencing counter holds a ' .. counter_kind .. ' value')
end
local now = redis.call('time')
local now_us = now[1] .. string.format('%06d', tonumber(now[2]))
local counter = redis.call('get', KEYS[2])
if counter == false or tonumber(counter) < tonumber(now_us) then
    redis.call('set', KEYS[2], now_us)
    return {1, tonumber(now_us)}
end
return {1, redis.call('incr', KEYS[2])}
