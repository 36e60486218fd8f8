-- Give up read holds (or permits) of many locks at once (client shutdown, a lost hold's
-- leftovers), after lua/announce.lua, the holders' kind and lua/rw_common.lua; the last
-- reader's departure is announced, and every permit's.
-- KEYS and ARGV as lua/abandon.lua: KEYS[i] a readers hash; ARGV[1] the release message;
-- ARGV[2i] the hold's field in KEYS[i]; ARGV[2i + 1] the channel of KEYS[i].
-- Returns how many of the read holds were this process's and were removed.
local released = 0
for i, key in ipairs(KEYS) do
    local owner, channel = ARGV[2 * i], ARGV[2 * i + 1]
    if not not_readers(key) and redis.call('hexists', key, owner) == 1 then
        if departed(drop_reader(key, owner)) then
            announce(channel, ARGV[1])
        end
        released = released + 1
    end
end
return released
