-- Renew many read holds (or permits, keeping their weight) on one node in one call (after the
-- holders' kind and lua/rw_common.lua): the watchdog's batch renewal, with lua/renew.lua's
-- contract. Each reader's own deadline moves, and only the caller's: a reader nobody renews
-- runs out within its lease whatever the others do. Never recreates a reader that is gone, and
-- never shortens a lease.
-- Mirrored by the model checker's read-write master (model/src/rw.rs).
-- KEYS[i]: a readers hash. ARGV[1]: the lease in milliseconds. ARGV[i + 1]: the hold's field.
-- Returns one integer per key: 1 when the reader is there and runs at least ARGV[1] more, 0
-- when it is not (its deadline passed, released, force-unlocked, or the key is another type).
local lease = tonumber(ARGV[1])
local now = now_ms()
local renewed = {}
for i, key in ipairs(KEYS) do
    renewed[i] = 0
    local value = redis.pcall('hget', key, ARGV[i + 1])
    if type(value) == 'string' then
        local count, deadline, weight = parse_reader(value)
        if count and deadline > now then
            local until_ms = math.max(deadline, now + lease)
            redis.call('hset', key, ARGV[i + 1], reader_value(count, until_ms, weight))
            keep_readers_until(key, now, until_ms)
            renewed[i] = 1
        end
    end
end
return renewed
