-- The next fencing candidate of a new hold (KEYS[2]: the node's fencing counter; ARGV[4]: the
-- smallest candidate the client wants, 0 for none): one more than the counter, and at least
-- what the client asks for, so that every node granting the same hold tends to give the same
-- candidate (and the token needs no write-back). A node without a counter (new, or restarted
-- empty) starts from its clock in microseconds, so it never hands out a token below the ones
-- it gave before it lost the counter (see docs/fencing.md). `CLOCK_EVERY_HOLD` (set by the
-- prelude before this one: true on Redis Cluster members) takes the clock at every new hold,
-- because a failover can bring back an older counter rather than none.
local function fencing_candidate()
    local counter = redis.call('incr', KEYS[2])
    local candidate = counter
    if counter == 1 or CLOCK_EVERY_HOLD then
        local now = redis.call('time')
        local clock = tonumber(now[1] .. string.format('%06d', tonumber(now[2])))
        if clock > candidate then
            candidate = clock
        end
    end
    -- A hint is followed only below 2^53, where Lua's numbers are exact integers.
    local wanted = tonumber(ARGV[4])
    if candidate < wanted and wanted < 9007199254740992 then
        candidate = wanted
    end
    if candidate ~= counter then
        redis.call('set', KEYS[2], string.format('%.0f', candidate))
    end
    return candidate
end
