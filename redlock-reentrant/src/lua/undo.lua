-- Undo one acquisition attempt on one node, only if it landed: idempotent.
-- Mirrored by the model checker's `Master::undo` (model/src/master.rs): change both.
-- KEYS[1]: the lock hash. ARGV[1]: the attempt's hold field. ARGV[2]: the count the attempt
-- would have set. ARGV[3]: the lock's channel, or '' to announce nothing. ARGV[4]: the release
-- message.
-- An attempt that landed on fewer nodes than a majority was never anyone's lock: its undo
-- announces nothing, so waiters are not woken for a release that did not happen.
-- Returns 1 when the attempt was undone here, 0 when there was nothing to undo (a key of
-- another type included).
local held = redis.pcall('hget', KEYS[1], ARGV[1])
if type(held) == 'table' then
    return 0
end
held = tonumber(held or '0')
if held == 0 or held ~= tonumber(ARGV[2]) then
    return 0
end
if held == 1 then
    redis.call('del', KEYS[1])
    if ARGV[3] ~= '' then
        announce(ARGV[3], ARGV[4])
    end
else
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
end
return 1
