-- Take or re-enter a reentrant lock on one node.
-- KEYS[1]: the lock hash (field = owner, value = hold count). KEYS[2]: the node's fencing counter.
-- ARGV[1]: the owner. ARGV[2]: the lease in milliseconds. ARGV[3]: the hold count the owner
-- expects to find here (0 for a new hold).
-- Returns {status, value, holder}:
--   {1, candidate, ''}  a new hold; candidate is this node's fencing-token candidate
--   {2, count, ''}      a reentrant acquisition; count is the new hold count
--   {0, pttl, holder}   held by another owner (holder: its field) for pttl more milliseconds
--   {3, count, ''}      this owner's count here is not the expected one (the hold was lost here)
-- A key of another type, or a hash without an expiry (never one of ours), is an error.
-- A reentrant acquisition never shortens the lease: the hold keeps the longest one asked for.

-- The next fencing candidate: one more than the counter. A node without a counter (new, or
-- restarted empty) starts from its clock in microseconds, so it never hands out a token below
-- the ones it gave before it lost the counter (see docs/fencing.md).
local function new_hold()
    redis.call('hset', KEYS[1], ARGV[1], 1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    local candidate = redis.call('incr', KEYS[2])
    if candidate == 1 then
        local now = redis.call('time')
        local now_us = now[1] .. string.format('%06d', tonumber(now[2]))
        redis.call('set', KEYS[2], now_us)
        candidate = tonumber(now_us)
    end
    return {1, candidate, ''}
end

local expected = tonumber(ARGV[3])
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    if expected > 0 then
        return {3, 0, ''}
    end
    return new_hold()
end
if kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE lock key holds a ' .. kind .. ' value')
end
local pttl = redis.call('pttl', KEYS[1])
if pttl < 0 then
    return redis.error_reply('WRONGTYPE lock key holds a hash with no expiry')
end
local held = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if held == 0 then
    return {0, pttl, redis.call('hkeys', KEYS[1])[1] or ''}
end
if expected == 0 then
    -- A leftover field of this owner's (an earlier hold it gave up as lost): a new hold.
    return new_hold()
end
if held ~= expected then
    return {3, held, ''}
end
redis.call('hincrby', KEYS[1], ARGV[1], 1)
if pttl < tonumber(ARGV[2]) then
    redis.call('pexpire', KEYS[1], ARGV[2])
end
return {2, held + 1, ''}
