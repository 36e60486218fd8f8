-- What one node knows of a semaphore (after lua/holders_permit.lua, lua/rw_common.lua and
-- lua/permits_common.lua). KEYS[1]: the permits hash. KEYS[2]: the count of permits.
-- Returns {whether the count is set (0/1), the count, the permits out (live ones), the fixed
-- count they were granted under (0: none)}; purges the permits whose deadline passed.
local wrong, count = not_semaphore(KEYS[1], KEYS[2])
if wrong then
    return wrong
end
local out = permits_out(KEYS[1], now_ms())
local set = redis.call('exists', KEYS[2])
-- A count set is the count: a fixed count's record beside it is not looked at.
local fixed = set == 0 and tonumber(redis.call('hget', KEYS[1], FIXED_FIELD) or '0') or 0
return {set, count, out, fixed}
