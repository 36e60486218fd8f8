-- Undo one acquisition attempt of a read hold (or a permit) on one node, only if it landed:
-- idempotent (after lua/announce.lua, the holders' kind and lua/rw_common.lua). KEYS and ARGV as lua/undo.lua: KEYS[1] the
-- readers hash; ARGV[1] the attempt's hold field, [2] the count the attempt would have set,
-- [3] the lock's channel or '' to announce nothing, [4] the release message.
-- Returns 1 when the attempt was undone here, 0 when there was nothing to undo.
if not_readers(KEYS[1]) then
    return 0
end
local now = now_ms()
local count, deadline, weight = reader_entry(KEYS[1], ARGV[1], now)
if count == 0 or count ~= tonumber(ARGV[2]) then
    return 0
end
if count == 1 then
    if departed(drop_reader(KEYS[1], ARGV[1])) and ARGV[3] ~= '' then
        announce(ARGV[3], ARGV[4])
    end
else
    redis.call('hset', KEYS[1], ARGV[1], reader_value(count - 1, deadline, weight))
end
return 1
