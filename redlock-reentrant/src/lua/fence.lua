-- Write a chosen fencing token back to one node, while the new hold holds the lock there.
-- Mirrored by the model checker's `Master::fence` (model/src/master.rs): change both.
-- KEYS[1]: the lock hash. KEYS[2]: the node's fencing counter. ARGV[1]: the hold's field.
-- ARGV[2]: the token.
-- Returns 1 when the counter now stands at the token or above, 0 when the hold is not here (a
-- key of another type included).
if redis.pcall('hexists', KEYS[1], ARGV[1]) ~= 1 then
    return 0
end
local counter = redis.call('get', KEYS[2])
if counter == false or tonumber(counter) < tonumber(ARGV[2]) then
    redis.call('set', KEYS[2], ARGV[2])
end
return 1
