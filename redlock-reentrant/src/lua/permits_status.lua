-- What one node knows of a semaphore (after lua/holders_permit.lua, lua/rw_common.lua and
-- lua/permits_common.lua). KEYS[1]: the permits hash. KEYS[2]: the count of permits.
-- Returns {whether the count is set (0/1), the count, the permits out (live ones)}; purges the
-- permits whose deadline passed.
local wrong = not_readers(KEYS[1])
if wrong then
    return wrong
end
local wrong_count, count = permits_of(KEYS[2])
if wrong_count then
    return wrong_count
end
local out = permits_out(KEYS[1], now_ms())
return {redis.call('exists', KEYS[2]), count, out}
