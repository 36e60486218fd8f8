-- Give up every nested hold of many locks at once (client shutdown), and announce each release.
-- Mirrored by the model checker's `Master::abandon` (model/src/master.rs): change both.
-- KEYS[i]: a lock hash. ARGV[1]: the release message. ARGV[2i]: the hold's field in KEYS[i].
-- ARGV[2i + 1]: the channel of KEYS[i].
-- Returns how many of the locks were this process's and were deleted.
local released = 0
for i, key in ipairs(KEYS) do
    local owner, channel = ARGV[2 * i], ARGV[2 * i + 1]
    if redis.pcall('hexists', key, owner) == 1 then
        redis.call('del', key)
        announce(channel, ARGV[1])
        released = released + 1
    end
end
return released
