-- Release one acquisition of a read hold (or a semaphore's permit) on one node (after
-- lua/announce.lua, the holders' kind and lua/rw_common.lua), in constant time; the last
-- reader's release deletes the readers hash and announces it (a writer may wait for it); every
-- permit's release is announced (lua/holders_permit.lua). A reader whose deadline passed and that nobody
-- purged yet still counts here: a writer waiting for it looks again by that deadline anyway.
-- KEYS and ARGV as lua/unlock.lua: KEYS[1] the readers hash; ARGV[1] the hold's field, [2] the
-- lock's channel, [3] the release message, [4] the hold's count before this release. Returns
-- the holds left (0: this reader is gone), or -1 when the hold is not here (a reader whose
-- deadline passed is not here).
-- Mirrored by the model checker's read-write master (model/src/rw.rs).
if not_readers(KEYS[1]) then
    return -1
end
local now = now_ms()
local expected = tonumber(ARGV[4])
local count, deadline, weight = reader_entry(KEYS[1], ARGV[1], now)
if count == expected then
    if count == 1 then
        if departed(drop_reader(KEYS[1], ARGV[1])) then
            announce(ARGV[2], ARGV[3])
        end
        return 0
    end
    redis.call('hset', KEYS[1], ARGV[1], reader_value(count - 1, deadline, weight))
    return count - 1
end
if count > 0 and count == expected - 1 then
    return count -- a retry whose first try was applied here
end
return -1
