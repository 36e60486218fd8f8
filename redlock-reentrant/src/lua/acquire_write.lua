-- Prepended to acquire.lua (after lua/rw_common.lua) for a read-write lock's write side:
-- KEYS[1] is the writer's hash, which acquire.lua takes as a reentrant lock's; a new write hold
-- also needs no live reader. KEYS[3]: the readers hash. KEYS[4]: the waiting writers (a sorted
-- set: owner prefix -> heartbeat deadline, server milliseconds). ARGV[6]: '1' when the caller
-- waits (a writer that will wait registers, so new readers wait behind it), '0' for one try
-- (it never holds readers up). ARGV[7]: the heartbeat in milliseconds.
-- A refused writer that waits is told to look again within a third of its heartbeat, so its
-- registration stays live for as long as it waits and runs out within a heartbeat once it
-- crashed. Only a new hold registers (a nested one never waits), and never behind a later hold
-- of its own owner (this is then a late request of an earlier attempt).
local function wait_behind(pttl, holder, now)
    if ARGV[6] == '1' and ARGV[3] == '0' and string.sub(holder, 1, #ARGV[5]) ~= ARGV[5] then
        local heartbeat = tonumber(ARGV[7])
        redis.call('zadd', KEYS[4], now + heartbeat, ARGV[5])
        if redis.call('pttl', KEYS[4]) < heartbeat then
            redis.call('pexpire', KEYS[4], heartbeat)
        end
        pttl = math.max(1, math.min(pttl, math.floor(heartbeat / 3)))
    end
    return {0, pttl, holder}
end

local function refuse_new()
    local wrong = not_readers(KEYS[3]) or not_waiting(KEYS[4])
    if wrong then
        return wrong
    end
    local now = now_ms()
    local live, latest = live_readers(KEYS[3], now, '')
    if live > 0 then
        -- Every node names the readers alike, so that a majority of them can be waited for.
        return wait_behind(latest - now, 'readers', now)
    end
    return nil
end

local function on_new_hold()
    redis.call('zrem', KEYS[4], ARGV[5])
end

local function refused_by(pttl, holder)
    local wrong = not_waiting(KEYS[4])
    if wrong then
        return wrong
    end
    return wait_behind(pttl, holder, now_ms())
end
