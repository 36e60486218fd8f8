-- Sabotage only (the fault suite's negative control; built with the `sabotage` feature): the
-- release of unlock.lua without its owner check, so a late release deletes whoever holds the
-- lock now. KEYS and ARGV as unlock.lua; returns the holds left.
local held = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if held > 1 then
    redis.call('hset', KEYS[1], ARGV[1], held - 1)
    return held - 1
end
redis.call('del', KEYS[1])
announce(ARGV[2], ARGV[3])
return 0
