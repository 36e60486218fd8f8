-- Change a semaphore's count of permits on one node (after lua/announce.lua,
-- lua/holders_permit.lua, lua/rw_common.lua and lua/permits_common.lua), announcing it: a
-- larger count may let waiters in.
-- KEYS[1]: the permits hash. KEYS[2]: the count of permits.
-- ARGV[1]: what to do: 'try-set' (set the count to ARGV[2] if it is not set), 'set' (to
-- ARGV[2]), 'add' (add ARGV[2], which may be negative; refused if the count would fall below
-- zero or above 2^32 - 1, the largest a client reads), 'take' (lower it by ARGV[2] if that many are free: an unowned acquisition, refused
-- otherwise), 'drain' (lower the count to the permits out: none is free any more), 'delete' (the
-- count and every permit out: their holders are told they lost them when renewal finds them
-- gone). ARGV[3]: the semaphore's channel. ARGV[4]: the message.
-- Returns {done (1, or 0: 'try-set' found a count, 'add' would go below zero, 'take' found too
-- few free, 'delete' found nothing), the count before, the count after, the permits out}.
local wrong, count = not_semaphore(KEYS[1], KEYS[2])
if wrong then
    return wrong
end
local op, value = ARGV[1], tonumber(ARGV[2])
local out = permits_out(KEYS[1], now_ms())
local after
if op == 'try-set' then
    if redis.call('exists', KEYS[2]) == 1 then
        return {0, count, count, out}
    end
    after = value
elseif op == 'set' then
    after = value
elseif op == 'add' then
    after = count + value
    if after < 0 or after > 4294967295 then
        return {0, count, count, out}
    end
elseif op == 'take' then
    if count - out < value then
        return {0, count, count, out}
    end
    after = count - value
elseif op == 'drain' then
    after = math.min(count, out)
elseif op == 'delete' then
    local existed = redis.call('del', KEYS[1], KEYS[2])
    if existed > 0 then
        announce(ARGV[3], ARGV[4])
    end
    return {math.min(existed, 1), count, 0, 0}
else
    return redis.error_reply('ERR unknown semaphore operation')
end
redis.call('set', KEYS[2], string.format('%d', after))
if op ~= 'take' then
    announce(ARGV[3], ARGV[4])
end
return {1, count, after, out}
