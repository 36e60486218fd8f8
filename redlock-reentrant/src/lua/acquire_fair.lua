-- Prepended to acquire.lua for a fair lock: KEYS[1] is the fair lock's own hash, which
-- acquire.lua takes as a reentrant lock's; a new hold also needs to be first among the live
-- waiters. KEYS[3]: the queue (a sorted set: owner prefix -> ticket, in the order the waiters
-- came). KEYS[4]: their heartbeats (owner prefix -> deadline, server milliseconds). KEYS[5]:
-- the ticket counter. ARGV[6]: '1' when the caller waits (it takes a ticket, or keeps its own,
-- and refreshes its heartbeat), '0' for one try (it never queues, and never goes before a
-- waiter). ARGV[7]: the heartbeat in milliseconds.
-- A waiter whose heartbeat ran out is dropped from the queue wherever it stands, by any caller;
-- a live one is never dropped, however long it waits. A refused waiter is told to look again
-- within a third of its heartbeat, which its look refreshes. Every key expires with the latest
-- heartbeat.
local function now_ms()
    local now = redis.call('time')
    return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

local function not_queue(key)
    local kind = redis.call('type', key)['ok']
    if kind ~= 'none' and kind ~= 'zset' then
        return redis.error_reply('WRONGTYPE lock key holds a ' .. kind .. ' value')
    end
    return nil
end

-- Once nobody waits, the ticket counter goes too (no ticket is out): nothing is left behind.
local function forget_tickets_if_empty()
    if redis.call('zcard', KEYS[3]) == 0 then
        redis.call('del', KEYS[4], KEYS[5])
    end
end

-- Drops the waiters whose heartbeat ran out, wherever they stand; and a first waiter with no
-- heartbeat at all (its heartbeat's key lost, say to eviction), which nobody could ever purge.
local function purge(now)
    local dead = redis.call('zrangebyscore', KEYS[4], '-inf', now)
    for _, waiter in ipairs(dead) do
        redis.call('zrem', KEYS[3], waiter)
    end
    if #dead > 0 then
        redis.call('zremrangebyscore', KEYS[4], '-inf', now)
    end
    local first = redis.call('zrange', KEYS[3], 0, 0)[1]
    while first and not redis.call('zscore', KEYS[4], first) do
        redis.call('zrem', KEYS[3], first)
        first = redis.call('zrange', KEYS[3], 0, 0)[1]
    end
    forget_tickets_if_empty()
end

-- Queues the caller (keeping its ticket if it has one) and refreshes its heartbeat.
local function queue(now)
    local heartbeat = tonumber(ARGV[7])
    if not redis.call('zscore', KEYS[3], ARGV[5]) then
        local ticket = redis.call('incr', KEYS[5])
        redis.call('zadd', KEYS[3], ticket, ARGV[5])
    end
    redis.call('zadd', KEYS[4], now + heartbeat, ARGV[5])
    for i = 3, 5 do
        if redis.call('pttl', KEYS[i]) < heartbeat then
            redis.call('pexpire', KEYS[i], heartbeat)
        end
    end
    return heartbeat
end

-- The refusal of a new hold: queued when it waits, told to look again in time to refresh.
local function wait_behind(pttl, holder, now)
    if ARGV[6] == '1' and ARGV[3] == '0' and string.sub(holder, 1, #ARGV[5]) ~= ARGV[5] then
        local heartbeat = queue(now)
        pttl = math.max(1, math.min(pttl, math.floor(heartbeat / 3)))
    end
    return {0, pttl, holder}
end

-- Why the queue's keys cannot be a queue's (an error reply), or nil; then the time, with the
-- dead waiters purged.
local function purged()
    local wrong = not_queue(KEYS[3]) or not_queue(KEYS[4])
    if wrong then
        return wrong
    end
    local now = now_ms()
    purge(now)
    return nil, now
end

local function refuse_new()
    local wrong, now = purged()
    if wrong then
        return wrong
    end
    local first = redis.call('zrange', KEYS[3], 0, 0)[1]
    if first and first ~= ARGV[5] then
        -- Every node names the queue alike, so that a majority of them can be waited for.
        local heartbeat = tonumber(ARGV[7])
        return wait_behind(math.floor(heartbeat / 3), 'queue', now)
    end
    return nil
end

local function on_new_hold()
    redis.call('zrem', KEYS[3], ARGV[5])
    redis.call('zrem', KEYS[4], ARGV[5])
    forget_tickets_if_empty()
end

local function refused_by(pttl, holder)
    local wrong, now = purged()
    if wrong then
        return wrong
    end
    return wait_behind(pttl, holder, now)
end
