-- Prepended to every script of a read-write lock that reads its readers.
-- The readers hash: field = a read hold (its owner and generation), value = '<count> <deadline>'
-- (the hold count, and when the reader's lease ends, in milliseconds of the server's clock).
-- Every reader has its own deadline: a crashed reader frees the lock within its own lease,
-- whatever other readers keep doing, and the hash's expiry is only a bound (at least the latest
-- deadline), never what keeps a reader.
-- Mirrored by the model checker's read-write master (model/src/rw.rs): change both.

-- The server's clock, in milliseconds.
local function now_ms()
    local now = redis.call('time')
    return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

-- A reader's entry: its count and deadline (nil, nil for a value that is not one).
local function parse_reader(value)
    local count, deadline = string.match(value, '^(%d+) (%d+)$')
    return tonumber(count), tonumber(deadline)
end

local function reader_value(count, deadline)
    return string.format('%d %.0f', count, deadline)
end

-- Why `key` cannot be a readers hash (an error reply), or nil: a key of another type, a hash
-- without an expiry, or a hash whose values are not readers' entries (another lock's hash that
-- shares the key: a reentrant lock named `{name}:read`). Never deleted or changed: refused.
local function not_readers(key)
    local kind = redis.call('type', key)['ok']
    if kind == 'none' then
        return nil
    end
    if kind ~= 'hash' then
        return redis.error_reply('WRONGTYPE lock key holds a ' .. kind .. ' value')
    end
    if redis.call('pttl', key) < 0 then
        return redis.error_reply('WRONGTYPE lock key holds a hash with no expiry')
    end
    for _, value in ipairs(redis.call('hvals', key)) do
        if not parse_reader(value) then
            return redis.error_reply('WRONGTYPE lock key holds a hash of another lock kind')
        end
    end
    return nil
end

-- Why `key` cannot be a writer's hash (an error reply), or nil.
local function not_writer(key)
    local kind = redis.call('type', key)['ok']
    if kind == 'none' then
        return nil
    end
    if kind ~= 'hash' then
        return redis.error_reply('WRONGTYPE lock key holds a ' .. kind .. ' value')
    end
    if redis.call('pttl', key) < 0 then
        return redis.error_reply('WRONGTYPE lock key holds a hash with no expiry')
    end
    return nil
end

-- Why `key` cannot be the waiting writers' sorted set (an error reply), or nil.
local function not_waiting(key)
    local kind = redis.call('type', key)['ok']
    if kind ~= 'none' and kind ~= 'zset' then
        return redis.error_reply('WRONGTYPE lock key holds a ' .. kind .. ' value')
    end
    return nil
end

-- Drops the readers whose deadline passed (deleting the hash when none is left). Returns how
-- many are live, the latest deadline (0 with none), and `field`'s entry when it is live (its
-- count, 0 when it is not there, and its deadline). Call `not_readers` first: every value is
-- then a reader's entry.
local function live_readers(key, now, field)
    local entries = redis.call('hgetall', key)
    local live, latest, count, deadline = 0, 0, 0, 0
    for i = 1, #entries, 2 do
        local n, until_ms = parse_reader(entries[i + 1])
        if n and until_ms > now then
            live = live + 1
            latest = math.max(latest, until_ms)
            if entries[i] == field then
                count, deadline = n, until_ms
            end
        else
            redis.call('hdel', key, entries[i])
        end
    end
    if live == 0 and #entries > 0 then
        redis.call('del', key)
    end
    return live, latest, count, deadline
end

-- Keeps the readers hash at least until `deadline` (never shortens it).
local function keep_readers_until(key, now, deadline)
    local left = deadline - now
    if redis.call('pttl', key) < left then
        redis.call('pexpire', key, left)
    end
end

-- The first writer still waiting (its heartbeat not run out) other than `prefix`'s, and how
-- long its heartbeat still runs; drops the ones whose heartbeat ran out.
local function waiting_writer(key, now, prefix)
    redis.call('zremrangebyscore', key, '-inf', now)
    local waiting = redis.call('zrangebyscore', key, '(' .. now, '+inf', 'WITHSCORES')
    for i = 1, #waiting, 2 do
        if waiting[i] ~= prefix then
            return waiting[i], tonumber(waiting[i + 1]) - now
        end
    end
    return nil, 0
end
