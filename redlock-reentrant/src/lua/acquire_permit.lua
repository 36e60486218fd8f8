-- Take permits of a semaphore on one node (after lua/holders_permit.lua, lua/rw_common.lua,
-- lua/permits_common.lua and the fencing preludes). A permit is a hold of its own owner,
-- never re-entered, with its own deadline on the server's clock: a crashed holder's permits
-- come back within its lease, whatever the other holders do.
-- KEYS[1]: the permits hash. KEYS[2]: the node's fencing counter. KEYS[3]: the count of
-- permits.
-- ARGV as lua/acquire.lua: [1] the hold's field (the permit's id), [2] the lease in
-- milliseconds, [3] the hold count the owner expects here (always 0: a permit is never
-- re-entered), [4] the smallest fencing candidate wanted, [5] the owner's prefix; then
-- [6] how many permits the hold takes (at least 1), [7] the count its client fixed (0: none,
-- the count is the one set here).
-- Returns acquire.lua's replies: {1, candidate, ''} granted, {0, pttl, 'permits'} too few
-- permits free (pttl: until the earliest permit out expires, when one may free without a
-- release to announce it; until the count is set, the lease: setting it is announced),
-- {3, count, ''} a second copy of this request (counted once); {4, count, ''} when more
-- permits are asked for than the semaphore's count (set) is; and {5, count, ''} when the count
-- here is not the fixed one: the count set (by `set_permits`, on one master), or else the
-- fixed count of the permits out, which a granted acquisition of a fixed count records in the
-- permits hash (FIXED_FIELD) where no count is set: it lives as long as they do, so a client
-- that fixed another count and took nothing leaves nothing behind.
local wrong, count = not_semaphore(KEYS[1], KEYS[3])
if wrong then
    return wrong
end
local now = now_ms()
local lease, expected, weight = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[6])
local fixed = tonumber(ARGV[7])
local held = reader_entry(KEYS[1], ARGV[1], now)
if held > 0 or expected > 0 then
    return {3, held, ''}
end
local is_set = redis.call('exists', KEYS[3]) == 1
if not is_set and fixed == 0 then
    return {0, lease, 'permits'}
end
-- Purged first: the record of a fixed count goes with the last of its permits.
local out, earliest = permits_out(KEYS[1], now)
if fixed > 0 then
    -- On one master a count set is the count; otherwise the one the permits out were granted
    -- under.
    local recorded = tonumber(redis.call('hget', KEYS[1], FIXED_FIELD) or fixed)
    if is_set and count ~= fixed then
        return {5, count, ''}
    elseif not is_set and recorded ~= fixed then
        return {5, recorded, ''}
    end
    count = fixed
end
if weight > count then
    return {4, count, ''}
end
if out + weight > count then
    return {0, math.max(1, earliest - now), 'permits'}
end
redis.call('hset', KEYS[1], KIND_FIELD, KIND, ARGV[1], reader_value(1, now + lease, weight))
if fixed > 0 and not is_set then
    redis.call('hset', KEYS[1], FIXED_FIELD, fixed)
end
keep_readers_until(KEYS[1], now, now + lease)
return {1, fencing_candidate(), ''}
