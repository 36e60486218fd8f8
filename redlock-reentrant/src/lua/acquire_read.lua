-- Take or re-enter a read-write lock's read side on one node (after lua/rw_common.lua and the
-- fencing preludes), in constant time however many read. Mirrored by the model checker's
-- read-write master (model/src/rw.rs).
-- KEYS[1]: the readers hash (see lua/rw_common.lua). KEYS[2]: the node's fencing counter.
-- KEYS[3]: the writer's hash. KEYS[4]: the waiting writers.
-- ARGV as lua/acquire.lua: [1] the hold's field, [2] the lease in milliseconds, [3] the hold
-- count the owner expects here (0 for a new hold), [4] the smallest fencing candidate wanted,
-- [5] the owner's prefix of its holds' fields.
-- Returns acquire.lua's replies: {1, candidate, ''} a new read hold, {2, count, ''} a nested
-- one, {0, pttl, holder} refused (holder: the writer's field, or 'writer-waiting' when a writer
-- waits; pttl: how long that lasts at most), {3, count, ''} the count here is not the expected.
-- A new read hold needs no other owner's writer, and, unless its owner holds the write side,
-- no waiting writer (writers go first). A nested one needs only its own entry: a reader never
-- waits behind a writer that waits for it.
local wrong = not_readers(KEYS[1]) or not_writer(KEYS[3]) or not_waiting(KEYS[4])
if wrong then
    return wrong
end
local now = now_ms()
local lease = tonumber(ARGV[2])
local expected = tonumber(ARGV[3])
local count, deadline = reader_entry(KEYS[1], ARGV[1], now)
if expected > 0 then
    if count ~= expected then
        return {3, count, ''}
    end
    local until_ms = math.max(deadline, now + lease)
    redis.call('hset', KEYS[1], ARGV[1], reader_value(count + 1, until_ms))
    keep_readers_until(KEYS[1], now, until_ms)
    return {2, count + 1, ''}
end
if count > 0 then
    return {3, count, ''} -- a second copy of this new hold's request: counted once
end
-- This owner's latest read hold here, by its index: an earlier one (given up) is taken over; a
-- later one means this is a late request of an earlier hold, refused like any other holder's.
local index = '@' .. ARGV[5]
local this = tonumber(string.sub(ARGV[1], #ARGV[5] + 1))
-- Kept as the text it was written as: the field is rebuilt from it exactly.
local latest_text = redis.call('hget', KEYS[1], index)
local latest = tonumber(latest_text or '')
if latest and this then
    local other = ARGV[5] .. latest_text
    if latest > this then
        local _, until_ms = reader_entry(KEYS[1], other, now)
        return {0, math.max(1, until_ms - now), other}
    elseif latest < this then
        -- The entry and its index go together, and the hash with them if nothing else is left.
        drop_reader(KEYS[1], other)
    end
end
local writer = redis.call('hkeys', KEYS[3])[1]
if writer and string.sub(writer, 1, #ARGV[5]) ~= ARGV[5] then
    return {0, math.max(1, redis.call('pttl', KEYS[3])), writer}
end
if not writer then
    local waiting, left = waiting_writer(KEYS[4], now, ARGV[5])
    if waiting then
        return {0, math.max(1, left), 'writer-waiting'}
    end
end
redis.call('hset', KEYS[1], KIND_FIELD, KIND, ARGV[1], reader_value(1, now + lease), index, this)
keep_readers_until(KEYS[1], now, now + lease)
return {1, fencing_candidate(), ''}
